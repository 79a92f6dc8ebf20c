package cgroup

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"github.com/moby/sys/mountinfo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func v1mount(dir, opts string) *mountinfo.Info {
	return &mountinfo.Info{Mountpoint: "/sys/fs/cgroup/" + dir, Root: "/", FSType: "cgroup", VFSOptions: "rw," + opts}
}

// parse finds each controller's hierarchy by its mount's options and the
// process's path in it, on the layouts boxes have.
func TestParse(t *testing.T) {
	t.Parallel()
	hybrid := []*mountinfo.Info{
		v1mount("cpu,cpuacct", "cpu,cpuacct"),
		v1mount("memory", "memory"),
		v1mount("pids", "pids"),
		v1mount("systemd", "xattr,name=systemd"),
		{Mountpoint: "/sys/fs/cgroup/unified", Root: "/", FSType: "cgroup2"},
	}
	for _, tc := range []struct {
		name   string
		mounts []*mountinfo.Info
		procs  string
		want   *Hierarchy
	}{
		{"v1 with systemd", hybrid,
			"12:pids:/user.slice/user-1000.slice\n4:memory:/user.slice/user-1000.slice/session-3.scope\n3:cpu,cpuacct:/user.slice\n1:name=systemd:/user.slice/x\n0::/user.slice/x\n",
			&Hierarchy{Dirs: map[string]string{
				"pids":    "/sys/fs/cgroup/pids/user.slice/user-1000.slice",
				"memory":  "/sys/fs/cgroup/memory/user.slice/user-1000.slice/session-3.scope",
				"cpu":     "/sys/fs/cgroup/cpu,cpuacct/user.slice",
				"cpuacct": "/sys/fs/cgroup/cpu,cpuacct/user.slice",
			}}},
		{"v2 only", []*mountinfo.Info{{Mountpoint: "/sys/fs/cgroup", Root: "/", FSType: "cgroup2"}},
			"0::/user.slice/user-1000.slice/session-3.scope\n",
			&Hierarchy{V2: true, Root: "/sys/fs/cgroup", Dirs: map[string]string{"": "/sys/fs/cgroup/user.slice/user-1000.slice/session-3.scope"}}},
		{"container: the mount shows a subtree", []*mountinfo.Info{{Mountpoint: "/sys/fs/cgroup", Root: "/docker/abc", FSType: "cgroup2"}},
			"0::/docker/abc\n",
			&Hierarchy{V2: true, Dirs: map[string]string{"": "/sys/fs/cgroup"}}},
		{"a path outside the mounted subtree is not found", []*mountinfo.Info{{Mountpoint: "/sys/fs/cgroup", Root: "/docker/abc", FSType: "cgroup2"}},
			"0::/docker/abcdef\n", nil},
		{"no cgroup mounted", nil, "0::/\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := parse(tc.mounts, tc.procs)
			if tc.want == nil {
				require.ErrorIs(t, err, ErrUnavailable)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, h)
		})
	}
}

// fakeV2 makes a v2 group directory offering controllers.
func fakeV2(t *testing.T, dir, controllers string) string {
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cgroup.controllers"), []byte(controllers), 0o644))
	return dir
}

// Under v2 a run's group is made in the group systemd delegated to its
// supervisor: that group must offer what the limits need. The server asks
// beforehand whether systemd would delegate them: root's scopes get what
// the root offers, a user's what its manager was given.
func TestCheckV2(t *testing.T) {
	t.Parallel()
	mem := Limits{MemoryBytes: 64 << 20}
	given := &Hierarchy{V2: true, Dirs: map[string]string{"": fakeV2(t, t.TempDir(), "memory pids\n")}}
	assert.NoError(t, given.Check(mem))
	err := given.Check(Limits{CPUPercent: 50})
	require.ErrorIs(t, err, ErrUnavailable)
	assert.Contains(t, err.Error(), "does not offer the cpu controller (it offers: memory pids)")
	assert.Contains(t, err.Error(), "Delegate=yes")

	root := t.TempDir()
	fakeV2(t, root, "cpuset cpu io memory pids\n")
	fakeV2(t, filepath.Join(root, "user.slice/user-1000.slice/user@1000.service"), "cpu pids\n")
	h := &Hierarchy{V2: true, Root: root, Dirs: map[string]string{"": filepath.Join(root, "user.slice/user-1000.slice/session-3.scope")}}
	assert.NoError(t, h.CheckDelegable(mem, 0), "root's scopes get the root's controllers")
	assert.NoError(t, h.CheckDelegable(Limits{CPUPercent: 50, Pids: 9}, 1000))
	err = h.CheckDelegable(mem, 1000)
	require.ErrorIs(t, err, ErrUnavailable)
	assert.Contains(t, err.Error(), "systemd's manager of uid 1000 is not given the memory controller (it has: cpu pids)")
	err = h.CheckDelegable(mem, 1001)
	require.ErrorIs(t, err, ErrUnavailable)
	assert.Contains(t, err.Error(), "loginctl enable-linger")
	container := &Hierarchy{V2: true, Dirs: h.Dirs}
	assert.ErrorIs(t, container.CheckDelegable(mem, 0), ErrUnavailable, "a container's subtree: no systemd of ours to ask")
}

// A v1 box without a controller's hierarchy refuses the limit it takes.
func TestCheckV1MissingController(t *testing.T) {
	t.Parallel()
	h := &Hierarchy{Dirs: map[string]string{"memory": t.TempDir()}}
	assert.NoError(t, h.Check(Limits{MemoryBytes: 1 << 30}))
	err := h.Check(Limits{Pids: 5})
	require.ErrorIs(t, err, ErrUnavailable)
	assert.Contains(t, err.Error(), "the pids cgroup controller is not mounted")
}

// Usage reads each version's counters; the OOM count is the kernel's own.
func TestUsage(t *testing.T) {
	t.Parallel()
	write := func(dir string, files map[string]string) {
		for name, content := range files {
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
		}
	}
	mem, cpu := t.TempDir(), t.TempDir()
	write(mem, map[string]string{
		"memory.max_usage_in_bytes": "9000\n",
		"memory.oom_control":        "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
		"cgroup.procs":              "10\n11\n12\n",
	})
	write(cpu, map[string]string{"cpuacct.usage": "2500000000\n", "cgroup.procs": "10\n11\n12\n"})
	pids := t.TempDir()
	write(pids, map[string]string{"pids.events": "max 4\n", "cgroup.procs": "10\n11\n12\n"})
	g := &Group{dirs: map[string]string{"memory": mem, "cpuacct": cpu, "pids": pids}}
	u, err := g.Usage()
	require.NoError(t, err)
	assert.Equal(t, Usage{Pids: []int{10, 11, 12}, PeakMemoryBytes: 9000, CPUNanos: 2_500_000_000, OOMKills: 2, PidsMaxHit: 4}, u, "v1 counts no cap OOMs but WatchOOM's")

	v2 := t.TempDir()
	write(v2, map[string]string{
		"memory.peak":   "5000\n",
		"cpu.stat":      "usage_usec 1500\nuser_usec 1000\n",
		"memory.events": "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n",
		"pids.events":   "max 6\n",
		"cgroup.procs":  "7\n",
	})
	u, err = (&Group{v2: true, dirs: map[string]string{"": v2}}).Usage()
	require.NoError(t, err)
	assert.Equal(t, Usage{Pids: []int{7}, PeakMemoryBytes: 5000, CPUNanos: 1_500_000, OOMKills: 1, LimitHits: 1, PidsMaxHit: 6}, u)
}

// On this machine's real hierarchy: a group is made with its caps, the
// child is born in it while the maker stays out, and it is removed. The
// tests that start into a v1 group are not parallel: the test process
// itself moves, and another test would read its own groups wrong.
func TestCreateStartRemove(t *testing.T) {
	h, err := Self()
	require.NoError(t, err)
	l := Limits{MemoryBytes: 64 << 20, Pids: 8, CPUPercent: 150}
	if err := h.Check(l); err != nil {
		t.Fatalf("this machine cannot enforce limits (%v): the suite runs where it can (make test as root on a cgroup v1 or delegated v2 box)", err)
	}
	g, err := h.Create(testLeaf(t, "t"), l)
	require.NoError(t, err)
	cmd := newSleep()
	require.NoError(t, g.Start(cmd))
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); g.Remove() })
	u, err := g.Usage()
	require.NoError(t, err)
	assert.Equal(t, []int{cmd.Process.Pid}, u.Pids, "only the child is in the group")
	self, err := Self()
	require.NoError(t, err)
	assert.Equal(t, h.Dirs, self.Dirs, "the maker is back where it was")
	for c, dir := range g.dirs {
		procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		require.NoError(t, err, c)
		assert.Equal(t, itoa(cmd.Process.Pid)+"\n", string(procs), c)
	}
	if !g.v2 {
		max, err := number(g.dirs["pids"], "pids.max")
		require.NoError(t, err)
		assert.Equal(t, int64(8), max, "the pids cap is written once the maker is out")
		lim, err := number(g.dirs["memory"], "memory.limit_in_bytes")
		require.NoError(t, err)
		assert.Equal(t, int64(64<<20), lim)
		quota, err := number(g.dirs["cpu"], "cpu.cfs_quota_us")
		require.NoError(t, err)
		period, err := number(g.dirs["cpu"], "cpu.cfs_period_us")
		require.NoError(t, err)
		assert.Equal(t, [2]int64{150_000, 100_000}, [2]int64{quota, period}, "one and a half CPUs")
	}
	require.Error(t, g.Remove(), "a group with a process stays")
	cmd.Process.Kill()
	cmd.Wait()
	require.NoError(t, g.Remove())
	for _, dir := range g.dirs {
		assert.NoDirExists(t, dir)
	}
}

// The v2 claim and start on this machine's unified hierarchy: the maker,
// alone in a group as systemd-run --scope -p Delegate=yes leaves it, moves
// itself below it, and its child is born in the run's group beside it
// (clone3). A group with no caps needs no controller, so this runs on a
// hybrid box, whose unified hierarchy has none of them. Not parallel: the
// test process itself moves (in the unified hierarchy only).
func TestV2ClaimAndStart(t *testing.T) {
	mounts, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("cgroup2"))
	require.NoError(t, err)
	self, err := os.ReadFile("/proc/self/cgroup")
	require.NoError(t, err)
	h, err := parse(mounts, string(self))
	if err != nil || !h.V2 || writable(h.Dirs[""]) != nil {
		t.Skipf("no writable cgroup v2 hierarchy here (%v): the v1 path is tested instead", err)
	}
	home := h.Dirs[""]
	given := filepath.Join(home, "agent-box-test-"+filepath.Base(t.TempDir()))
	require.NoError(t, os.Mkdir(given, 0o755))
	pid := itoa(os.Getpid())
	require.NoError(t, write(given, "cgroup.procs", pid))
	t.Cleanup(func() {
		write(home, "cgroup.procs", pid)
		unix.Rmdir(filepath.Join(given, SupervisorLeaf))
		unix.Rmdir(given)
	})

	mine := &Hierarchy{V2: true, Dirs: map[string]string{"": given}}
	g, err := mine.Create(Leaf("v2", "r1"), Limits{})
	require.NoError(t, err)
	cmd := newSleep()
	require.NoError(t, g.Start(cmd))
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); g.Remove() })
	rel := strings.TrimPrefix(given, mounts[0].Mountpoint)
	cg, err := os.ReadFile(filepath.Join("/proc", itoa(cmd.Process.Pid), "cgroup"))
	require.NoError(t, err)
	assert.Contains(t, string(cg), "0::"+rel+"/"+Leaf("v2", "r1")+"\n", "born in the run's group")
	now, err := os.ReadFile("/proc/self/cgroup")
	require.NoError(t, err)
	assert.Contains(t, string(now), "0::"+rel+"/"+SupervisorLeaf+"\n", "the maker moved below its group")

	// Found from the maker, as the server finds it from the supervisor.
	now2, err := parse(mounts, string(now))
	require.NoError(t, err)
	found := now2.RunGroup(Leaf("v2", "r1"))
	require.NotNil(t, found)
	assert.Equal(t, g.dirs, found.dirs)

	// Not alone: refused, saying why. (The maker is below it now, and
	// another process joins the group.)
	other := newSleep()
	require.NoError(t, other.Start())
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	require.NoError(t, write(given, "cgroup.procs", itoa(other.Process.Pid)))
	_, err = (&Hierarchy{V2: true, Dirs: map[string]string{"": given}}).Create(Leaf("v2", "r2"), Limits{})
	require.ErrorIs(t, err, ErrUnavailable)
	assert.Contains(t, err.Error(), "holds other processes")
}

// cgroup.procs comes a page per read(2) (a seq_file): a list longer than
// a page is read to its end, and every process counted.
func TestCountProcsReadsToTheEnd(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := range 1200 {
		b.WriteString(itoa(10000+i) + "\n")
	}
	data, err := readAll(iotest.OneByteReader(strings.NewReader(b.String())))
	require.NoError(t, err)
	assert.Len(t, parsePids(data), 1200)
}

// fakeV1Memory makes a v1 memory group with a 32 MiB cap in a temp dir,
// with files (memory.max_usage_in_bytes and the like) on top, and starts
// its OOM watch. signal is the kernel's side of the watch: it adds n
// events to the eventfd the group registered in cgroup.event_control.
func fakeV1Memory(t *testing.T, files map[string]string) (g *Group, stop func(), signal func(n uint64)) {
	t.Helper()
	dir := t.TempDir()
	for name, content := range map[string]string{
		"memory.limit_in_bytes": itoa(32<<20) + "\n",
		"memory.oom_control":    "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n",
		"cgroup.event_control":  "",
		"cgroup.procs":          "",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	g = &Group{dirs: map[string]string{"memory": dir}, limits: Limits{MemoryBytes: 32 << 20}}
	stop, err := g.WatchOOM()
	require.NoError(t, err)
	t.Cleanup(stop)
	ctl, err := os.ReadFile(filepath.Join(dir, "cgroup.event_control"))
	require.NoError(t, err)
	efd, _, _ := strings.Cut(string(ctl), " ")
	fd, err := strconv.Atoi(efd)
	require.NoError(t, err, "cgroup.event_control holds %q", ctl)
	return g, stop, func(n uint64) {
		_, err := unix.Write(fd, binary.NativeEndian.AppendUint64(nil, n))
		require.NoError(t, err)
	}
}

// An OOM event is the v1 group's own when the group was ever charged to
// its cap, its peak says: whenever the event is read, and however many
// the kernel signalled before it was. The run's leader is reaped and its
// usage read after the victim's memory was freed, and before anything
// else may have read the event.
func TestV1OOMEvents(t *testing.T) {
	t.Parallel()
	const usageFreed = "262144\n" // the victim's memory given back
	for _, tc := range []struct {
		name   string
		files  map[string]string
		events []uint64 // signalled before Usage
		want   int64
	}{
		{"an OOM at the cap, read once the victim's memory was freed",
			map[string]string{"memory.max_usage_in_bytes": itoa(32<<20) + "\n", "memory.usage_in_bytes": usageFreed},
			[]uint64{1}, 1},
		{"an OOM at the memory and swap cap",
			map[string]string{
				"memory.max_usage_in_bytes": itoa(20<<20) + "\n", "memory.usage_in_bytes": usageFreed,
				"memory.memsw.limit_in_bytes": itoa(32<<20) + "\n", "memory.memsw.max_usage_in_bytes": itoa(32<<20-8<<12) + "\n", "memory.memsw.usage_in_bytes": usageFreed,
			},
			[]uint64{1}, 1},
		{"OOMs signalled three times before a read",
			map[string]string{"memory.max_usage_in_bytes": itoa(32<<20) + "\n", "memory.usage_in_bytes": usageFreed},
			[]uint64{1, 2}, 3},
		{"page cache to the cap is no OOM: no event",
			map[string]string{"memory.max_usage_in_bytes": itoa(32<<20) + "\n", "memory.usage_in_bytes": itoa(30<<20) + "\n"},
			nil, 0},
		{"an ancestor's OOM: the group never reached its cap",
			map[string]string{"memory.max_usage_in_bytes": itoa(20<<20) + "\n", "memory.usage_in_bytes": itoa(20<<20) + "\n"},
			[]uint64{1}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g, _, signal := fakeV1Memory(t, tc.files)
			for _, n := range tc.events {
				signal(n)
			}
			u, err := g.Usage()
			require.NoError(t, err)
			assert.Equal(t, tc.want, u.LimitHits)
			u, err = g.Usage()
			require.NoError(t, err)
			assert.Equal(t, tc.want, u.LimitHits, "counted once")
		})
	}
}

// Usage may be called while another reads the events or stops the
// watch: each event is counted once. For -race.
func TestV1OOMEventsAtOnce(t *testing.T) {
	t.Parallel()
	g, stop, signal := fakeV1Memory(t, map[string]string{"memory.max_usage_in_bytes": itoa(32<<20) + "\n"})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				_, err := g.Usage()
				assert.NoError(t, err)
			}
		})
	}
	for range 100 {
		signal(1)
	}
	stop()
	wg.Wait()
	u, err := g.Usage()
	require.NoError(t, err)
	assert.Equal(t, int64(100), u.LimitHits)
	assert.Equal(t, -1, g.oom.fd, "stop released the eventfd")
}

// The v1 OOM watch tells the cap's own OOM from a peak at the cap: a
// run whose page cache fills its group to the cap has had no OOM, and one
// that allocates past it has. The usage is read as the supervisor reads
// it: once the leader is reaped, with the victim's memory freed and the
// event not read before.
func TestWatchOOM(t *testing.T) {
	h, err := Self()
	require.NoError(t, err)
	if h.V2 {
		t.Skip("v2 counts its own OOM events (memory.events oom); TestUsage reads them")
	}
	const hog = "python3 -c 'b = [bytearray(1 << 20) for i in range(96)]'"
	file := filepath.Join(t.TempDir(), "data")
	for _, tc := range []struct {
		name   string
		script string // run once the group is capped
		oom    bool
	}{
		{"page cache to the cap", `dd if=/dev/zero of="$0" bs=1M count=96 status=none && cat "$0" >/dev/null`, false},
		{"killed at the cap", "exec " + hog, true},
		{"a shell whose child was killed at the cap", hog + "; exit 3", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := h.Create(testLeaf(t, "oom"), Limits{MemoryBytes: 32 << 20})
			require.NoError(t, err)
			t.Cleanup(func() { g.Remove() })
			stop, err := g.WatchOOM()
			require.NoError(t, err)
			defer stop()
			// Where the kernel refuses a trace, v1 writes the caps after
			// the child started (startMoving): on a loaded box it could
			// fill 96 MiB before, so it waits for them.
			cmd := exec.Command("sh", "-c", "read go; "+tc.script, file)
			r, capped, err := os.Pipe() // a file: a refused trace starts cmd again
			require.NoError(t, err)
			cmd.Stdin = r
			require.NoError(t, g.Start(cmd))
			r.Close()
			capped.Close()
			cmd.Wait()
			now, err := number(g.dirs["memory"], "memory.usage_in_bytes")
			require.NoError(t, err)
			u, err := g.Usage()
			require.NoError(t, err)
			require.NoError(t, g.Remove())
			assert.InDelta(t, 32<<20, u.PeakMemoryBytes, 1<<20, "the group reached its cap")
			if !tc.oom {
				assert.Zero(t, u.LimitHits, "and that is no OOM")
				assert.Zero(t, u.OOMKills)
				return
			}
			assert.Less(t, now, int64(16<<20), "the victim's memory was freed before its event was read")
			assert.Positive(t, u.OOMKills)
			assert.Positive(t, u.LimitHits, "the cap's own OOM")
		})
	}
}

// Under v1 the caps are in place before the run's first instruction: the
// child waits, stopped at its exec, until they are written, however long
// that takes on a loaded box (beforeCaps stretches it). The child reads
// its caps as its first act. The untraced start, kept where the kernel
// refuses a trace and for privileged programs, is known to leave the child
// uncapped for a moment: there the moment lasts until the child has read
// them. Not parallel: beforeCaps and startCmd are shared.
func TestV1CappedFromTheFirstInstruction(t *testing.T) {
	h, err := Self()
	require.NoError(t, err)
	if h.V2 {
		t.Skip("v2 starts the child in its capped group (clone3); this is v1's start")
	}
	l := Limits{MemoryBytes: 48 << 20, Pids: 16}
	require.NoError(t, h.Check(l))
	t.Cleanup(func() { beforeCaps = func(int) {} })
	setuidSh := filepath.Join(t.TempDir(), "sh")
	sh, err := os.ReadFile("/bin/sh")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(setuidSh, sh, 0o755))
	require.NoError(t, os.Chmod(setuidSh, 0o755|os.ModeSetuid))
	for _, tc := range []struct {
		name   string
		sh     string
		start  func(g *Group, cmd *exec.Cmd) error
		traced bool
	}{
		{"traced", "sh", (*Group).Start, true},
		{"the kernel refuses the trace", "sh", func(g *Group, cmd *exec.Cmd) error {
			refuseTrace(t)
			return g.Start(cmd)
		}, false},
		{"a set-user-ID program", setuidSh, (*Group).Start, false},
		{"untraced", "sh", (*Group).startMoving, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := h.Create(testLeaf(t, "first"), l)
			require.NoError(t, err)
			t.Cleanup(func() { g.Remove() })
			mem, pids := filepath.Join(g.dirs["memory"], "memory.limit_in_bytes"), filepath.Join(g.dirs["pids"], "pids.max")
			cmd := exec.Command(tc.sh, "-c", `cat "$0" "$1"; cat /proc/self/cgroup`, mem, pids)
			r, w, err := os.Pipe()
			require.NoError(t, err)
			defer r.Close()
			cmd.Stdout = w
			out := bufio.NewReader(r)
			var early []string // what the child read before its caps
			var tracer string  // its TracerPid then
			beforeCaps = func(pid int) {
				status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
				require.NoError(t, err)
				for line := range strings.Lines(string(status)) {
					if f := strings.Fields(line); len(f) == 2 && f[0] == "TracerPid:" {
						tracer = f[1]
					}
				}
				if tc.traced {
					time.Sleep(300 * time.Millisecond)
					return
				}
				r.SetReadDeadline(time.Now().Add(10 * time.Second))
				for range 2 {
					line, err := out.ReadString('\n')
					require.NoError(t, err)
					early = append(early, strings.TrimSpace(line))
				}
			}
			require.NoError(t, tc.start(g, cmd))
			w.Close()
			require.NoError(t, cmd.Wait())
			rest, err := io.ReadAll(out)
			require.NoError(t, err)
			lines := strings.SplitN(string(rest), "\n", 3)
			if tc.traced {
				require.Len(t, lines, 3, string(rest))
				assert.Equal(t, []string{"50331648", "16"}, lines[:2], "capped from its first instruction")
				assert.DirExists(t, "/proc/self/task/"+tracer, "stopped under a trace by a thread of ours")
				lines = lines[2:]
			} else {
				assert.NotEqual(t, []string{"50331648", "16"}, early, "the untraced start leaves the child uncapped for a moment")
				assert.Equal(t, "0", tracer, "not traced")
			}
			assert.Contains(t, strings.Join(lines, "\n"), "/"+filepath.Base(g.dirs["memory"])+"\n", "in the group before it ran")
			self, err := Self()
			require.NoError(t, err)
			assert.Equal(t, h.Dirs, self.Dirs, "the maker is where it was")
			u, err := g.Usage()
			require.NoError(t, err)
			assert.Empty(t, u.Pids)
		})
	}
}

// A cmd whose failed traced start closed its streams (StdinPipe's) is not
// started again: the start fails, rather than start the child with a
// closed stdin.
func TestV1RefusedTraceWithAPipeOfStart(t *testing.T) {
	h, err := Self()
	require.NoError(t, err)
	if h.V2 {
		t.Skip("v1's start")
	}
	g, err := h.Create(testLeaf(t, "pipe"), Limits{Pids: 16})
	require.NoError(t, err)
	t.Cleanup(func() { g.Remove() })
	cmd := exec.Command("cat")
	_, err = cmd.StdinPipe()
	require.NoError(t, err)
	refuseTrace(t)
	err = g.Start(cmd)
	require.ErrorIs(t, err, syscall.EPERM)
	assert.Nil(t, cmd.Process, "nothing started")
}

// refuseTrace makes the next traced start fail as it does where the
// kernel refuses PTRACE_TRACEME: the Cmd's Start was called, and it says
// EPERM.
func refuseTrace(t *testing.T) {
	t.Cleanup(func() { startCmd = (*exec.Cmd).Start })
	startCmd = func(cmd *exec.Cmd) error {
		startCmd = (*exec.Cmd).Start
		path := cmd.Path
		cmd.Path = "/dev/null" // not executable: Start fails, and cmd is used
		require.Error(t, cmd.Start())
		cmd.Path = path
		return &fs.PathError{Op: "fork/exec", Path: path, Err: syscall.EPERM}
	}
}

// A program that gains privileges at its exec is not traced: traced, it
// would run without them.
func TestPrivilegedProgramsAreNotTraced(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	setuid := filepath.Join(dir, "setuid")
	setgid := filepath.Join(dir, "setgid")
	for path, mode := range map[string]os.FileMode{plain: 0o755, setuid: 0o755 | os.ModeSetuid, setgid: 0o755 | os.ModeSetgid} {
		require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"), 0o755))
		require.NoError(t, os.Chmod(path, mode))
	}
	assert.False(t, privileged(exec.Command(plain)))
	assert.False(t, privileged(&exec.Cmd{Path: "plain", Dir: dir}), "a relative path is the child's dir's")
	assert.True(t, privileged(exec.Command(setuid)))
	assert.True(t, privileged(exec.Command(setgid)))
	assert.True(t, privileged(exec.Command(filepath.Join(dir, "missing"))), "what cannot be looked at is started untraced")
}

// Traceable says whether a child can be started stopped at its exec: here
// it can, and where the kernel refuses the trace it says why.
func TestTraceable(t *testing.T) {
	require.NoError(t, Traceable())
	refuseTrace(t)
	require.ErrorIs(t, Traceable(), syscall.EPERM)
}
