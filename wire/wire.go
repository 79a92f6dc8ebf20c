// Package wire holds what both halves of agent-box agree on beyond MCP
// itself: the name under which a tools/call carries its request id (so a
// repeat of a mutation is applied at most once), the capability a box
// announces when it honours that id, and the structured error every failed
// tool call carries. It imports nothing of either half, so that the local
// side (connect, the session) and the box side (tools) can both use it.
package wire

// RequestMeta is the key, in a tools/call's params._meta, of the request
// id a caller gives a mutation (process_start, process_restart,
// process_write, process_kill, process_remove, process_resize). A box that
// announces SafeRepeat applies one id at most once and answers a repeat
// with the first answer. The id is the caller's: at most MaxRequestID
// bytes of [A-Za-z0-9._-].
const RequestMeta = "agent-box/request"

// MaxRequestID bounds a request id's length.
const MaxRequestID = 64

// ValidRequestID reports whether id is a request id: 1..MaxRequestID
// bytes of [A-Za-z0-9._-].
func ValidRequestID(id string) bool {
	if len(id) == 0 || len(id) > MaxRequestID {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// SafeRepeat is the key, in the initialize result's
// capabilities.experimental, by which a box says it honours RequestMeta.
const SafeRepeat = "agent-box/safe-repeat"

// ErrorKey is the key of the structured content of a failed tool call:
// {"error": {"code": ..., "message": ..., "retryable": ...}}.
const ErrorKey = "error"

// Code says what kind of failure a tool call met, for a program to branch
// on (never on the message's words). The set is fixed and documented in
// docs/architecture/guarantees.md.
type Code string

const (
	// InvalidArgument: the call's arguments are wrong; the same call fails again.
	InvalidArgument Code = "invalid_argument"
	// NoSuchRun: no run of that name (or run id).
	NoSuchRun Code = "no_such_run"
	// NameInUse: a run of that name is running (process_start).
	NameInUse Code = "name_in_use"
	// NotRunning: the run has ended, or its stdin or terminal is gone.
	NotRunning Code = "not_running"
	// StillRunning: the call needs an ended run (process_remove).
	StillRunning Code = "still_running"
	// Refused: agent-box will not do it, e.g. signal a pid it cannot
	// prove is the run's.
	Refused Code = "refused"
	// CannotEnforce: limits were asked for that this box cannot enforce.
	CannotEnforce Code = "cannot_enforce"
	// Busy: too many calls in progress; the same call can succeed later.
	Busy Code = "busy"
	// Unreachable: the box, or a run's supervisor, could not be reached;
	// the same call can succeed later.
	Unreachable Code = "unreachable"
	// UnknownOutcome: a mutation was sent but its answer was lost, and
	// whether it was applied is unknown.
	UnknownOutcome Code = "unknown_outcome"
	// Internal: anything else.
	Internal Code = "internal"
)

// Error is the structured content of a failed tool call, under ErrorKey.
type Error struct {
	Code      Code   `json:"code"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
}

// The box's bounds on a process_wait that gives no timeout_ms (Default;
// Max with a progress token), and on any without a progress token
// (Unwatched). connect re-sends a wait cut short by a drop with the time
// it has left, which it reckons from these when the call gave none.
const (
	WaitDefaultMS   = 30_000
	WaitUnwatchedMS = 50_000
	WaitMaxMS       = 600_000
)
