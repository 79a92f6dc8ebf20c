package tools

import (
	"errors"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/agent-box/agent-box/runs"
	"github.com/agent-box/agent-box/wire"
)

// codes decides a failed call's wire.Code from the sentinel its error
// wraps, first match wins: an error may wrap several (a write to a run
// that ended meanwhile wraps ErrNoStdin and ErrNotRunning, and, when the
// supervisor took the bytes without answering, ErrUnknownOutcome), and
// the one that matters most to what the caller does next comes first.
// docs/architecture/guarantees.md has the table; TestErrorCodes pins it.
var codes = []struct {
	sentinel  error
	code      wire.Code
	retryable bool
}{
	{runs.ErrBusy, wire.Busy, true},
	// Before everything that says nothing happened: something may have.
	{runs.ErrUnknownOutcome, wire.UnknownOutcome, false},
	{runs.ErrInvalid, wire.InvalidArgument, false},
	{runs.ErrNotFound, wire.NoSuchRun, false},
	{runs.ErrNameInUse, wire.NameInUse, false},
	{runs.ErrNotSignalable, wire.Refused, false},
	{runs.ErrRefused, wire.Refused, false},
	{runs.ErrNotRunning, wire.NotRunning, false},
	// Alone (without ErrNotRunning) they say the run was started without
	// a stdin pipe or a terminal: the call names the wrong run.
	{runs.ErrNoStdin, wire.InvalidArgument, false},
	{runs.ErrNoTerminal, wire.InvalidArgument, false},
	{runs.ErrRunning, wire.StillRunning, false},
	{runs.ErrLimitUnavailable, wire.CannotEnforce, false},
	{runs.ErrUnreachable, wire.Unreachable, true},
}

// wireError is the structured error of a failed call.
func wireError(err error) wire.Error {
	e := wire.Error{Code: wire.Internal, Message: err.Error()}
	for _, c := range codes {
		if errors.Is(err, c.sentinel) {
			e.Code, e.Retryable = c.code, c.retryable
			break
		}
	}
	return e
}

// fail is a failed call's result: the message for the model to read, and
// the same with its code as structured content, for a program (connect)
// to branch on.
func fail(err error) *mcp.CallToolResult {
	e := wireError(err)
	r := mcp.NewToolResultError(e.Message)
	r.StructuredContent = map[string]any{wire.ErrorKey: e}
	return r
}

// badArgs marks an error of decode as runs.ErrInvalid, its words as they
// are.
type badArgs struct{ error }

func (e badArgs) Unwrap() []error { return []error{e.error, runs.ErrInvalid} }
