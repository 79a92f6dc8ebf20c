package supervisor

import (
	"fmt"
	"os/exec"
	"runtime"

	"github.com/agent-box/agent-box/cgroup"
	"github.com/agent-box/agent-box/runrecord"
	"golang.org/x/sys/unix"
)

// startIn starts cmd: at the run's nice, and in a cgroup of the run's
// own, capped by the spec's limits, when it has any. Not before the
// supervisor catches its signals: see catchSignals.
func (s *supervisor) startIn(cmd *exec.Cmd) error {
	<-s.caught
	if n := s.spec.Run.Nice; n != 0 {
		return onNicedThread(n, func() error { return s.startInGroup(cmd) })
	}
	return s.startInGroup(cmd)
}

// onNicedThread runs f on a thread of its own n nicer than the
// supervisor (as nice(1) adds to its own, at most 19), which a child that
// f forks inherits: Linux keeps the nice value per thread
// (setpriority(2), BUGS), and a fork copies the calling thread's. The
// thread is never given back (runtime.LockOSThread without its unlock):
// it ends with f's goroutine, and its nice with it, so the supervisor's
// other threads keep theirs; while a goroutine is locked to a thread the
// runtime makes new threads from its template thread, so none inherits it
// (runtime/proc.go, newm). The main thread is not ended but wedged when
// its goroutine exits locked, keeping the nice (and it is what ps shows of
// the process): a goroutine that lands on it holds it, unchanged, while
// another does the work on a thread that can end.
func onNicedThread(n int, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			defer runtime.UnlockOSThread()
			errc <- onNicedThread(n, f)
			return
		}
		// getpriority(2) answers 20 - nice. A nice value only goes up
		// here, which needs no privilege.
		prio, err := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid())
		if err == nil {
			err = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), min(20-prio+n, MaxNice))
		}
		if err != nil {
			errc <- fmt.Errorf("lowering the priority by nice %d: %w", n, err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// MaxNice is the kernel's lowest priority (setpriority(2)): no run is
// nicer.
const MaxNice = 19

// startInGroup starts cmd, in the run's own cgroup when it has limits.
func (s *supervisor) startInGroup(cmd *exec.Cmd) error {
	l := s.spec.Run.Limits
	if l == nil || l.Zero() {
		return cmd.Start()
	}
	h, err := cgroup.Self()
	if err != nil {
		return err
	}
	g, err := h.Create(cgroup.Leaf(s.spec.Name, s.spec.RunID), CgroupLimits(*l))
	if err != nil {
		return err
	}
	// Before the start: an OOM at once is seen too. It watches until the
	// supervisor exits.
	if _, err := g.WatchOOM(); err != nil {
		g.Remove()
		return err
	}
	if err := g.Start(cmd); err != nil {
		g.Remove()
		return err
	}
	s.group = g
	return nil
}

// CgroupLimits are a record's limits as the cgroup package takes them.
func CgroupLimits(l runrecord.Limits) cgroup.Limits {
	return cgroup.Limits{MemoryBytes: int64(l.MemoryMB) << 20, CPUPercent: l.CPUPercent, Pids: l.Pids}
}

// measure adds to exit what the run used: the cgroup's figures, and
// whether its memory cap killed, when it has one; else the leader's
// rusage (it and the descendants it waited for).
func (s *supervisor) measure(exit *runrecord.Exit, ru *unix.Rusage) {
	if s.group != nil {
		u, err := s.group.Usage()
		if err != nil {
			s.logf("supervise: reading the run's cgroup: %v", err)
		}
		exit.CPUMS = u.CPUNanos / 1e6
		exit.PeakMemoryBytes = u.PeakMemoryBytes
		// The kernel killed in the group, and the group's own cap was
		// reached: not the box's OOM killer, nor a parent group's cap.
		exit.OOMKilled = u.OOMKills > 0 && u.LimitHits > 0
		exit.PidsMaxHit = u.PidsMaxHit
		return
	}
	exit.CPUMS = (ru.Utime.Nano() + ru.Stime.Nano()) / 1e6
	exit.PeakMemoryBytes = ru.Maxrss << 10 // KiB on Linux (getrusage(2))
}
