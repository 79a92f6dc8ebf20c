// Package runs is what agent-box does with runs, for the MCP tools and the
// human CLI alike: start one through a detached supervisor, list runs with
// their true state, signal a run's process group, read and follow its log,
// wait for it, write to its stdin, remove finished ones.
//
// Everything is derived from the run records on disk and facts probed from
// the live system at the moment of the call, never from memory of this
// process: the agent-box that started a run may be long gone.
package runs

import "errors"

// Sentinels callers (the tools, the CLI) branch on. Every error returned by
// this package wraps one of them or a runrecord sentinel.
var (
	ErrInvalid       = errors.New("invalid argument")
	ErrNotFound      = errors.New("no such run")
	ErrNameInUse     = errors.New("name in use")
	ErrNotSignalable = errors.New("refusing to signal")
	ErrNoStdin       = errors.New("run has no stdin pipe")
	ErrRunning       = errors.New("run is still running")
)
