// Package outcome decides what state a run is in from its record and facts
// probed from the live system, and which processes a kill of it may reach.
// Its functions are pure, standard library only, no I/O: every row of the
// matrix is pinned by a table test and documented in
// docs/architecture/outcome.md.
package outcome

// State is what agent-box tells the agent about a run.
type State string

const (
	Running State = "running"
	Exited  State = "exited"
	Unknown State = "unknown"
)

// Liveness is what a probe of a recorded (pid, start time) found.
type Liveness int

const (
	Gone   Liveness = iota // no such pid, or a zombie
	Same                   // alive, and /proc/PID/stat field 22 matches the record
	Reused                 // alive, but a different process (start time differs)
	// Foreign: alive with the recorded start time, but the process says it
	// is not the run's (a supervisor whose command line names another run,
	// or none). A genuine record cannot produce it: the pid and start time
	// name one process, which was started as this run's supervisor. So the
	// record itself is not this run's (planted, or copied from another run
	// and edited), and nothing it says may be trusted. Probes of the
	// supervisor return it; for the child, Decide derives it from the
	// child's session (Facts.ChildSID), and callers may pass it too.
	Foreign
)

// Self is the process that decides (the agent-box server or CLI): its
// pid, process group and session. No record may make it signal these.
type Self struct {
	PID, PGID, SID int
}

// MayBeRun reports whether pid may be signalled as a process or group of a
// run: above 1 (kill(2) reads 0 as the caller's own group and -1 as every
// process it may signal, and pid 1 is init) and none of the deciding
// process's own pid, group or session.
func (s Self) MayBeRun(pid int) bool {
	return pid > 1 && !s.owns(pid)
}

func (s Self) owns(pid int) bool {
	return pid == s.PID || pid == s.PGID || pid == s.SID
}

// Reason says why a State was chosen; callers branch on it.
type Reason string

const (
	ReasonExited           Reason = "exited"            // exit recorded
	ReasonExitedSurvivors  Reason = "exited_survivors"  // exit recorded, group members still alive
	ReasonRebooted         Reason = "rebooted"          // recorded on another boot: never trust its pids
	ReasonRunning          Reason = "running"           // child and supervisor alive and same
	ReasonUnsupervised     Reason = "unsupervised"      // child alive, supervisor gone: exit will not be recorded
	ReasonExiting          Reason = "exiting"           // child gone, supervisor alive: about to record the exit
	ReasonSupervisorLost   Reason = "supervisor_lost"   // child and supervisor gone, no exit recorded
	ReasonLostSurvivors    Reason = "lost_survivors"    // as supervisor_lost, but members of the leader's group live on
	ReasonForeignRecord    Reason = "foreign_record"    // the recorded supervisor is alive and is not this run's: the record is not to be trusted
	ReasonForeignProcess   Reason = "foreign_process"   // the recorded child pid is a live process that is not the run's (not in its supervisor's session, or a pid no run can have)
	ReasonStarting         Reason = "starting"          // no child pid yet, supervisor alive
	ReasonStartInterrupted Reason = "start_interrupted" // no child pid, supervisor gone
	ReasonStartFailed      Reason = "start_failed"      // the supervisor recorded that the child could not start
	ReasonCorrupt          Reason = "corrupt_record"    // the record could not be read (set by callers, not Decide)
)

// Run is the part of a run record the decision needs.
type Run struct {
	BootID        string // boot the run was started on
	PID           int    // the recorded child (leader) pid; 0 when none is recorded
	SupervisorPID int    // the recorded supervisor pid; 0 when none is recorded
	ExitRecorded  bool
	StartFailed   bool
	// Pty: the leader leads a session of its own, on the terminal its
	// supervisor holds, rather than being in the supervisor's session.
	Pty bool
}

// Facts are probed from the live system just before deciding.
type Facts struct {
	BootID    string
	Child     Liveness // meaningless unless a child pid is recorded
	ChildSID  int      // the session id of the live child; meaningless unless Child is Same
	ChildPPID int      // the parent of the live child; meaningless unless Child is Same
	// ChildTagged: the live child's environment from its exec names the
	// run (AGENT_BOX_RUN_ID, /proc/PID/environ). A planter can give no
	// process it did not start that environment, while a session id or
	// a parent can be an orphan's by accident. Asked for only when no
	// live supervisor vouches for the child.
	ChildTagged bool
	Supervisor  Liveness // meaningless unless a supervisor pid is recorded
	Survivors   int      // live members of the child's process group besides the leader; counted once the leader is gone
	Self        Self     // the deciding process, whose own pids no record may name
}

// Verdict is the decision.
type Verdict struct {
	State  State
	Reason Reason
	// MayBeAlive is true when some process of the run may still be alive, so
	// its name is in use: false only when its processes are provably gone.
	MayBeAlive bool
	// Signalable is true when the run's process group may be signalled: the
	// leader (or, after its exit, its group) is provably the recorded one.
	// It is never true when the group it would signal (-PID) fails
	// Self.MayBeRun.
	Signalable bool
	// LeaderAlive is true when the leader is provably alive and the run's,
	// so its pid, the id of its process group, cannot have been handed out
	// again: the group is the run's as it stands. When false the leader is
	// gone (or nothing is known of it), and an empty group's id may name
	// someone else's group by now: Targets signals it only when a process
	// of the run is seen in it.
	LeaderAlive bool
}

// Decide returns the verdict for run given facts.
//
// The order of the checks is the precedence of the matrix: a record that
// names processes that are not the run's is not to be trusted at all; then
// a recorded exit is a fact that no later probe can undo; then the boot,
// because a pid from another boot names an unrelated process (runc's
// refreshState refuses the same way); then start failure; then the
// liveness of child and supervisor.
func Decide(run Run, facts Facts) Verdict {
	id := identify(run, facts)
	sameBoot, hasSup, hasChild := id.sameBoot, run.SupervisorPID > 0, run.PID > 0
	sup, child, supervised := id.sup, id.child, id.supervised
	target, groupOK := id.target, id.groupOK

	if sameBoot && hasSup && sup == Foreign {
		// Before the exit: a copied record's exit is no fact of this run,
		// and its pids (a live run's leader, whose group the survivor
		// count would then vouch for) must never be signalled.
		return Verdict{State: Unknown, Reason: ReasonForeignRecord}
	}
	if sameBoot && hasChild && child == Foreign {
		// The same, found on the child: a genuine leader is either gone,
		// its number reused (another start time), or in its supervisor's
		// session.
		return Verdict{State: Unknown, Reason: ReasonForeignProcess}
	}

	if run.ExitRecorded {
		// Survivors are the run's processes that outlive its leader. A
		// live supervisor vouches for them: they are its descendants.
		// Without it they are counted in the group whose id is the
		// leader's pid: while any member lives the kernel keeps that pid
		// allocated, so a Gone leader with live members means the members
		// are still ours, and a Reused leader means the number was handed
		// out again and the count is about someone else. Another boot
		// makes the count meaningless altogether.
		if sameBoot && target && facts.Survivors > 0 && (supervised || (groupOK && child != Reused)) {
			return Verdict{State: Exited, Reason: ReasonExitedSurvivors, MayBeAlive: true, Signalable: true}
		}
		return Verdict{State: Exited, Reason: ReasonExited}
	}

	if !sameBoot {
		return Verdict{State: Unknown, Reason: ReasonRebooted}
	}

	if !hasChild {
		// A recorded child pid beats StartFailed (a contradictory record),
		// handled below: declaring a live child dead is the worse mistake.
		if run.StartFailed {
			return Verdict{State: Unknown, Reason: ReasonStartFailed}
		}
		if supervised {
			return Verdict{State: Running, Reason: ReasonStarting, MayBeAlive: true}
		}
		return Verdict{State: Unknown, Reason: ReasonStartInterrupted}
	}

	switch {
	case child == Same && supervised:
		return Verdict{State: Running, Reason: ReasonRunning, MayBeAlive: true, Signalable: target, LeaderAlive: true}
	case child == Same:
		// In the session of a supervisor that is gone: the session id
		// outlives its leader, so the leader is still provably the run's.
		return Verdict{State: Running, Reason: ReasonUnsupervised, MayBeAlive: true, Signalable: target, LeaderAlive: true}
	case supervised:
		// The leader is gone (or its pid reused) but the supervisor has not
		// written the exit yet: it is between wait(2) and the record write.
		// The live supervisor vouches for the survivors, as under
		// ExitRecorded, so a kill can reach them now, not only once the
		// exit is written.
		return Verdict{State: Running, Reason: ReasonExiting, MayBeAlive: true,
			Signalable: target && facts.Survivors > 0}
	case child == Gone && groupOK && facts.Survivors > 0:
		// Nobody recorded how the leader ended, but members of its group
		// live on (a job it backgrounded). They are ours for the reason
		// given under ExitRecorded: while any member lives, the kernel does
		// not hand the leader's pid (their group id) out again. So the
		// name stays in use, and a kill can still reach them.
		return Verdict{State: Unknown, Reason: ReasonLostSurvivors, MayBeAlive: true, Signalable: true}
	default:
		return Verdict{State: Unknown, Reason: ReasonSupervisorLost}
	}
}

// identity is what Decide makes of the record's pids before any row: which
// processes are provably the run's, and which ids a signal may name.
type identity struct {
	sameBoot   bool
	sup, child Liveness // the probes, made Foreign where the record cannot be the run's
	supervised bool     // the supervisor is alive and the run's
	target     bool     // the leader's group (-PID) may be signalled
	groupOK    bool     // members of the group may be counted without a supervisor
}

// identify checks the record's pids against the facts and against the
// deciding process itself.
func identify(run Run, facts Facts) identity {
	sameBoot := run.BootID != "" && run.BootID == facts.BootID
	hasChild, hasSup := run.PID > 0, run.SupervisorPID > 0
	me := facts.Self
	// Pid 1 is init and never a run's; 0 and below are no pids.
	childOK := hasChild && run.PID > 1
	supOK := hasSup && run.SupervisorPID > 1
	sup := facts.Supervisor
	if hasSup && sup == Same && (!supOK || run.SupervisorPID == me.PID || run.SupervisorPID == me.PGID) {
		// init, this very process or its group leader, with its own start
		// time: none of them is a supervisor (each leads a session and a
		// group of its own, and agent-box is none).
		sup = Foreign
	}
	supervised := supOK && sup == Same
	// A record naming this process's own pid, group or session is genuine
	// only when we run inside the run (agent-box called from a run's
	// script: its session is the supervisor's, its group perhaps the
	// leader's). Only a live supervisor, verified, can vouch for that;
	// without one such a record is taken for planted.
	vouched := supervised || !me.owns(run.PID) && !me.owns(run.SupervisorPID)
	// The leader is the run's only if it is in its supervisor's session:
	// the supervisor made that session and forked the leader into it, and
	// a group leader can never leave its session (setsid(2) fails with
	// EPERM). A live process with the recorded start time elsewhere is
	// someone else's. Once the supervisor is gone the session is no proof
	// (childTied).
	child := facts.Child
	if hasChild && child == Same && !(childOK && supOK && vouched && childTied(run, facts, supervised)) {
		child = Foreign
	}

	// The leader's group is signalled as -PID: never ours (kill(-ours)
	// would stop the decider itself), whoever vouches.
	target := me.MayBeRun(run.PID)
	// Members of the leader's group, found without a live supervisor, are
	// tied to the run by the group id (the leader's pid) and the session id
	// (the supervisor's pid): both must be numbers a run can have, and not
	// ours (else the members found would be our own session's).
	groupOK := target && supOK && me.MayBeRun(run.SupervisorPID)
	return identity{sameBoot: sameBoot, sup: sup, child: child, supervised: supervised, target: target, groupOK: groupOK}
}

// childTied reports whether the live child is tied to the run's
// supervisor: in its session (see identity), or, for a pty run, whose
// leader made a session of its own for its terminal, the leader of that
// session and a child of the live, verified supervisor, which forked it
// and has not reaped it. A pty run's leader is not the run's once its
// supervisor is gone: its session is its own, and nothing else ties it.
//
// Without a live supervisor the session proves nothing either: its id
// outlives its leader, so a dead session leader's pid, named as the
// supervisor, ties every orphan of that session to a planted record (a
// user's nohup job whose login shell exited, with its real start time).
// The child must then carry the run's id in its environment
// (Facts.ChildTagged).
func childTied(run Run, facts Facts, supervised bool) bool {
	if run.Pty {
		return supervised && facts.ChildSID == run.PID && facts.ChildPPID == run.SupervisorPID
	}
	return facts.ChildSID == run.SupervisorPID && (supervised || facts.ChildTagged)
}
