package supervisor

import (
	"os/exec"

	"github.com/agent-box/agent-box/cgroup"
	"github.com/agent-box/agent-box/runrecord"
	"golang.org/x/sys/unix"
)

// startIn starts cmd: in a cgroup of the run's own, capped by the spec's
// limits, when it has any. Not before the supervisor catches its signals:
// see catchSignals.
func (s *supervisor) startIn(cmd *exec.Cmd) error {
	<-s.caught
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
		return
	}
	exit.CPUMS = (ru.Utime.Nano() + ru.Stime.Nano()) / 1e6
	exit.PeakMemoryBytes = ru.Maxrss << 10 // KiB on Linux (getrusage(2))
}
