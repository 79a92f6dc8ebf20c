// Package cli is agent-box's command line for people: ps, logs, start,
// kill, wait and the rest, on the box it runs on or on any other. It
// calls agent-box's MCP tools by name (session.Tools): over the reconnecting
// session for a box elsewhere, in process for this one (main wires which).
// There is no second implementation of what a tool does, and the same
// command line works on a laptop (macOS too) and on the box.
package cli

import (
	"github.com/agent-box/agent-box/session"
)

// Exit statuses of the CLI itself, besides a run's own status. wait and
// logs -f exit with the run's status, so agent-box's own failure must not
// look like a run that exited 1: it is 125, as timeout(1) and env(1) use
// for their own errors. A run that ended without a known status (unknown)
// gets it too.
const (
	ExitError = 125 // the operation failed, or the run's status is unknown
	ExitUsage = 2   // bad command line
)

// Commands lists the subcommands Run knows.
var Commands = []string{"ps", "logs", "start", "run", "attach", "kill", "stop", "wait", "write", "restart", "rm"}

// Box is the box the CLI acts on.
type Box struct {
	session.Tools
	// Local: the box is this machine, so start's --cwd defaults to the
	// current directory (elsewhere, to the box's default: the home).
	Local bool
	// Boxes are the names of the boxes of a fleet (package fleet) that
	// Tools reaches; nil for one box.
	Boxes []string
}
