package outcome

// Proc is what a snapshot of /proc says about one process: the fields of
// /proc/PID/stat (proc(5): 1, 5, 6 and 22) that tie a process to a run.
type Proc struct {
	PID, PGID, SID int
	StartTime      uint64 // clock ticks since boot
	// Tagged: its environment from its exec names the run
	// (Facts.ChildTagged). Asked for only of a process that no live
	// supervisor vouches for (Member).
	Tagged bool
}

// TargetFacts are what a kill knows when it picks the processes to signal.
// The run is one Decide found Signalable, or a supervisor's own.
type TargetFacts struct {
	Group       int    // the leader's pid: the id of its process group
	LeaderStart uint64 // the leader's start time
	LeaderAlive bool   // Verdict.LeaderAlive, or the supervisor has not reaped it
	Supervisor  int    // the supervisor's pid: the id of the run's session
	Self        Self   // the signalling process, whose own ids no target may be
	// Descendants of the supervisor, when it is alive and proven the run's
	// (it is their subreaper, so each is the run's whatever group or
	// session it made); nil otherwise.
	Descendants []Proc
	// Procs is a snapshot of every process, searched for members of the
	// group once the leader is gone; nil when none was taken.
	Procs []Proc
}

// Targets returns what a kill of the run signals: whether its process
// group (kill(-Group)), and which processes outside it, one by one (those
// that made a group or a session of their own, found as the supervisor's
// descendants).
//
// A live leader holds its group's id. Once the leader is gone, an empty
// group's id may be handed out again, so the group is signalled only when
// a process of the run is seen in it: a descendant of the supervisor, or,
// without the supervisor, a member in the supervisor's session (a group
// never spans sessions) started no earlier than the leader. The group and
// the session must be ids a run can have (Self.MayBeRun): a planted record
// naming pid 1, 0 or our own group or session reaches nothing.
func Targets(f TargetFacts) (group bool, outside []int) {
	if !f.Self.MayBeRun(f.Group) {
		// kill(-1) reaches every process, kill(0) and kill(-ours) our own
		// group; and the processes outside would be picked by the same
		// record.
		return false, nil
	}
	group = f.LeaderAlive
	for _, d := range f.Descendants {
		switch {
		case d.PGID == f.Group:
			group = true
		case f.Self.MayBeRun(d.PID):
			outside = append(outside, d.PID)
		}
	}
	if f.Self.MayBeRun(f.Supervisor) {
		for _, p := range f.Procs {
			if Member(p, f.Group, f.Supervisor, f.LeaderStart) {
				group = true
			}
		}
	}
	return group, outside
}

// Member reports whether p, found without a live supervisor to vouch for
// it, is a member of a run's group: in the group (the leader's pid), in
// the run's session (the supervisor's pid; a group never spans sessions),
// started no earlier than the leader (every process of the run but its
// supervisor is), and carrying the run's id in its environment (Tagged).
// The ids alone are no proof: a session's id outlives its leader, so a
// planted record naming a dead session leader as the supervisor would
// make that session's orphans members. The ids themselves must pass
// Self.MayBeRun, which is the caller's to check.
func Member(p Proc, group, session int, leaderStart uint64) bool {
	return InGroup(p, group, session, leaderStart) && p.Tagged
}

// InGroup is Member without the tag: the cheap test of the ids, which
// callers make before they read a process's environment.
func InGroup(p Proc, group, session int, leaderStart uint64) bool {
	return p.PGID == group && p.SID == session && p.StartTime >= leaderStart
}
