package supervisor

import (
	"path/filepath"

	"github.com/agent-box/agent-box/proc"
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
	switch {
	case len(argv) == 3 && filepath.Base(argv[0]) == BinaryName:
		return true
	case len(argv) == 4 && argv[1] == "supervise":
		return true
	}
	return false
}
