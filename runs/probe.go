package runs

import (
	"slices"
	"sort"

	"github.com/agent-box/agent-box/cgroup"
	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
)

// bulkProbe is the number of runs past which a listing probes from one
// /proc snapshot rather than per run.
const bulkProbe = 16

// procIndex answers the probes of one call. A single run (Get) probes
// its pids directly; a listing of many runs loads one snapshot of /proc
// and answers every probe from it, instead of reading two /proc files per
// run.
type procIndex struct {
	sys    System
	bulk   bool // answer Probe from one snapshot
	loaded bool
	ok     bool
	procs  []proc.Stat
	byPID  map[int]proc.Stat
	byPGID map[int][]proc.Stat
	// The cgroup mounts, for the usage of runs with limits.
	mounts    cgroup.Mounts
	mountsErr error
}

func (x *procIndex) load() {
	if x.loaded {
		return
	}
	x.loaded = true
	procs, err := x.sys.Procs.Processes()
	if err != nil {
		return
	}
	x.ok = true
	x.procs = procs
	x.byPID = make(map[int]proc.Stat, len(procs))
	x.byPGID = make(map[int][]proc.Stat)
	for _, p := range procs {
		x.byPID[p.PID] = p
		x.byPGID[p.PGID] = append(x.byPGID[p.PGID], p)
	}
}

// probe is Procs.Probe, from the snapshot in bulk mode. The snapshot may
// predate the record it is asked about: a process missing from it may have
// started since, so with confirmGone a Gone is checked directly (only runs
// without a recorded exit need that, and they are few).
func (x *procIndex) probe(pid int, start uint64, confirmGone bool) (outcome.Liveness, proc.Stat) {
	if x.bulk {
		if x.load(); x.ok {
			p, alive := x.byPID[pid]
			switch {
			case !alive && !confirmGone:
				return outcome.Gone, proc.Stat{}
			case !alive:
				return x.sys.Procs.Probe(pid, start)
			case p.StartTime == start:
				return outcome.Same, p
			}
			return outcome.Reused, proc.Stat{}
		}
	}
	return x.sys.Procs.Probe(pid, start)
}

// members returns the run's processes other than its leader, once the
// leader is gone. While the supervisor lives these are its descendants:
// as a child subreaper it inherits every orphan of the run, so whatever
// group or session a process made for itself, it is found. Without the
// supervisor, only the leader's group can still be found: its members in
// the supervisor's session.
func (x *procIndex) members(rec *runrecord.Record, supAlive bool) []int {
	var pids []int
	if supAlive && !x.bulk {
		// The run's processes are all descendants of the supervisor: if
		// its only child is the leader (or a zombie of it), there are none
		// to find, and no need to scan /proc.
		if kids, err := x.sys.Procs.Children(rec.SupervisorPID); err == nil && !slices.ContainsFunc(kids, func(k int) bool { return k != rec.PID }) {
			return nil
		}
	}
	if supAlive {
		var ds []proc.Stat
		ds, supAlive = x.descendants(rec) // false: gone since the probe, no descendants to vouch for
		for _, p := range ds {
			if p.PID != rec.PID {
				pids = append(pids, p.PID)
			}
		}
	}
	if !supAlive && !x.bulk && !x.sys.Procs.GroupAlive(rec.PID) {
		// kill(-pgid, 0) says no process is left in the group: no need
		// to scan /proc for its members.
		return nil
	}
	x.load()
	for _, p := range x.byPGID[rec.PID] {
		// outcome.Member ties a member to this run: the group's and the
		// session's ids, a start no earlier than the leader's, and the
		// run's id in its environment.
		if p.PID != rec.PID && !slices.Contains(pids, p.PID) && outcome.Member(runFact(x.sys, p, rec), rec.PID, rec.SupervisorPID, rec.PIDStartTime) {
			pids = append(pids, p.PID)
		}
	}
	sort.Ints(pids)
	return pids
}

// runFact is p's fact for outcome.Member, for a process found without a
// live supervisor: whether it carries rec's run in its environment is
// read only when its ids could make it a member (outcome.InGroup).
func runFact(sys System, p proc.Stat, rec *runrecord.Record) outcome.Proc {
	f := p.Fact()
	if outcome.InGroup(f, rec.PID, rec.SupervisorPID, rec.PIDStartTime) {
		f.Tagged = sys.carriesRunID(p.PID, rec.Name, rec.RunID)
	}
	return f
}

// descendants returns, from the snapshot, the processes below the run's
// supervisor (its leader among them), leaving out runs started from inside
// the run (nested supervisors and theirs): the processes a live supervisor
// vouches for. False when the snapshot does not hold the supervisor the
// record names: gone since the probe, there are none to vouch for.
func (x *procIndex) descendants(rec *runrecord.Record) ([]proc.Stat, bool) {
	x.load()
	if sup, ok := x.byPID[rec.SupervisorPID]; !ok || sup.StartTime != rec.SupervisorStartTime {
		return nil, false
	}
	return proc.Descendants(x.procs, rec.SupervisorPID, x.sys.Procs.IsSupervisor), true
}

// probe gathers the outcome inputs for rec: what the record says and what
// the live system says about its pids.
func (m *Manager) probe(rec *runrecord.Record, run *Run, idx *procIndex) (outcome.Run, outcome.Facts) {
	in := outcome.Run{
		BootID:        rec.BootID,
		PID:           max(rec.PID, 0),
		SupervisorPID: max(rec.SupervisorPID, 0),
		ExitRecorded:  rec.Exit != nil,
		StartFailed:   rec.StartError != "",
		Pty:           rec.Pty,
	}
	facts := outcome.Facts{BootID: m.Sys.Boot, Self: m.Sys.Self}
	run.supAlive, run.Survivors = false, nil
	if rec.BootID != facts.BootID {
		return in, facts
	}
	hasChild := in.PID > 0
	if hasChild {
		var st proc.Stat
		facts.Child, st = idx.probe(rec.PID, rec.PIDStartTime, !in.ExitRecorded)
		facts.ChildSID, facts.ChildPPID = st.SID, st.PPID
	}
	// After the exit the supervisor lives on while it may still write the
	// log, and while processes of the run outlive the leader (it is their
	// subreaper). Once the exit is recorded a supervisor missing from a
	// snapshot cannot come back.
	if in.SupervisorPID > 0 {
		var sup proc.Stat
		facts.Supervisor, sup = idx.probe(rec.SupervisorPID, rec.SupervisorStartTime, !in.ExitRecorded || !rec.OutputClosed)
		if facts.Supervisor == outcome.Same {
			// The pid and start time match; the process must also say it
			// supervises this run, since a live supervisor vouches for its
			// descendants as the run's. One that does not makes the record
			// foreign (planted, or copied from another run).
			facts.Supervisor = m.Sys.Procs.SupervisorOf(sup, rec.Name, rec.RunID)
		}
		run.supAlive = facts.Supervisor == outcome.Same
	}
	if facts.Child == outcome.Same && !run.supAlive {
		facts.ChildTagged = m.Sys.carriesRunID(rec.PID, rec.Name, rec.RunID)
	}
	// Survivors: once the leader's exit is recorded, or while a live
	// supervisor is about to record it (a kill must reach the members that
	// ignored its signal without waiting for the record).
	// A live supervisor vouches for them (its descendants) even when the
	// leader's pid was handed out again; without it they are found by the
	// leader's group, whose id a Reused pid no longer names.
	// And once the supervisor is lost too, the members of a Gone leader's
	// group: nobody records its exit, but they can still be stopped.
	exiting := !in.ExitRecorded && facts.Child != outcome.Same && run.supAlive
	lost := !in.ExitRecorded && facts.Child == outcome.Gone && !run.supAlive
	// Whether what is found may be trusted (the pids a record names, our
	// own among them) is outcome's to decide, and view shows survivors
	// only when it does.
	if hasChild && (facts.Child != outcome.Reused || run.supAlive) && (in.ExitRecorded || exiting || lost) && facts.Supervisor != outcome.Foreign {
		run.Survivors = idx.members(rec, run.supAlive)
		facts.Survivors = len(run.Survivors)
	}
	return in, facts
}
