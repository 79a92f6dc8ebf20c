// Package runs is what agent-box does with runs, for the MCP tools and the
// human CLI alike: start one through a detached supervisor, list runs with
// their true state, signal a run's process group, read and follow its log,
// wait for it, write to its stdin, remove finished ones.
//
// Everything is derived from the run records on disk and facts probed from
// the live system at the moment of the call, never from memory of this
// process: the agent-box that started a run may be long gone.
package runs

import (
	"errors"
	"math"
	"time"
)

// Sentinels callers (the tools, the CLI) branch on. Every error returned by
// this package wraps one of them or a runrecord sentinel.
var (
	ErrInvalid       = errors.New("invalid argument")
	ErrNotFound      = errors.New("no such run")
	ErrNameInUse     = errors.New("name in use")
	ErrNotSignalable = errors.New("refusing to signal")
	ErrNoStdin       = errors.New("run has no stdin pipe")
	ErrNoTerminal    = errors.New("run has no terminal")
	ErrRunning       = errors.New("run is still running")
	// ErrNotRunning: the run has ended, or its stdin or terminal is gone
	// (closed, broken, its supervisor lost), so there is nothing to write
	// to or resize. It is wrapped beside ErrNoStdin or ErrNoTerminal,
	// which alone say the run never had one (it was started without).
	ErrNotRunning = errors.New("run is not running")
	// ErrRefused: agent-box will not do it (a socket that is not the run's
	// supervisor's); ErrNotSignalable is the same for a signal.
	ErrRefused = errors.New("refused")
	// ErrUnreachable: the run's supervisor could not be reached, or did
	// not answer a request that changes nothing twice (a resize): the same
	// call can succeed later.
	ErrUnreachable = errors.New("the run's supervisor could not be reached")
	// ErrUnknownOutcome: a change was asked and its answer was lost (the
	// supervisor took a write and did not answer, the supervisor of a
	// start did not report, the agent-box that applied a request id died
	// before it answered): whether it was applied is unknown.
	ErrUnknownOutcome = errors.New("outcome unknown")
	// ErrBusy: too much is in progress (calls that wait, the first try of
	// a request id); the same call can succeed later.
	ErrBusy = errors.New("busy")
)

// Duration turns an argument of v units (grace_ms, wait_ms: a number a
// front end decoded) into a duration. A value too large for a
// time.Duration becomes the largest one (or the most negative) rather than
// wrapping around into range; inRange refuses it.
func Duration(v int64, unit time.Duration) time.Duration {
	switch {
	case v > math.MaxInt64/int64(unit):
		return math.MaxInt64
	case v < math.MinInt64/int64(unit):
		return math.MinInt64
	}
	return time.Duration(v) * unit
}

// inRange is the rule for a duration argument given in unit (grace_ms,
// wait_ms, timeout_ms): 0..max. A front end turns a value too large for a
// time.Duration into the largest one (or the most negative: Duration),
// which is said to be out of range without a value it does not hold.
func inRange(arg string, d, unit, max time.Duration) error {
	switch {
	case d >= 0 && d <= max:
		return nil
	case d == math.MaxInt64 || d == math.MinInt64:
		return invalid("%s is out of range 0..%d", arg, max/unit)
	}
	return invalid("%s %d is out of range 0..%d", arg, d/unit, max/unit)
}
