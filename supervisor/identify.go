package supervisor

import (
	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
)

// BinaryName is the name of the lean supervisor executable.
const BinaryName = "agent-box-supervisor"

// IsSupervisor reports whether p is the supervisor of some run: a session
// leader (every supervisor has a session of its own) running
// "agent-box-supervisor NAME RUN_ID" or "agent-box supervise NAME RUN_ID".
//
// A run may start other runs (an agent's script calling agent-box start):
// their supervisors end up below the run's own supervisor, its subreaper,
// yet each is a run of its own, with its own record, which a kill of the
// outer run must not touch.
func IsSupervisor(p proc.Stat) bool {
	if p.SID != p.PID {
		return false
	}
	argv, err := proc.Cmdline(p.PID)
	if err != nil {
		return false
	}
	_, _, ok := supervisorArgs(argv)
	return ok
}

// IsSupervisorOf reports whether p, running argv, is the supervisor of the
// run name/runID.
//
// A record's supervisor pid and start time say which process it was, but
// a record can be planted or copied: a live supervisor vouches for every
// descendant as the run's (process_kill signals them), so before it does,
// the process must also say it supervises this very run.
func IsSupervisorOf(p proc.Stat, argv []string, name, runID string) bool {
	n, id, ok := supervisorArgs(argv)
	return p.SID == p.PID && ok && n == name && id == runID
}

// supervisorArgs parses a supervisor's command line. runs.launch ends
// every supervisor command ("agent-box-supervisor", "agent-box supervise",
// or a test's stand-in) with the run's name and run id; a run id has a
// shape no ordinary argument has by chance.
func supervisorArgs(argv []string) (name, runID string, ok bool) {
	n := len(argv)
	if n < 3 {
		return "", "", false
	}
	name, runID = argv[n-2], argv[n-1]
	if runrecord.ValidName(name) != nil || runrecord.ValidRunID(runID) != nil {
		return "", "", false
	}
	return name, runID, true
}
