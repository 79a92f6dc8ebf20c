package cgroup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// cpuPeriod is the CFS period a CPU cap is expressed in: the kernel's
// default, 100 ms (Documentation/scheduler/sched-bwc.rst).
const cpuPeriod = 100_000

// Group is one run's cgroup: its directory in each hierarchy.
type Group struct {
	v2     bool
	dirs   map[string]string // as Hierarchy.Dirs
	parent *Hierarchy        // where the maker was: Start moves it back there
	limits Limits
	// oom is the v1 OOM notifier WatchOOM registered, if it did: Usage
	// counts its events. Set before the group is shared.
	oom *oomWatch
}

// Leaf is the name of a run's group under the cgroup of its supervisor.
func Leaf(name, runID string) string { return "agent-box-" + name + "-" + runID }

// Create makes the group leaf under h, the caller's own hierarchy, with
// the caps l; under v1 Start writes them. On failure nothing is left
// behind. A directory of that name already there is an error: it is not
// this group.
func (h *Hierarchy) Create(leaf string, l Limits) (*Group, error) {
	if err := h.Check(l); err != nil {
		return nil, err
	}
	if h.V2 {
		return h.createV2(leaf, l)
	}
	g := &Group{dirs: map[string]string{}, parent: h, limits: l}
	made := map[string]bool{}
	for _, c := range v1Controllers {
		dir := h.Dirs[c]
		// The controllers l needs were checked; the others serve its
		// usage (memory, cpuacct) and are used where this process may.
		if dir == "" || (!slices.Contains(needs(l), c) && writable(dir) != nil) {
			continue
		}
		g.dirs[c] = filepath.Join(dir, leaf)
		if made[g.dirs[c]] {
			continue // cpu and cpuacct mounted together
		}
		if err := os.Mkdir(g.dirs[c], 0o755); err != nil {
			delete(g.dirs, c)
			g.Remove()
			return nil, fmt.Errorf("making the run's cgroup: %w", err)
		}
		made[g.dirs[c]] = true
	}
	return g, nil
}

// SupervisorLeaf is where, under cgroup v2, the maker of run groups moves
// itself inside the group it was given, so that the group may hand
// controllers to its children ("no internal processes", cgroups(7)).
const SupervisorLeaf = "agent-box-supervisor"

// createV2 makes the group under v2. The caller must be alone in a group
// delegated to it (systemd-run --scope -p Delegate=yes): it moves itself
// into SupervisorLeaf below it, enables the controllers l needs for the
// group's children, and makes the run's group beside its own.
func (h *Hierarchy) createV2(leaf string, l Limits) (*Group, error) {
	own := h.Dirs[""]
	procs, err := readSmall(filepath.Join(own, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	self := strconv.Itoa(os.Getpid())
	if f := strings.Fields(string(procs)); len(f) != 1 || f[0] != self {
		return nil, fmt.Errorf("%w: cgroup v2 group %s holds other processes than this one: a run with limits needs a group of its own, delegated (systemd-run --scope -p Delegate=yes)", ErrUnavailable, own)
	}
	sup := filepath.Join(own, SupervisorLeaf)
	if err := os.Mkdir(sup, 0o755); err != nil {
		return nil, fmt.Errorf("making the supervisor's cgroup: %w", err)
	}
	if err := write(sup, "cgroup.procs", self); err != nil {
		unix.Rmdir(sup)
		return nil, err
	}
	parent := &Hierarchy{V2: true, Dirs: map[string]string{"": own}}
	if err := parent.delegate(l); err != nil {
		return nil, err
	}
	g := &Group{v2: true, dirs: map[string]string{"": filepath.Join(own, leaf)}, parent: parent, limits: l}
	if err := os.Mkdir(g.dirs[""], 0o755); err != nil {
		return nil, fmt.Errorf("making the run's cgroup: %w", err)
	}
	if err := g.setLimits(); err != nil {
		g.Remove()
		return nil, err
	}
	return g, nil
}

// delegate enables what l needs, and memory and cpu for usage where the
// group has them, in the v2 group's subtree_control.
func (h *Hierarchy) delegate(l Limits) error {
	dir := h.Dirs[""]
	available, _ := readSmall(filepath.Join(dir, "cgroup.controllers"))
	enabled, _ := readSmall(filepath.Join(dir, "cgroup.subtree_control"))
	for _, c := range []string{"memory", "cpu", "pids"} {
		needed := slices.Contains(needs(l), c)
		if hasWord(string(enabled), c) || (!needed && !hasWord(string(available), c)) {
			continue
		}
		// One only for usage is best effort.
		if err := write(dir, "cgroup.subtree_control", "+"+c); err != nil && needed {
			return fmt.Errorf("%w: enabling the %s controller: %w", ErrUnavailable, c, err)
		}
	}
	return nil
}

// setLimits writes the caps.
func (g *Group) setLimits() error {
	l := g.limits
	if g.v2 {
		dir := g.dirs[""]
		if l.MemoryBytes > 0 {
			if err := write(dir, "memory.max", strconv.FormatInt(l.MemoryBytes, 10)); err != nil {
				return err
			}
			// "Memory and swap together": no swap, so the group's memory
			// is all in memory.max. A box without swap has no such file.
			if err := write(dir, "memory.swap.max", "0"); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
		if l.CPUPercent > 0 {
			if err := write(dir, "cpu.max", fmt.Sprintf("%d %d", l.CPUPercent*cpuPeriod/100, cpuPeriod)); err != nil {
				return err
			}
		}
		if l.Pids > 0 {
			return write(dir, "pids.max", strconv.Itoa(l.Pids))
		}
		return nil
	}
	if l.MemoryBytes > 0 {
		dir := g.dirs["memory"]
		if err := write(dir, "memory.limit_in_bytes", strconv.FormatInt(l.MemoryBytes, 10)); err != nil {
			return err
		}
		// memsw caps memory and swap together; absent when the kernel
		// does not account swap (swapaccount=0), where swap is not capped.
		if err := write(dir, "memory.memsw.limit_in_bytes", strconv.FormatInt(l.MemoryBytes, 10)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if l.CPUPercent > 0 {
		dir := g.dirs["cpu"]
		if err := write(dir, "cpu.cfs_period_us", strconv.Itoa(cpuPeriod)); err != nil {
			return err
		}
		if err := write(dir, "cpu.cfs_quota_us", strconv.Itoa(l.CPUPercent*cpuPeriod/100)); err != nil {
			return err
		}
	}
	if l.Pids > 0 {
		return write(g.dirs["pids"], "pids.max", strconv.Itoa(l.Pids))
	}
	return nil
}

// Start starts cmd with its process in the group before it runs a single
// instruction of its own, so that nothing it forks is outside the group
// and nothing it does is uncapped.
//
// Under v2 the kernel does it: the process is born in the group (clone3
// CLONE_INTO_CGROUP, through SysProcAttr.UseCgroupFD), whose caps Create
// wrote. Under v1 there is no such call: see startV1.
func (g *Group) Start(cmd *exec.Cmd) error {
	if g.v2 {
		fd, err := unix.Open(g.dirs[""], unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("opening the run's cgroup: %w", err)
		}
		defer unix.Close(fd)
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
		return cmd.Start()
	}
	return g.startV1(cmd)
}

// beforeCaps runs in a v1 start between the fork of the child (pid) and
// the caps' write; a test stretches the moment and looks at the child.
var beforeCaps = func(pid int) {}

// startV1 starts cmd stopped at its exec, as a debugger starts a program
// (PTRACE_TRACEME): the kernel stops it after execve, before the new
// program's first instruction. Only then is it moved into the group and
// are the caps written, and it is let go. The supervisor itself never
// joins the group, so it is never capped, throttled or picked by the
// group's OOM killer (a Go program that cannot make a thread under a pids
// cap dies).
//
// Where the kernel refuses the trace (Yama ptrace_scope 2 or 3, a seccomp
// filter), it starts the child again the old way (startMoving), uncapped
// for a moment, if cmd can be started again (see again); and so it does at
// once for a set-user-ID, set-group-ID or file-capability program (which
// runs without its privileges when traced).
func (g *Group) startV1(cmd *exec.Cmd) error {
	if privileged(cmd) {
		return g.startMoving(cmd)
	}
	err := g.startTraced(cmd)
	if !errors.Is(err, errNoTrace) || !again(cmd) {
		return err
	}
	return g.startMoving(cmd)
}

// again makes cmd, whose Start failed, a Cmd that starts the same way
// again (an exec.Cmd starts once, even when its Start failed), and says
// whether it could. It cannot where the failed Start closed a standard
// stream of cmd's (one of StdinPipe's, StdoutPipe's or StderrPipe's), nor
// for a CommandContext's cmd, whose context is not to be had. The
// supervisor's streams are its own files, which Start never closes.
func again(cmd *exec.Cmd) bool {
	for _, s := range []any{cmd.Stdin, cmd.Stdout, cmd.Stderr} {
		if f, ok := s.(*os.File); ok && f != nil && closed(f) {
			return false
		}
	}
	if cmd.Cancel != nil || cmd.WaitDelay != 0 {
		return false
	}
	*cmd = exec.Cmd{Path: cmd.Path, Args: cmd.Args, Env: cmd.Env, Dir: cmd.Dir,
		Stdin: cmd.Stdin, Stdout: cmd.Stdout, Stderr: cmd.Stderr,
		ExtraFiles: cmd.ExtraFiles, SysProcAttr: cmd.SysProcAttr, Err: cmd.Err}
	return true
}

// closed says whether f was closed (Fd would put an open one in blocking
// mode, so its descriptor is only looked at).
func closed(f *os.File) bool {
	rc, err := f.SyscallConn()
	return err != nil || rc.Control(func(uintptr) {}) != nil
}

// Traceable says whether this process may start a child stopped at its
// exec, as a v1 start does: nil, or why not (a v1 start then leaves a
// capped child uncapped for a moment). It starts its own executable so,
// and kills it at that stop, before it runs a single instruction.
func Traceable() error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := exec.Command(exe)
	cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
	if err := startCmd(cmd); err != nil {
		return err
	}
	_ = cmd.Process.Kill()
	_, _ = cmd.Process.Wait()
	return nil
}

// startCmd is (*exec.Cmd).Start; a test refuses the trace through it.
var startCmd = (*exec.Cmd).Start

// errNoTrace is startTraced's error when the traced start failed, and so
// nothing was started.
var errNoTrace = errors.New("the traced start failed")

// startTraced is startV1's way. The ptrace calls come from the thread that
// forked: the tracer is that thread, not the process (ptrace(2)).
func (g *Group) startTraced(cmd *exec.Cmd) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	attr := syscall.SysProcAttr{}
	if cmd.SysProcAttr != nil {
		attr = *cmd.SysProcAttr
	}
	user := cmd.SysProcAttr
	attr.Ptrace = true
	cmd.SysProcAttr = &attr
	err := startCmd(cmd)
	cmd.SysProcAttr = user
	if err != nil {
		// PTRACE_TRACEME's error (EPERM, or whatever a seccomp filter
		// answers), or the exec's own: either way nothing runs, and the
		// untraced start says which.
		return fmt.Errorf("%w: %w", errNoTrace, err)
	}
	pid := cmd.Process.Pid
	var ws unix.WaitStatus
	for {
		_, err = unix.Wait4(pid, &ws, unix.WALL, nil)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil || !ws.Stopped() {
		// Killed before its first instruction and reaped here (its pid
		// is free again: no signal may follow), or not ours to wait for.
		return fmt.Errorf("starting the run's process: %w", errors.Join(err, errStopLost))
	}
	// Should this process die before the caps are written, the child
	// dies too, rather than run uncapped.
	_ = unix.PtraceSetOptions(pid, unix.PTRACE_O_EXITKILL)
	beforeCaps(pid)
	err = errors.Join(g.move(strconv.Itoa(pid), g.dirs), g.setLimits())
	if err == nil {
		// Let go with no signal: the SIGTRAP of the exec is dropped.
		err = unix.PtraceDetach(pid)
	}
	if err != nil {
		_ = cmd.Process.Kill() // stopped before its first instruction: it forked nothing
		_, _ = cmd.Process.Wait()
		return fmt.Errorf("capping the run's cgroup: %w", err)
	}
	return nil
}

// errStopLost says the traced child ended before its stop at the exec.
var errStopLost = errors.New("it ended before its first instruction")

// privileged says whether cmd's program gains privileges at its exec: a
// set-user-ID or set-group-ID file, or one with file capabilities. Under
// a trace the kernel runs it without them, so it is not traced. A
// program that cannot be looked at counts as privileged: the untraced
// start is the one that keeps its behaviour.
func privileged(cmd *exec.Cmd) bool {
	path := cmd.Path
	if !filepath.IsAbs(path) && cmd.Dir != "" {
		path = filepath.Join(cmd.Dir, path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return true
	}
	if fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		return true
	}
	_, err = unix.Getxattr(path, "security.capability", nil)
	return !errors.Is(err, unix.ENODATA) && !errors.Is(err, unix.ENOTSUP)
}

// v1Start serialises the untraced v1 starts of one process
// (startMoving). While one is under way the process is in the run's
// group: what else in it reads its own cgroups then (Self) reads the
// run's. The supervisor makes one group and starts once.
var v1Start sync.Mutex

// startMoving is the v1 start without a trace: the caller moves itself
// into the group, forks, and moves back, and only then are the caps
// written. While it is in, its threads count against a pids cap and a CPU
// cap would throttle it, so the caps come after; v1 leaves the memory it
// touches charged to the group, a few pages. The child runs uncapped in
// between: microseconds, or milliseconds on a loaded box.
func (g *Group) startMoving(cmd *exec.Cmd) error {
	// The whole process moves: two starts at once would fork into each
	// other's groups.
	v1Start.Lock()
	self := strconv.Itoa(os.Getpid())
	err := g.move(self, g.dirs)
	if err == nil {
		err = cmd.Start()
	}
	// Always back out: the group's OOM killer must never pick the caller.
	back := g.move(self, g.parent.Dirs)
	v1Start.Unlock()
	if err != nil {
		return errors.Join(err, back)
	}
	beforeCaps(cmd.Process.Pid)
	if err := errors.Join(back, g.setLimits()); err != nil {
		// Its group (a run's leader leads one), and what it forked since.
		_ = unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
		return fmt.Errorf("capping the run's cgroup: %w", err)
	}
	return nil
}

// move writes pid to cgroup.procs in each of dirs, for the controllers the
// group has: v1 moves every thread of the process.
func (g *Group) move(pid string, dirs map[string]string) error {
	for c := range g.dirs {
		if err := write(dirs[c], "cgroup.procs", pid); err != nil {
			return err
		}
	}
	return nil
}

// Remove removes the group's directories. A group that still has
// processes stays (EBUSY); so does one removed already.
func (g *Group) Remove() error {
	var errs []error
	for _, dir := range g.dirs {
		if err := unix.Rmdir(dir); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("removing %s: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}

// Find is the group leaf of the process pid, with the mounts ms: under
// pid's own cgroup, as Create made it from there. It is nil, without
// error, when pid has no such group (a run without limits).
func (ms Mounts) Find(pid int, leaf string) (*Group, error) {
	h, err := ms.Of(strconv.Itoa(pid))
	if err != nil {
		return nil, err
	}
	return h.RunGroup(leaf), nil
}

// Holds reports whether the process pid is in g, in every hierarchy g
// has a directory in (/proc/PID/cgroup, with the mounts ms). A process
// may be moved out of its group by any process that can write another
// group's cgroup.procs (a user's own delegated subtree), and a record can
// name limits that were never applied: only this says a cap holds.
func (g *Group) Holds(ms Mounts, pid int) (bool, error) {
	h, err := ms.Of(strconv.Itoa(pid))
	if err != nil {
		return false, err
	}
	for c, dir := range g.dirs {
		if h.Dirs[c] != dir {
			return false, nil
		}
	}
	return true, nil
}

// RunGroup is the group leaf that a maker whose hierarchy is h made: under
// v2 it moved below the group it was given (createV2), and the run's
// group is beside it.
func (h *Hierarchy) RunGroup(leaf string) *Group {
	if dir := h.Dirs[""]; h.V2 && filepath.Base(dir) == SupervisorLeaf {
		h = &Hierarchy{V2: true, Dirs: map[string]string{"": filepath.Dir(dir)}}
	}
	return h.Group(leaf)
}

// Group is the group leaf under h, if there is one.
func (h *Hierarchy) Group(leaf string) *Group {
	g := &Group{v2: h.V2, dirs: map[string]string{}, parent: h}
	for c, dir := range h.Dirs {
		if c != "" && !slices.Contains(v1Controllers, c) {
			continue
		}
		d := filepath.Join(dir, leaf)
		// Lstat: a cgroup directory is never a symlink.
		if fi, err := os.Lstat(d); err == nil && fi.IsDir() {
			g.dirs[c] = d
		}
	}
	if len(g.dirs) == 0 {
		return nil
	}
	return g
}

// Usage is what a group's processes use and have used.
type Usage struct {
	// Pids are the group's processes now: every process of the run,
	// wherever in the process tree; what each has resident is /proc's to
	// say (the group's own count leaves out pages it was not first to
	// touch, such as a shared library's).
	Pids            []int
	PeakMemoryBytes int64 // the most the group was charged at once, page cache included: what a memory cap counts
	CPUNanos        int64 // of every process it ever had
	OOMKills        int64 // processes the kernel killed in the group: for its cap, or the box's OOM killer
	// LimitHits counts the times the group's own memory cap ran out (v2
	// memory.events "oom"; v1: the OOM events WatchOOM registered for,
	// once the group had reached its cap, see peakAtCap):
	// with OOMKills, what tells a kill for the cap from one for the box's
	// memory or a parent's cap.
	LimitHits int64
	// PidsMaxHit counts the forks and clones the group refused at its
	// pids cap (pids.events "max"): what tells a run that failed for it.
	PidsMaxHit int64
}

// Usage reads the group's counters. A counter this kernel lacks reads 0.
func (g *Group) Usage() (Usage, error) {
	var u Usage
	if g.v2 {
		dir := g.dirs[""]
		u.PeakMemoryBytes, _ = number(dir, "memory.peak")
		if cpu, err := readSmall(filepath.Join(dir, "cpu.stat")); err == nil {
			us, _ := field(cpu, "usage_usec")
			u.CPUNanos = us * 1000
		}
		if ev, err := readSmall(filepath.Join(dir, "memory.events")); err == nil {
			u.OOMKills, _ = field(ev, "oom_kill")
			u.LimitHits, _ = field(ev, "oom")
		}
		u.PidsMaxHit = pidsMaxHit(dir)
		var err error
		u.Pids, err = pidsOf(dir)
		return u, err
	}
	if dir := g.dirs["memory"]; dir != "" {
		u.PeakMemoryBytes, _ = number(dir, "memory.max_usage_in_bytes")
		if oc, err := readSmall(filepath.Join(dir, "memory.oom_control")); err == nil {
			u.OOMKills, _ = field(oc, "oom_kill") // Linux 4.13 and later
		}
		if g.oom != nil {
			u.LimitHits = g.oom.hits(dir)
		}
	}
	if dir := g.dirs["cpuacct"]; dir != "" {
		u.CPUNanos, _ = number(dir, "cpuacct.usage")
	}
	if dir := g.dirs["pids"]; dir != "" {
		u.PidsMaxHit = pidsMaxHit(dir)
	}
	for _, c := range v1Controllers {
		if dir := g.dirs[c]; dir != "" {
			var err error
			u.Pids, err = pidsOf(dir)
			return u, err
		}
	}
	return u, nil
}

// pidsMaxHit is the count of forks refused at the pids cap of the group
// at dir: pids.events' "max" (v2, and v1's pids controller since Linux
// 4.3); 0 when the file or the field is not there.
func pidsMaxHit(dir string) int64 {
	ev, err := readSmall(filepath.Join(dir, "pids.events"))
	if err != nil {
		return 0
	}
	n, _ := field(ev, "max")
	return max(n, 0)
}

// pidsOf lists the processes of the group at dir.
func pidsOf(dir string) ([]int, error) {
	data, err := readSmall(filepath.Join(dir, "cgroup.procs"))
	return parsePids(data), err
}

// parsePids reads the pids of a cgroup.procs, one a line.
func parsePids(data []byte) []int {
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}

// WatchOOM registers for the v1 group's OOM events, for Usage's
// LimitHits, until stop. v1 has no counter of the times the group's own
// cap ran out: its OOM notifier (an eventfd registered through
// cgroup.event_control on memory.oom_control,
// Documentation/admin-guide/cgroup-v1/memory.rst section 9) fires for the
// group's OOM and for an ancestor's; peakAtCap tells them apart. Nothing
// reads the eventfd in between: the kernel adds each event to its counter
// (eventfd(2)), and Usage and stop take what is there. The kernel signals
// before it picks a victim (memcg1_oom_prepare, then
// mem_cgroup_out_of_memory, mm/memcontrol-v1.c), so once a killed process
// is reaped its event is there to count, however loaded the box. The
// box's OOM killer notifies nobody. Under v2 (memory.events counts it)
// and without a memory cap it watches nothing.
func (g *Group) WatchOOM() (stop func(), err error) {
	dir := g.dirs["memory"]
	if g.v2 || dir == "" || g.limits.MemoryBytes <= 0 {
		return func() {}, nil
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("watching for OOM: %w", err)
	}
	ctl, err := os.OpenFile(filepath.Join(dir, "memory.oom_control"), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(efd)
		return nil, fmt.Errorf("watching for OOM: %w", err)
	}
	defer ctl.Close()
	if err := write(dir, "cgroup.event_control", fmt.Sprintf("%d %d", efd, ctl.Fd())); err != nil {
		unix.Close(efd)
		return nil, fmt.Errorf("watching for OOM: %w", err)
	}
	w := &oomWatch{fd: efd}
	g.oom = w
	return func() { w.stop(dir) }, nil
}

// oomWatch is a v1 group's OOM notifier. Usage and stop may run at once.
type oomWatch struct {
	mu    sync.Mutex
	fd    int   // the eventfd; -1 once stopped
	count int64 // the events that were the group's own
}

// hits counts the events pending on the eventfd and says how many were
// the group's own, in all.
func (w *oomWatch) hits(dir string) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.take(dir)
	return w.count
}

// stop counts what is pending and releases the eventfd; closing it also
// unregisters the event (memcg_event_wake sees EPOLLHUP).
func (w *oomWatch) stop(dir string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.take(dir)
	if w.fd >= 0 {
		unix.Close(w.fd)
		w.fd = -1
	}
}

// take reads the events pending on the eventfd, with w.mu held: a read
// returns the number of signals since the last, 8 bytes host-endian, or
// EAGAIN when there are none (EFD_NONBLOCK; eventfd(2)).
func (w *oomWatch) take(dir string) {
	var buf [8]byte
	if w.fd < 0 {
		return
	}
	if n, err := unix.Read(w.fd, buf[:]); err != nil || n != len(buf) {
		return
	}
	if peakAtCap(dir) {
		w.count += int64(binary.NativeEndian.Uint64(buf[:]))
	}
}

// peakAtCap says whether the v1 group at dir was ever charged to within a
// little of its memory cap (with or without swap): an OOM event then is
// its own. A charge goes to the OOM killer only if it is of at most 8
// pages (PAGE_ALLOC_COSTLY_ORDER, mem_cgroup_oom in mm/memcontrol.c), so
// one that failed at the group's cap left the group's usage within that
// of it, and max_usage_in_bytes, a high-water mark, keeps it: unlike the
// usage now, which drops as soon as the victim's memory is freed, it does
// not depend on when the event is read. Page cache alone takes the peak
// to the cap as well, but is reclaimed without an event. The price: an
// ancestor's OOM is taken for the group's own if the group had reached
// its own cap before it is counted (with page cache, or before Start
// wrote the cap).
//
// Not memory.failcnt, the failures at the group's own limit
// (memory.rst 5.4, page_counter_try_charge in mm/page_counter.c): a
// charge is tried against memsw first, and recent kernels count the
// failures of the memory counter only (mem_cgroup_css_alloc sets
// track_failcnt on memcg->memory alone), so with memsw capped too neither
// count moves for an OOM (both read 0 after one on Linux 6.18).
func peakAtCap(dir string) bool {
	const slack = 1 << 20
	for _, f := range []string{"memory", "memory.memsw"} {
		limit, err1 := number(dir, f+".limit_in_bytes")
		peak, err2 := number(dir, f+".max_usage_in_bytes")
		if err1 == nil && err2 == nil && limit > 0 && peak >= limit-slack {
			return true
		}
	}
	return false
}
