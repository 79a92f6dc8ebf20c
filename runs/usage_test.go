package runs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
	"github.com/agent-box/agent-box/supervisor"
)

// usageScript is a run of three processes: two children forked first (one
// spins until it has used 0.6 s of CPU time, says "spun", then both sleep),
// then the parent makes ~100 MB resident, page by page, says "ready" and
// sleeps. The spinner counts its own CPU time, not the wall clock: on a
// busy box half a second of wall time is much less CPU (a child's times
// start at zero at its fork, times(2)).
const usageScript = `
import os, time
for i in range(2):
    if os.fork() == 0:
        while i == 0 and time.process_time() < 0.6:
            pass
        if i == 0:
            print("spun", flush=True)
        time.sleep(600)
        os._exit(0)
b = bytearray(100 << 20)
for i in range(0, len(b), 4096):
    b[i] = 1
print("ready", flush=True)
time.sleep(600)
`

// vmRSS is the VmRSS of pid, in bytes, read here and not through proc.
func vmRSS(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	require.NoError(t, err)
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// treePids are root's descendants, by /proc/PID/task/*/children.
func treePids(t *testing.T, root int) []int {
	t.Helper()
	var out []int
	kids, err := proc.Children(root)
	require.NoError(t, err)
	for _, k := range kids {
		out = append(out, k)
		out = append(out, treePids(t, k)...)
	}
	return out
}

// A running run's usage sums its processes: memory within 10 % of their
// VmRSS as /proc says, CPU time, and every one of them counted. A run with
// limits reads the same from its cgroup.
func TestUsageOfARunningRun(t *testing.T) {
	t.Setenv("AGENT_BOX_TEST_SUPERVISOR", "1")
	t.Run("proc", func(t *testing.T) { usageMatchesProc(t, nil, UsageFromProc) })
	t.Run("cgroup", func(t *testing.T) { usageMatchesProc(t, &runrecord.Limits{MemoryMB: 1024}, UsageFromCgroup) })
}

func usageMatchesProc(t *testing.T, limits *runrecord.Limits, from string) {
	sys, err := NewLiveSystem(supervisor.NewExecutables(os.Args[0]))
	require.NoError(t, err)
	m := &Manager{Store: newStore(t), Sys: sys, Env: os.Environ(),
		Supervisor: []string{os.Args[0], "-test.run=^TestHelperSupervisor$", "--"}}
	res, err := m.Start(context.Background(), StartRequest{Name: "mem", Spec: Spec{Argv: []string{"python3", "-c", usageScript}, Cwd: "/", Limits: limits}})
	require.NoError(t, err)
	t.Cleanup(func() { m.Kill("mem", "", unix.SIGKILL, 0) })

	var run Run
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		out, _ := os.ReadFile(res.Run.LogPath)
		page, err := m.ListPage(ListQuery{})
		require.NoError(t, err)
		run = page.Runs[0]
		require.Equal(t, outcome.Running, run.State, run.Reason)
		// Once both have said so, the three processes are there and the
		// spinner has used its CPU time: the usage must show it now.
		if bytes.Contains(out, []byte("ready")) && bytes.Contains(out, []byte("spun")) {
			break
		}
		require.True(t, time.Now().Before(deadline), "usage %+v, log %q", run.Usage, out)
	}
	rec, err := m.Store.Read("mem", res.Run.RunID)
	require.NoError(t, err)
	pids := treePids(t, rec.SupervisorPID)
	require.Len(t, pids, 3, "the test's own count of the run's processes")
	var rss int64
	for _, pid := range pids {
		rss += vmRSS(t, pid)
	}
	u := run.Usage
	require.NotNil(t, u)
	assert.Equal(t, 3, u.Procs)
	t.Logf("usage %+v; VmRSS summed here %d", *u, rss)
	assert.Equal(t, from, u.From)
	assert.GreaterOrEqual(t, rss, int64(100<<20))
	assert.InEpsilon(t, rss, u.MemoryBytes, 0.10, "memory_bytes %d, /proc says %d", u.MemoryBytes, rss)
	if from == UsageFromCgroup {
		// The most the group was charged at once: each page once,
		// however many processes share it.
		assert.Greater(t, u.PeakMemoryBytes, int64(100<<20))
		assert.LessOrEqual(t, u.PeakMemoryBytes, int64(limits.MemoryMB)<<20)
	} else {
		assert.GreaterOrEqual(t, u.PeakMemoryBytes, u.MemoryBytes)
	}
	assert.GreaterOrEqual(t, u.CPUMS, int64(500), "a child spun for 0.6 s of CPU time")

	// process_wait's answer has it too.
	w, err := m.Wait(context.Background(), WaitRequest{Names: []string{"mem"}, Timeout: new(time.Millisecond)})
	require.NoError(t, err)
	require.NotNil(t, w.Run.Usage)
	assert.Equal(t, 3, w.Run.Usage.Procs)
}

// treeProcs is a live run: supervisor 99, its leader 100 with a child
// 200, an orphan 300 the supervisor inherited, and a run started from
// inside (a nested supervisor 400 and its child 401), which is not this
// run's. Usage: pid MiB resident, twice that at peak, pid ms of CPU; the
// start time must be the one the snapshot holds.
func treeProcs() *fakeProcs {
	p := reusedProcs(false)
	p.probe = func(pid int, start uint64) (outcome.Liveness, proc.Stat) {
		switch pid {
		case 99:
			return outcome.Same, proc.Stat{PID: 99, PGID: 99, SID: 99, StartTime: 1}
		case 100:
			return outcome.Same, proc.Stat{PID: 100, PPID: 99, PGID: 100, SID: 99, StartTime: 1}
		}
		return outcome.Gone, proc.Stat{}
	}
	p.processes = func() ([]proc.Stat, error) {
		return []proc.Stat{
			{PID: 99, PPID: 1, PGID: 99, SID: 99, StartTime: 1, State: 'S'},
			{PID: 100, PPID: 99, PGID: 100, SID: 99, StartTime: 1, State: 'S'},
			{PID: 200, PPID: 100, PGID: 100, SID: 99, StartTime: 2, State: 'S'},
			{PID: 300, PPID: 99, PGID: 300, SID: 300, StartTime: 3, State: 'S'},
			{PID: 400, PPID: 100, PGID: 400, SID: 400, StartTime: 4, State: 'S'},
			{PID: 401, PPID: 400, PGID: 401, SID: 400, StartTime: 5, State: 'S'},
		}, nil
	}
	p.isSupervisor = func(p proc.Stat) bool { return p.PID == 400 }
	p.children = func(pid int) ([]int, error) {
		return map[int][]int{99: {100, 300}, 100: {200, 400}, 400: {401}}[pid], nil
	}
	p.usage = func(pid int, start uint64) (proc.Usage, error) {
		if want := map[int]uint64{100: 1, 200: 2, 300: 3, 400: 4, 401: 5}[pid]; want != start {
			return proc.Usage{}, proc.ErrNoProcess
		}
		return proc.Usage{CPUMS: int64(pid), RSSBytes: int64(pid) << 20, PeakRSSBytes: int64(pid) << 21}, nil
	}
	return p
}

func TestUsageSumsTheRunsOwnProcesses(t *testing.T) {
	for _, many := range []bool{false, true} {
		t.Run(fmt.Sprintf("bulk=%v", many), func(t *testing.T) {
			store := newStore(t)
			n := 1
			if many {
				n = bulkProbe + 1 // listed from one snapshot
			}
			for range n {
				require.NoError(t, store.Create(record(store, "boot")))
			}
			m := &Manager{Store: store, Sys: fakeSystem(treeProcs())}
			page, err := m.ListPage(ListQuery{All: true})
			require.NoError(t, err)
			require.Len(t, page.Runs, n)
			for _, run := range page.Runs {
				require.Equal(t, outcome.ReasonRunning, run.Verdict.Reason, run.Reason)
				assert.Equal(t, &Usage{MemoryBytes: 600 << 20, PeakMemoryBytes: 1200 << 20, CPUMS: 600, Procs: 3, From: UsageFromProc}, run.Usage,
					"leader 100, its child 200 and the orphan 300; not the nested run's 400 and 401")
			}
			run, err := m.Get("r", page.Runs[0].RunID)
			require.NoError(t, err)
			assert.Nil(t, run.Usage, "a plain read of a run does not look at its usage")
		})
	}
}

// An exited run shows what the supervisor recorded at the exit; a figure
// a record makes negative counts 0; a run that recorded none shows none.
func TestUsageAtTheExit(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cpu, peak int64
		want      *Usage
	}{
		{"recorded", 1234, 5 << 20, &Usage{CPUMS: 1234, PeakMemoryBytes: 5 << 20, From: UsageAtExit}},
		{"negative", -5, 7 << 20, &Usage{PeakMemoryBytes: 7 << 20, From: UsageAtExit}},
		{"none", 0, 0, nil},
		{"only negative", -1, -1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newStore(t)
			rec := record(store, "boot")
			code := 0
			rec.Exit = &runrecord.Exit{Code: &code, At: time.Now().UTC(), CPUMS: tc.cpu, PeakMemoryBytes: tc.peak}
			rec.FinishedAt, rec.OutputClosed = &rec.Exit.At, true
			require.NoError(t, store.Create(rec))
			m := &Manager{Store: store, Sys: fakeSys(gone)}
			page, err := m.ListPage(ListQuery{})
			require.NoError(t, err)
			require.Equal(t, outcome.Exited, page.Runs[0].State)
			assert.Equal(t, tc.want, page.Runs[0].Usage)
		})
	}
}

// A run of one process costs two reads of children lists, not a scan of
// /proc.
func TestUsageOfALoneLeaderScansNothing(t *testing.T) {
	store := newStore(t)
	require.NoError(t, store.Create(record(store, "boot")))
	// The leader is the run's only process: the supervisor's only child,
	// without children of its own.
	p, scans := treeProcs(), 0
	tree := p.processes
	p.processes = func() ([]proc.Stat, error) {
		scans++
		return tree()
	}
	p.children = func(pid int) ([]int, error) { return map[int][]int{99: {100}}[pid], nil }
	m := &Manager{Store: store, Sys: fakeSystem(p)}
	page, err := m.ListPage(ListQuery{})
	require.NoError(t, err)
	assert.Equal(t, &Usage{MemoryBytes: 100 << 20, PeakMemoryBytes: 200 << 20, CPUMS: 100, Procs: 1, From: UsageFromProc}, page.Runs[0].Usage)
	assert.Zero(t, scans, "scans of /proc")
}
