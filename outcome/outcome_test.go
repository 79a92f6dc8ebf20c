package outcome

import (
	"fmt"
	"slices"
	"testing"
)

const (
	bootA = "5b2a5a4e-9a3c-4e0c-9e55-0d6d2f1c3a11"
	bootB = "0d1f2e3c-1111-4222-8333-944455556666"
)

// TestDecide pins every row of the matrix in docs/architecture/outcome.md.
// Change the two together.
func TestDecide(t *testing.T) {
	child := Run{BootID: bootA, PID: 100, SupervisorPID: 50}
	ptyRun := Run{BootID: bootA, PID: 100, SupervisorPID: 50, Pty: true}
	noChild := Run{BootID: bootA, SupervisorPID: 50}
	withExit := func(r Run) Run { r.ExitRecorded = true; return r }
	failed := func(r Run) Run { r.StartFailed = true; return r }
	unsupervisedRun := func(r Run) Run { r.SupervisorPID = 0; return r }
	pids := func(r Run, pid, sup int) Run { r.PID, r.SupervisorPID = pid, sup; return r }
	me := Self{PID: 300, PGID: 301, SID: 302}
	boot := func(r Run, id string) Run { r.BootID = id; return r }

	tests := []struct {
		name  string
		run   Run
		facts Facts
		want  Verdict
	}{
		// Exit recorded: the record is the fact, probes cannot undo it.
		{"exit recorded", withExit(child), Facts{BootID: bootA, Child: Gone, Supervisor: Gone},
			Verdict{Exited, ReasonExited, false, false, false}},
		{"exit recorded, supervisor still alive", withExit(child), Facts{BootID: bootA, Child: Gone, Supervisor: Same},
			Verdict{Exited, ReasonExited, false, false, false}},
		{"exit recorded, survivors", withExit(child), Facts{BootID: bootA, Child: Gone, Survivors: 2},
			Verdict{Exited, ReasonExitedSurvivors, true, true, false}},
		{"exit recorded, survivors, leader pid same", withExit(child), Facts{BootID: bootA, Child: Same, Survivors: 1},
			Verdict{Exited, ReasonExitedSurvivors, true, true, false}},
		{"exit recorded, survivors of the live supervisor, leader pid reused", withExit(child), Facts{BootID: bootA, Child: Reused, Supervisor: Same, Survivors: 1},
			Verdict{Exited, ReasonExitedSurvivors, true, true, false}},
		{"exit recorded, survivors, leader pid reused", withExit(child), Facts{BootID: bootA, Child: Reused, Survivors: 1},
			Verdict{Exited, ReasonExited, false, false, false}},
		{"exit recorded on another boot, survivors ignored", withExit(child), Facts{BootID: bootB, Child: Gone, Survivors: 3},
			Verdict{Exited, ReasonExited, false, false, false}},
		{"exit recorded, empty boot id, survivors ignored", withExit(boot(child, "")), Facts{BootID: bootA, Child: Gone, Survivors: 3},
			Verdict{Exited, ReasonExited, false, false, false}},
		{"exit recorded, no child pid, survivors ignored", withExit(noChild), Facts{BootID: bootA, Survivors: 3},
			Verdict{Exited, ReasonExited, false, false, false}},

		// Another boot: no pid from the record means anything now.
		{"rebooted, child pid looks same", child, Facts{BootID: bootB, Child: Same, Supervisor: Same},
			Verdict{Unknown, ReasonRebooted, false, false, false}},
		{"rebooted, all gone", child, Facts{BootID: bootB},
			Verdict{Unknown, ReasonRebooted, false, false, false}},
		{"recorded boot id empty", boot(child, ""), Facts{BootID: bootA, Child: Same, Supervisor: Same},
			Verdict{Unknown, ReasonRebooted, false, false, false}},
		{"both boot ids empty", boot(child, ""), Facts{BootID: "", Child: Same, Supervisor: Same},
			Verdict{Unknown, ReasonRebooted, false, false, false}},
		{"rebooted beats start failed", failed(noChild), Facts{BootID: bootB},
			Verdict{Unknown, ReasonRebooted, false, false, false}},
		{"rebooted beats starting", noChild, Facts{BootID: bootB, Supervisor: Same},
			Verdict{Unknown, ReasonRebooted, false, false, false}},

		// Child recorded, same boot.
		{"running", child, Facts{BootID: bootA, Child: Same, Supervisor: Same},
			Verdict{Running, ReasonRunning, true, true, true}},
		{"unsupervised, supervisor gone", child, Facts{BootID: bootA, Child: Same, Supervisor: Gone},
			Verdict{Running, ReasonUnsupervised, true, true, true}},
		{"unsupervised, supervisor pid reused", child, Facts{BootID: bootA, Child: Same, Supervisor: Reused},
			Verdict{Running, ReasonUnsupervised, true, true, true}},
		{"no supervisor recorded: no session vouches for the leader", unsupervisedRun(child), Facts{BootID: bootA, Child: Same, Supervisor: Same},
			Verdict{Unknown, ReasonForeignProcess, false, false, false}},
		{"exiting, child gone", child, Facts{BootID: bootA, Child: Gone, Supervisor: Same},
			Verdict{Running, ReasonExiting, true, false, false}},
		{"exiting, child pid reused", child, Facts{BootID: bootA, Child: Reused, Supervisor: Same},
			Verdict{Running, ReasonExiting, true, false, false}},
		{"exiting, survivors", child, Facts{BootID: bootA, Child: Gone, Supervisor: Same, Survivors: 2},
			Verdict{Running, ReasonExiting, true, true, false}},
		{"exiting, child pid reused, survivors of the live supervisor", child, Facts{BootID: bootA, Child: Reused, Supervisor: Same, Survivors: 2},
			Verdict{Running, ReasonExiting, true, true, false}},
		{"supervisor lost, survivors of the gone leader's group", child, Facts{BootID: bootA, Child: Gone, Supervisor: Gone, Survivors: 2},
			Verdict{Unknown, ReasonLostSurvivors, true, true, false}},
		{"supervisor lost, leader pid reused: its group is someone else's", child, Facts{BootID: bootA, Child: Reused, Supervisor: Gone, Survivors: 2},
			Verdict{Unknown, ReasonSupervisorLost, false, false, false}},
		{"supervisor lost", child, Facts{BootID: bootA, Child: Gone, Supervisor: Gone},
			Verdict{Unknown, ReasonSupervisorLost, false, false, false}},
		{"supervisor lost, both pids reused", child, Facts{BootID: bootA, Child: Reused, Supervisor: Reused},
			Verdict{Unknown, ReasonSupervisorLost, false, false, false}},
		{"supervisor lost, none recorded", unsupervisedRun(child), Facts{BootID: bootA, Child: Gone},
			Verdict{Unknown, ReasonSupervisorLost, false, false, false}},

		// The recorded supervisor is alive and says it is not this run's:
		// the record is someone else's, whatever else it claims.
		{"foreign supervisor, child alive", child, Facts{BootID: bootA, Child: Same, Supervisor: Foreign},
			Verdict{Unknown, ReasonForeignRecord, false, false, false}},
		{"foreign supervisor, exit recorded, survivors", withExit(child), Facts{BootID: bootA, Child: Same, Supervisor: Foreign, Survivors: 3},
			Verdict{Unknown, ReasonForeignRecord, false, false, false}},
		{"foreign supervisor, no child", noChild, Facts{BootID: bootA, Supervisor: Foreign},
			Verdict{Unknown, ReasonForeignRecord, false, false, false}},
		{"foreign supervisor on another boot is just another boot", child, Facts{BootID: bootB, Child: Same, Supervisor: Foreign},
			Verdict{Unknown, ReasonRebooted, false, false, false}},

		// The recorded leader is alive with its start time but is not in
		// its supervisor's session, or names a pid no run can have: it is
		// someone else's process, never signalled (issue 9: kill(-1)).
		{"leader in another session, supervisor gone", child, Facts{BootID: bootA, Child: Same, ChildSID: 77, Supervisor: Gone},
			Verdict{Unknown, ReasonForeignProcess, false, false, false}},
		{"leader in another session, supervisor alive", child, Facts{BootID: bootA, Child: Same, ChildSID: 77, Supervisor: Same},
			Verdict{Unknown, ReasonForeignProcess, false, false, false}},
		{"leader in another session, exit recorded, survivors", withExit(child), Facts{BootID: bootA, Child: Same, ChildSID: 77, Survivors: 2},
			Verdict{Unknown, ReasonForeignProcess, false, false, false}},
		{"leader in another session, caller says foreign", child, Facts{BootID: bootA, Child: Foreign, Supervisor: Same},
			Verdict{Unknown, ReasonForeignProcess, false, false, false}},
		{"leader is pid 1 (kill(-1) would reach every process)", pids(child, 1, 50), Facts{BootID: bootA, Child: Same, ChildSID: 50, Supervisor: Gone},
			Verdict{Unknown, ReasonForeignProcess, false, false, false}},
		{"leader is our own process group", pids(child, me.PGID, 50), Facts{BootID: bootA, Child: Same, ChildSID: 50, Supervisor: Gone, Self: me},
			Verdict{Unknown, ReasonForeignProcess, false, false, false}},
		{"leader is our own pid", pids(child, me.PID, 50), Facts{BootID: bootA, Child: Same, ChildSID: 50, Supervisor: Gone, Self: me},
			Verdict{Unknown, ReasonForeignProcess, false, false, false}},
		{"leader in our session, which the record calls its supervisor's", pids(child, 100, me.SID), Facts{BootID: bootA, Child: Same, ChildSID: me.SID, Supervisor: Reused, Self: me},
			Verdict{Unknown, ReasonForeignProcess, false, false, false}},
		{"supervisor is our own pid, alive with its start time", pids(child, 100, me.PID), Facts{BootID: bootA, Child: Same, ChildSID: me.PID, Supervisor: Same, Self: me},
			Verdict{Unknown, ReasonForeignRecord, false, false, false}},
		{"leader gone, its group id is ours: members are not the run's", pids(child, me.PGID, 50), Facts{BootID: bootA, Child: Gone, Supervisor: Gone, Survivors: 3, Self: me},
			Verdict{Unknown, ReasonSupervisorLost, false, false, false}},
		{"leader gone, the session named is ours: members are not the run's", pids(child, 100, me.SID), Facts{BootID: bootA, Child: Gone, Supervisor: Gone, Survivors: 3, Self: me},
			Verdict{Unknown, ReasonSupervisorLost, false, false, false}},
		{"exit recorded, group id 1: no survivors", withExit(pids(child, 1, 50)), Facts{BootID: bootA, Child: Gone, Survivors: 3},
			Verdict{Exited, ReasonExited, false, false, false}},
		{"exit recorded, the session named is ours: no survivors", withExit(pids(child, 100, me.SID)), Facts{BootID: bootA, Child: Gone, Survivors: 3, Self: me},
			Verdict{Exited, ReasonExited, false, false, false}},
		{"exiting, the leader's pid is ours: not signalable", pids(child, me.PGID, 50), Facts{BootID: bootA, Child: Reused, Supervisor: Same, Survivors: 2, Self: me},
			Verdict{Running, ReasonExiting, true, false, false}},
		// agent-box called from inside a run: its session is the run's
		// supervisor's, its group perhaps the leader's. A verified live
		// supervisor makes the record believable; our own group is still
		// never signalled.
		{"inside the run: our session is its live supervisor's", pids(child, 100, me.SID), Facts{BootID: bootA, Child: Same, ChildSID: me.SID, Supervisor: Same, Self: me},
			Verdict{Running, ReasonRunning, true, true, true}},
		{"inside the run: its leader's group is ours", pids(child, me.PGID, me.SID), Facts{BootID: bootA, Child: Same, ChildSID: me.SID, Supervisor: Same, Self: me},
			Verdict{Running, ReasonRunning, true, false, true}},
		{"inside the run, its supervisor gone: unverifiable", pids(child, me.PGID, me.SID), Facts{BootID: bootA, Child: Same, ChildSID: me.SID, Supervisor: Gone, Self: me},
			Verdict{Unknown, ReasonForeignProcess, false, false, false}},
		{"supervisor is our group leader, alive with its start time", pids(child, 100, me.PGID), Facts{BootID: bootA, Child: Same, ChildSID: me.PGID, Supervisor: Same, Self: me},
			Verdict{Unknown, ReasonForeignRecord, false, false, false}},
		{"leader in its gone supervisor's session (a session id outlives its leader), carrying the run's id", child, Facts{BootID: bootA, Child: Same, ChildSID: 50, ChildTagged: true, Supervisor: Gone},
			Verdict{Running, ReasonUnsupervised, true, true, true}},
		// Issue 30: a session's id outlives its leader, so a planted
		// record naming a dead login shell as the supervisor and its
		// orphaned nohup job as the leader read running, and
		// process_kill SIGKILLed the job. Without a live supervisor only
		// the run's id in the process's environment ties it to the run.
		{"leader in a gone supervisor's session, without the run's id (an orphan of a dead shell)", child, Facts{BootID: bootA, Child: Same, ChildSID: 50, ChildTagged: false, Supervisor: Gone},
			Verdict{Unknown, ReasonForeignProcess, false, false, false}},
		{"leader in a gone supervisor's session, without the run's id, exit recorded, survivors", withExit(child), Facts{BootID: bootA, Child: Same, ChildSID: 50, ChildTagged: false, Supervisor: Gone, Survivors: 2},
			Verdict{Unknown, ReasonForeignProcess, false, false, false}},
		{"leader in its live supervisor's session, without the run's id (it cleared its environment)", child, Facts{BootID: bootA, Child: Same, ChildSID: 50, ChildTagged: false, Supervisor: Same},
			Verdict{Running, ReasonRunning, true, true, true}},

		// A pty run's leader leads its own session (the terminal's): it is
		// the run's only as the live, verified supervisor's child.
		{"pty: leader of its own session, child of the live supervisor", ptyRun, Facts{BootID: bootA, Child: Same, ChildSID: 100, ChildPPID: 50, Supervisor: Same},
			Verdict{Running, ReasonRunning, true, true, true}},
		{"pty: leader in the supervisor's session instead", ptyRun, Facts{BootID: bootA, Child: Same, ChildSID: 50, ChildPPID: 50, Supervisor: Same},
			Verdict{Unknown, ReasonForeignProcess, false, false, false}},
		{"pty: a session leader that is not the supervisor's child", ptyRun, Facts{BootID: bootA, Child: Same, ChildSID: 100, ChildPPID: 1, Supervisor: Same},
			Verdict{Unknown, ReasonForeignProcess, false, false, false}},
		{"pty: supervisor gone, nothing ties the leader to the run", ptyRun, Facts{BootID: bootA, Child: Same, ChildSID: 100, ChildPPID: 50, Supervisor: Gone},
			Verdict{Unknown, ReasonForeignProcess, false, false, false}},
		{"pty: exiting", ptyRun, Facts{BootID: bootA, Child: Gone, Supervisor: Same},
			Verdict{Running, ReasonExiting, true, false, false}},

		// No child pid recorded, same boot.
		{"start failed", failed(noChild), Facts{BootID: bootA, Supervisor: Gone},
			Verdict{Unknown, ReasonStartFailed, false, false, false}},
		{"start failed, supervisor still alive", failed(noChild), Facts{BootID: bootA, Supervisor: Same},
			Verdict{Unknown, ReasonStartFailed, false, false, false}},
		{"child pid beats contradictory start failure", failed(child), Facts{BootID: bootA, Child: Same, Supervisor: Same},
			Verdict{Running, ReasonRunning, true, true, true}},
		{"starting", noChild, Facts{BootID: bootA, Supervisor: Same},
			Verdict{Running, ReasonStarting, true, false, false}},
		{"start interrupted, supervisor gone", noChild, Facts{BootID: bootA, Supervisor: Gone},
			Verdict{Unknown, ReasonStartInterrupted, false, false, false}},
		{"start interrupted, supervisor pid reused", noChild, Facts{BootID: bootA, Supervisor: Reused},
			Verdict{Unknown, ReasonStartInterrupted, false, false, false}},
		{"start interrupted, no supervisor recorded", unsupervisedRun(noChild), Facts{BootID: bootA, Supervisor: Same},
			Verdict{Unknown, ReasonStartInterrupted, false, false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A live leader is in its supervisor's session unless the
			// row says otherwise.
			if tt.facts.Child == Same && tt.facts.ChildSID == 0 {
				tt.facts.ChildSID = tt.run.SupervisorPID
				// and carries the run's id, as a run's leader does
				tt.facts.ChildTagged = true
			}
			if got := Decide(tt.run, tt.facts); got != tt.want {
				t.Errorf("Decide(%+v, %+v)\n got %+v\nwant %+v", tt.run, tt.facts, got, tt.want)
			}
		})
	}
}

// stateOf is the only state each reason may come with.
var stateOf = map[Reason]State{
	ReasonExited:           Exited,
	ReasonExitedSurvivors:  Exited,
	ReasonRebooted:         Unknown,
	ReasonRunning:          Running,
	ReasonUnsupervised:     Running,
	ReasonExiting:          Running,
	ReasonSupervisorLost:   Unknown,
	ReasonLostSurvivors:    Unknown,
	ReasonForeignRecord:    Unknown,
	ReasonForeignProcess:   Unknown,
	ReasonStarting:         Running,
	ReasonStartInterrupted: Unknown,
	ReasonStartFailed:      Unknown,
}

// mayBeAliveOf is the MayBeAlive column of the matrix, per reason.
var mayBeAliveOf = map[Reason]bool{
	ReasonExited:           false,
	ReasonExitedSurvivors:  true,
	ReasonRebooted:         false,
	ReasonRunning:          true,
	ReasonUnsupervised:     true,
	ReasonExiting:          true,
	ReasonSupervisorLost:   false,
	ReasonLostSurvivors:    true,
	ReasonForeignRecord:    false,
	ReasonForeignProcess:   false,
	ReasonStarting:         true,
	ReasonStartInterrupted: false,
	ReasonStartFailed:      false,
}

// leaderAliveOf is the LeaderAlive column of the matrix, per reason: only
// a leader found Same, in its supervisor's session, is known to hold its
// group's id.
var leaderAliveOf = map[Reason]bool{
	ReasonRunning:      true,
	ReasonUnsupervised: true,
}

// TestDecideInvariants enumerates every combination of inputs (with
// representative boot ids and survivor counts) and checks the properties
// that must hold whatever the row.
func TestDecideInvariants(t *testing.T) {
	bools := []bool{false, true}
	lives := []Liveness{Gone, Same, Reused, Foreign}
	seen := map[Reason]bool{}
	n := 0
	// Pids: none, a run's, pid 1, and the deciding process's own.
	me := Self{PID: 300, PGID: 301, SID: 302}
	for _, recBoot := range []string{"", bootA, bootB} {
		for _, liveBoot := range []string{"", bootA} {
			for _, pid := range []int{0, 100, 1, me.PGID} {
				for _, supPID := range []int{0, 50, 1, me.SID} {
					for _, exit := range bools {
						for _, failed := range bools {
							for _, c := range lives {
								for _, sid := range []int{50, 77, me.SID} {
									for _, s := range lives {
										for _, surv := range []int{0, 1, 5} {
											for _, tagged := range bools {
												run := Run{BootID: recBoot, PID: pid, SupervisorPID: supPID, ExitRecorded: exit, StartFailed: failed}
												facts := Facts{BootID: liveBoot, Child: c, ChildSID: sid, ChildTagged: tagged, Supervisor: s, Survivors: surv, Self: me}
												checkInvariants(t, run, facts)
												seen[Decide(run, facts).Reason] = true
												n++
											}
										}
									}
								}
							}
						}
					}
				}
			}
		}
	}
	for r := range stateOf {
		if !seen[r] {
			t.Errorf("reason %q is never reached", r)
		}
	}
	if seen[ReasonCorrupt] {
		t.Errorf("Decide returned %q, which only callers set", ReasonCorrupt)
	}
	t.Logf("checked %d combinations", n)
}

func checkInvariants(t *testing.T, run Run, facts Facts) {
	t.Helper()
	v := Decide(run, facts)
	where := fmt.Sprintf("Decide(%+v, %+v) = %+v", run, facts, v)
	sameBoot := run.BootID != "" && run.BootID == facts.BootID
	hasChild, hasSup := run.PID > 0, run.SupervisorPID > 0
	me := facts.Self
	owns := func(pid int) bool { return pid == me.PID || pid == me.PGID || pid == me.SID }
	supIsUs := run.SupervisorPID <= 1 || run.SupervisorPID == me.PID || run.SupervisorPID == me.PGID
	supSame := hasSup && facts.Supervisor == Same && !supIsUs
	// Our own ids in a record are believed only with a live, verified
	// supervisor (agent-box run from inside the run).
	vouched := supSame || !owns(run.PID) && !owns(run.SupervisorPID)
	childSame := hasChild && facts.Child == Same && run.PID > 1 && run.SupervisorPID > 1 && vouched && facts.ChildSID == run.SupervisorPID && (supSame || facts.ChildTagged)
	pidsOK := me.MayBeRun(run.PID) && (supSame || me.MayBeRun(run.SupervisorPID))

	if want, ok := stateOf[v.Reason]; !ok || want != v.State {
		t.Errorf("%s: reason %q does not go with state %q", where, v.Reason, v.State)
	}
	if want := mayBeAliveOf[v.Reason]; v.MayBeAlive != want {
		t.Errorf("%s: MayBeAlive = %v for reason %q, want %v", where, v.MayBeAlive, v.Reason, want)
	}
	if want := leaderAliveOf[v.Reason]; v.LeaderAlive != want {
		t.Errorf("%s: LeaderAlive = %v for reason %q, want %v", where, v.LeaderAlive, v.Reason, want)
	}
	if v.LeaderAlive && !childSame {
		t.Errorf("%s: LeaderAlive without a live leader in its supervisor's session", where)
	}
	foreign := sameBoot && hasSup && (facts.Supervisor == Foreign || facts.Supervisor == Same && supIsUs)
	foreignChild := sameBoot && hasChild && !foreign && (facts.Child == Foreign || facts.Child == Same && !childSame)
	if (v.State == Exited) != (run.ExitRecorded && !foreign && !foreignChild) {
		t.Errorf("%s: Exited if and only if an exit is recorded (by a record that is the run's)", where)
	}
	if foreign && (v.Reason != ReasonForeignRecord || v.Signalable || v.MayBeAlive) {
		t.Errorf("%s: a record whose live supervisor is not the run's is foreign, never signalable", where)
	}
	if foreignChild && (v.Reason != ReasonForeignProcess || v.Signalable || v.MayBeAlive) {
		t.Errorf("%s: a live leader outside its supervisor's session is not the run's, never signalable", where)
	}
	if v.State == Running && !childSame && !supSame {
		t.Errorf("%s: Running with neither child nor supervisor provably alive", where)
	}
	if v.State == Running && !childSame && v.Reason != ReasonExiting && v.Reason != ReasonStarting {
		t.Errorf("%s: Running without a live child must be exiting or starting", where)
	}
	if v.State == Running && !sameBoot {
		t.Errorf("%s: Running across a boot", where)
	}
	if !run.ExitRecorded && !sameBoot && v.Reason != ReasonRebooted {
		t.Errorf("%s: another boot without an exit must be %q", where, ReasonRebooted)
	}
	if v.Signalable {
		if !pidsOK {
			t.Errorf("%s: Signalable with a group no run can have (<= 1, or the decider's own pid, group or session), or members looked for in our own session", where)
		}
		if facts.Child == Same && !childSame {
			t.Errorf("%s: Signalable with a live leader outside its supervisor's session", where)
		}
		if !sameBoot {
			t.Errorf("%s: Signalable across a boot", where)
		}
		if !hasChild {
			t.Errorf("%s: Signalable with no child pid to signal", where)
		}
		if facts.Child == Reused && !(supSame && facts.Survivors > 0) {
			t.Errorf("%s: Signalable with a reused child pid, and no live supervisor vouching for survivors", where)
		}
		if v.State == Unknown && v.Reason != ReasonLostSurvivors {
			t.Errorf("%s: Signalable when the state is unknown, other than for the lost run's survivors", where)
		}
		if v.Reason == ReasonLostSurvivors && (facts.Child != Gone || facts.Survivors == 0) {
			t.Errorf("%s: lost survivors are signalable only as members of a Gone leader's group", where)
		}
		if !childSame && v.Reason != ReasonExitedSurvivors && v.Reason != ReasonLostSurvivors && (v.Reason != ReasonExiting || facts.Survivors == 0) {
			t.Errorf("%s: Signalable without the leader, or survivors of its group, being provably ours", where)
		}
	}
	if v.Reason == ReasonExitedSurvivors && facts.Survivors == 0 {
		t.Errorf("%s: survivors reported with none counted", where)
	}
	if v.Reason == ReasonExiting && v.Signalable != (facts.Survivors > 0 && pidsOK) {
		t.Errorf("%s: an exiting run is signalable exactly when its leader, a pid a run can have, left survivors", where)
	}

	// Facts that the record says are meaningless must not change anything.
	if !hasChild {
		for _, c := range []Liveness{Gone, Same, Reused, Foreign} {
			f := facts
			f.Child = c
			if got := Decide(run, f); got != v {
				t.Errorf("%s: changed to %+v with Child=%v although no child pid is recorded", where, got, c)
			}
		}
	}
	if !hasChild || facts.Child != Same {
		f := facts
		f.ChildSID = 12345
		if got := Decide(run, f); got != v {
			t.Errorf("%s: changed to %+v with ChildSID=%d although the child is not alive", where, got, f.ChildSID)
		}
	}
	if !hasSup {
		for _, s := range []Liveness{Gone, Same, Reused, Foreign} {
			f := facts
			f.Supervisor = s
			if got := Decide(run, f); got != v {
				t.Errorf("%s: changed to %+v with Supervisor=%v although no supervisor pid is recorded", where, got, s)
			}
		}
	}
	if !run.ExitRecorded && v.Reason != ReasonExiting && v.Reason != ReasonLostSurvivors {
		f := facts
		f.Survivors = 0
		if got := Decide(run, f); got != v {
			t.Errorf("%s: survivors changed the verdict of a run with no exit recorded that is neither exiting nor lost with survivors", where)
		}
	}
}

// TestTargets pins which processes a kill reaches, the "Targets" table in
// docs/architecture/outcome.md. Change the two together.
func TestTargets(t *testing.T) {
	me := Self{PID: 300, PGID: 301, SID: 302}
	// The run: leader 100 (its group's id), started at tick 1000, in the
	// session of its supervisor 50.
	base := TargetFacts{Group: 100, LeaderStart: 1000, Supervisor: 50, Self: me}
	with := func(edit func(*TargetFacts)) TargetFacts { f := base; edit(&f); return f }
	alive := func(f *TargetFacts) { f.LeaderAlive = true }
	member := Proc{PID: 110, PGID: 100, SID: 50, StartTime: 1200, Tagged: true}
	daemon := Proc{PID: 120, PGID: 120, SID: 120, StartTime: 1300} // setsid: a session of its own
	worker := Proc{PID: 130, PGID: 130, SID: 50, StartTime: 1400}  // setpgid: a group of its own

	type row struct {
		name    string
		facts   TargetFacts
		group   bool
		outside []int
	}
	tests := []row{
		{"leader alive: its group", with(alive), true, nil},
		{"leader alive, descendants outside the group", with(func(f *TargetFacts) {
			alive(f)
			f.Descendants = []Proc{member, daemon, worker}
		}), true, []int{120, 130}},
		{"leader gone, nothing seen: the group id may be someone else's", base, false, nil},
		{"leader gone, a descendant in the group", with(func(f *TargetFacts) { f.Descendants = []Proc{member} }), true, nil},
		{"leader gone, only a descendant outside the group", with(func(f *TargetFacts) { f.Descendants = []Proc{daemon} }), false, []int{120}},
		{"leader gone, supervisor gone, a member in its session", with(func(f *TargetFacts) { f.Procs = []Proc{daemon, member} }), true, nil},
		{"leader gone, supervisor gone, a process in its group and session without the run's id (an orphan of a dead session leader)", with(func(f *TargetFacts) {
			f.Procs = []Proc{{PID: 110, PGID: 100, SID: 50, StartTime: 1200}}
		}), false, nil},
		{"leader gone, a member started with the leader", with(func(f *TargetFacts) {
			f.Procs = []Proc{{PID: 110, PGID: 100, SID: 50, StartTime: 1000, Tagged: true}}
		}), true, nil},
		{"leader gone, a member started before the leader", with(func(f *TargetFacts) {
			f.Procs = []Proc{{PID: 110, PGID: 100, SID: 50, StartTime: 999}}
		}), false, nil},
		{"leader gone, a process in the group but another session", with(func(f *TargetFacts) {
			f.Procs = []Proc{{PID: 110, PGID: 100, SID: 77, StartTime: 1200}}
		}), false, nil},
		{"leader gone, its id reused for a new group with no member of ours", with(func(f *TargetFacts) {
			f.Procs = []Proc{{PID: 100, PGID: 100, SID: 100, StartTime: 5000}, {PID: 101, PGID: 100, SID: 100, StartTime: 5001}}
		}), false, nil},
		{"leader gone, the session named is ours", with(func(f *TargetFacts) {
			f.Supervisor = me.SID
			f.Procs = []Proc{{PID: 110, PGID: 100, SID: me.SID, StartTime: 1200}}
		}), false, nil},
		{"leader gone, the session named is pid 1", with(func(f *TargetFacts) {
			f.Supervisor = 1
			f.Procs = []Proc{{PID: 110, PGID: 100, SID: 1, StartTime: 1200}}
		}), false, nil},
		{"our own pid and pid 1 among the descendants are never signalled", with(func(f *TargetFacts) {
			alive(f)
			f.Descendants = []Proc{{PID: 1, PGID: 1, SID: 1}, {PID: me.PID, PGID: me.PGID, SID: 50}, worker}
		}), true, []int{130}},
	}
	// A planted record: the group it names is no run's, whatever is seen.
	for _, g := range []int{me.PGID, me.PID, me.SID, 1, 0, -1} {
		tests = append(tests, row{fmt.Sprintf("planted group id %d: nothing", g), with(func(f *TargetFacts) {
			alive(f)
			f.Group = g
			f.Descendants = []Proc{{PID: 110, PGID: g, SID: 50, StartTime: 1200}, daemon}
			f.Procs = []Proc{{PID: 110, PGID: g, SID: 50, StartTime: 1200}}
		}), false, nil})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			group, outside := Targets(tt.facts)
			if group != tt.group || !slices.Equal(outside, tt.outside) {
				t.Errorf("Targets(%+v) = %v, %v; want %v, %v", tt.facts, group, outside, tt.group, tt.outside)
			}
		})
	}
}
