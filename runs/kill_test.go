package runs

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
	"github.com/agent-box/agent-box/supervisor"
)

// TestHelperFakeSupervisor is not a test: with AGENT_BOX_FAKE_SUP=1 it
// plays a supervisor that started a child in its own group and has not yet
// written the exit: it prints the child's pid and never reaps it.
func TestHelperFakeSupervisor(t *testing.T) {
	if os.Getenv("AGENT_BOX_FAKE_SUP") != "1" {
		t.Skip("helper process")
	}
	// A subreaper, as the real supervisor is: the leader's orphans come to it.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		os.Exit(1)
	}
	c := exec.Command("/bin/sh", "-c", `(trap "" TERM; exec sleep 30) & wait`)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		os.Exit(1)
	}
	os.Stdout.WriteString(strconv.Itoa(c.Process.Pid) + "\n")
	time.Sleep(30 * time.Second)
	os.Exit(0)
}

// process_kill with grace_ms must SIGKILL a group member that ignores TERM,
// also when the leader died of the TERM and the run reads "exiting" (its
// exit not yet written) for the whole grace period.
func TestKillGraceEscalatesWhileExitIsBeingRecorded(t *testing.T) {
	t.Parallel() // its own store; Kill waits out its bounded waits for a record nobody writes
	sys, err := NewLiveSystem(supervisor.NewExecutables(os.Args[0]))
	require.NoError(t, err)
	store := newStore(t)

	rec := record(store, sys.Boot)
	rec.Name = "k"
	rec.LogPath = store.LogPath(rec.Name, rec.RunID)
	// Its command line names the run, as a real supervisor's does.
	sup := exec.Command(os.Args[0], "-test.run=^TestHelperFakeSupervisor$", "--", rec.Name, rec.RunID)
	sup.Env = append(os.Environ(), "AGENT_BOX_FAKE_SUP=1")
	sup.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := sup.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, sup.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	pgid, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err)
	t.Cleanup(func() { unix.Kill(-pgid, unix.SIGKILL); sup.Process.Kill(); sup.Wait() })

	var member int
	for deadline := time.Now().Add(5 * time.Second); member == 0; time.Sleep(10 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "background member never appeared")
		procs, _ := proc.Processes()
		for _, p := range procs {
			if p.PGID == pgid && p.PID != pgid {
				member = p.PID
			}
		}
	}
	supStat, err := proc.ReadStat(sup.Process.Pid)
	require.NoError(t, err)
	supStart := supStat.StartTime
	childStat, err := proc.ReadStat(pgid)
	require.NoError(t, err)
	childStart := childStat.StartTime
	rec.SupervisorPID, rec.SupervisorStartTime = sup.Process.Pid, supStart
	rec.PID, rec.PIDStartTime = pgid, childStart
	require.NoError(t, store.Create(rec))

	m := &Manager{Store: store, Sys: sys}
	run, err := m.Get("k", "")
	require.NoError(t, err)
	require.Equal(t, "running", run.Reason, "setup")

	res, err := m.Kill("k", "", unix.SIGTERM, 300*time.Millisecond)
	require.NoError(t, err)
	t.Logf("kill: %s (escalated=%v)", res.Message, res.Escalated)
	require.True(t, res.Escalated, "kill: %s", res.Message)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		st, err := proc.ReadStat(member)
		if err != nil || st.Dead() {
			break
		}
		require.True(t, time.Now().Before(deadline), "group member %d ignoring TERM is still alive after TERM + grace_ms; kill said %q", member, res.Message)
	}
}

// changing is sys whose /proc scans find first sys's procs, then later:
// the snapshot a kill takes is not the one the verdict was made from.
func changing(sys *plantedSys, later []proc.Stat) System {
	s, scans := sys.system(), 0
	s.Procs.(*fakeProcs).processes = func() ([]proc.Stat, error) {
		if scans++; scans > 1 {
			return later, nil
		}
		return sys.procs, nil
	}
	return s
}

// Once the leader is gone its group is signalled only while a member of
// the run is seen in it (outcome.Targets): a kill whose snapshot no longer
// finds the survivor the verdict counted, or finds the group's id held by
// a stranger in another session, leaves the group alone.
func TestKillSignalsAGoneLeadersGroupOnlyWithAMemberSeen(t *testing.T) {
	member := proc.Stat{PID: 510, PPID: 1, PGID: 500, SID: 99, StartTime: 2, State: 'S'}
	stranger := proc.Stat{PID: 520, PPID: 1, PGID: 500, SID: 777, StartTime: 9, State: 'S'}
	for _, tc := range []struct {
		name  string
		later []proc.Stat
		want  []int
	}{
		{"member still there", []proc.Stat{member}, []int{-500}},
		{"member gone", nil, nil},
		{"group id held by a stranger in another session", []proc.Stat{stranger}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newStore(t)
			rec := record(store, "boot")
			code := 0
			now := time.Now().UTC()
			rec.PID, rec.SupervisorPID = 500, 99
			rec.Exit, rec.FinishedAt, rec.OutputClosed = &runrecord.Exit{Code: &code, At: now}, &now, true
			require.NoError(t, store.Create(rec))
			sys := &plantedSys{self: outcome.Self{PID: 4000, PGID: 4001, SID: 4002}, sup: 99, sid: 99, tagged: true,
				procs: []proc.Stat{member}}
			m := &Manager{Store: store, Sys: changing(sys, tc.later)}
			_, err := m.Kill(rec.Name, "", unix.SIGKILL, 0)
			require.NoError(t, err)
			require.Equal(t, tc.want, sys.signals)
		})
	}
}
