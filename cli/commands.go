// Package cli is agent-box's command line for people: ps, logs, start,
// kill, wait. It reads and changes the same runs through package runs as the
// MCP tools do; there is no second implementation.
//
// Like runs, it is the box's and builds only on Linux. This file builds
// everywhere: the local side (agent-box connect and install, on a laptop)
// exits with the same statuses, and names the box's commands when it is
// asked for one.
package cli

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
var Commands = []string{"ps", "logs", "start", "kill", "wait"}
