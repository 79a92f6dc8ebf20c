package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/runs"
	"github.com/agent-box/agent-box/wire"
)

// TestErrorCodes pins each sentinel's code, wrapped as runs wraps it, and
// the order where an error wraps several.
func TestErrorCodes(t *testing.T) {
	both := func(errs ...error) error { return fmt.Errorf("x: %w", errors.Join(errs...)) }
	for _, tc := range []struct {
		err       error
		code      wire.Code
		retryable bool
	}{
		{fmt.Errorf("%w: name \"\" is empty", runs.ErrInvalid), wire.InvalidArgument, false},
		{badArgs{errors.New("unknown field \"nme\" in the arguments")}, wire.InvalidArgument, false},
		{fmt.Errorf("%w: no run named \"x\"", runs.ErrNotFound), wire.NoSuchRun, false},
		{fmt.Errorf("%w: run \"x\" is running", runs.ErrNameInUse), wire.NameInUse, false},
		{fmt.Errorf("%w: not provably the run's", runs.ErrNotSignalable), wire.Refused, false},
		{both(runs.ErrRefused, errors.New("the stdin socket does not belong to the run's supervisor")), wire.Refused, false},
		{both(runs.ErrNoStdin, runs.ErrNotRunning), wire.NotRunning, false},
		{both(runs.ErrNoTerminal, runs.ErrNotRunning), wire.NotRunning, false},
		{fmt.Errorf("%w: started with stdin \"null\"", runs.ErrNoStdin), wire.InvalidArgument, false},
		{fmt.Errorf("%w: not started with pty", runs.ErrNoTerminal), wire.InvalidArgument, false},
		{fmt.Errorf("%w: refusing to remove", runs.ErrRunning), wire.StillRunning, false},
		{fmt.Errorf("%w: memory_mb=64: no cgroup", runs.ErrLimitUnavailable), wire.CannotEnforce, false},
		{errTooManyWaits, wire.Busy, true},
		{fmt.Errorf("%w: still in progress", runs.ErrBusy), wire.Busy, true},
		{both(runs.ErrUnreachable, errors.New("connection refused")), wire.Unreachable, true},
		{both(runs.ErrUnknownOutcome), wire.UnknownOutcome, false},
		// A write whose run ended meanwhile, the supervisor having taken
		// the bytes without answering: it may have been applied.
		{both(runs.ErrNoStdin, runs.ErrNotRunning, runs.ErrUnknownOutcome), wire.UnknownOutcome, false},
		{errors.New("signalling process group 7: operation not permitted"), wire.Internal, false},
	} {
		got := wireError(tc.err)
		assert.Equal(t, wire.Error{Code: tc.code, Message: tc.err.Error(), Retryable: tc.retryable}, got, "%v", tc.err)
	}
}

// TestFailCarriesTheCode: a failed result keeps its text and carries
// {"error": {...}} as structured content.
func TestFailCarriesTheCode(t *testing.T) {
	r := fail(fmt.Errorf("%w: no run named \"x\"", runs.ErrNotFound))
	b, err := json.Marshal(r)
	require.NoError(t, err)
	var got struct {
		Content           []struct{ Text string }
		IsError           bool
		StructuredContent map[string]wire.Error
	}
	require.NoError(t, json.Unmarshal(b, &got), "%s", b)
	assert.True(t, got.IsError)
	require.Len(t, got.Content, 1)
	assert.Equal(t, `no such run: no run named "x"`, got.Content[0].Text)
	assert.Equal(t, wire.Error{Code: wire.NoSuchRun, Message: got.Content[0].Text}, got.StructuredContent[wire.ErrorKey])
}

// TestUnknownRunIsNoSuchRun goes through the server: every tool that
// names a run answers no_such_run for one that does not exist.
func TestUnknownRunIsNoSuchRun(t *testing.T) {
	c := servePipe(t)
	c.initialize()
	for i, tc := range []struct{ tool, args string }{
		{"process_kill", `{"name":"nope"}`},
		{"tail_log", `{"name":"nope"}`},
		{"process_write", `{"name":"nope","data":"x"}`},
		{"process_resize", `{"name":"nope","cols":80,"rows":24}`},
		{"process_restart", `{"name":"nope"}`},
		{"process_remove", `{"name":"nope"}`},
		{"process_wait", `{"name":"nope","timeout_ms":0}`},
	} {
		line := c.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, i+1, tc.tool, tc.args))
		var reply struct {
			Result struct {
				IsError           bool
				StructuredContent map[string]wire.Error
			}
		}
		require.NoError(t, json.Unmarshal([]byte(line), &reply), line)
		assert.True(t, reply.Result.IsError, line)
		assert.Equal(t, wire.NoSuchRun, reply.Result.StructuredContent[wire.ErrorKey].Code, "%s: %s", tc.tool, line)
	}
}
