//go:build linux

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
	"github.com/agent-box/agent-box/runrecord"
	abwire "github.com/agent-box/agent-box/wire"
)

// These tests play what agent-box connect does after its SSH link drops:
// it redials a new agent-box and sends again, with the same request id,
// the calls that were in flight.

func reqMeta(id string) map[string]any { return map[string]any{abwire.RequestMeta: id} }

// runsOf is how many runs of name the store lists.
func runsOf(t *testing.T, s *abtest.Server, name string) int {
	t.Helper()
	l := s.OK("process_list", map[string]any{"name": name, "all": true})
	rs, _ := l.Data["runs"].([]any)
	return len(rs)
}

// logOf is the whole log of run name, once it holds want.
func logOf(t *testing.T, s *abtest.Server, name, want string) string {
	t.Helper()
	var got string
	abtest.WaitFor(t, "the log of "+name+" to hold "+want, 30*time.Second, func() bool {
		r := s.OK("tail_log", map[string]any{"name": name, "wait_ms": 1000})
		got = abtest.Str(r.Data["content"])
		return strings.Contains(got, want)
	})
	return got
}

// callAsync calls tool on s from a goroutine of its own (a call that
// blocks until its server is killed); done is closed when it returns.
func callAsync(s *abtest.Server, tool string, args, meta map[string]any) (done <-chan struct{}) {
	ch := make(chan struct{})
	cs := s.Session()
	go func() {
		defer close(ch)
		_, _ = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args, Meta: meta})
	}()
	return ch
}

// A process_start repeated with its request id through another agent-box
// process starts nothing more, and answers as the first did.
func TestRepeatedStartStartsOneRun(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	s1 := connect(t, state)
	s2 := spawn(t, state)
	args := map[string]any{"name": "once", "command": "sleep 600"}
	a := s1.CallMeta("process_start", args, reqMeta("start-1"))
	require.False(t, a.IsError, a.Text)
	b := s2.CallMeta("process_start", args, reqMeta("start-1"))
	assert.Equal(t, a, b)
	assert.Equal(t, 1, runsOf(t, s2, "once"))
	rec, err := (&runrecord.Store{Root: state}).Read("once", abtest.Str(a.Run()["run_id"]))
	require.NoError(t, err)
	assert.Equal(t, "start-1", rec.RequestID)

	// The same id with other arguments is another call, refused.
	c := s2.CallMeta("process_start", map[string]any{"name": "once", "command": "sleep 601"}, reqMeta("start-1"))
	require.True(t, c.IsError, c.Text)
	assert.Equal(t, string(abwire.InvalidArgument), errCode(c), c.Text)

	// And through the server process, an unknown run is no_such_run.
	k := s2.Call("process_kill", map[string]any{"name": "nope"})
	require.True(t, k.IsError)
	assert.Equal(t, string(abwire.NoSuchRun), errCode(k), k.Text)
}

// errCode is the code of a failed call's structured error.
func errCode(r abtest.Result) string {
	e, _ := r.Data[abwire.ErrorKey].(map[string]any)
	return abtest.Str(e["code"])
}

// A process_write repeated with its request id through another agent-box
// process writes its data once, and answers as the first did.
func TestRepeatedWriteWritesOnce(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	s1 := connect(t, state)
	s2 := spawn(t, state)
	s1.OK("process_start", map[string]any{"name": "cat", "command": "cat", "stdin": "pipe"})
	args := map[string]any{"name": "cat", "data": "hello\n"}
	a := s1.CallMeta("process_write", args, reqMeta("w-1"))
	require.False(t, a.IsError, a.Text)
	b := s2.CallMeta("process_write", args, reqMeta("w-1"))
	assert.Equal(t, a, b)
	s2.OK("process_write", map[string]any{"name": "cat", "data": "end\n"})
	assert.Equal(t, "hello\nend\n", logOf(t, s2, "cat", "end\n"))
}

// A repeat that comes while the first try still runs (a write that waits
// for the output that follows it) gets the first try's answer once it is
// done, and the data goes in once.
func TestRepeatWhileTheFirstRunsGetsItsAnswer(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	s1 := connect(t, state)
	s2 := spawn(t, state)
	s3 := connect(t, state)
	s1.OK("process_start", map[string]any{"name": "cat", "command": "cat", "stdin": "pipe"})
	args := map[string]any{"name": "cat", "data": "hello\n", "wait_ms": 60000, "until": "^go$"}
	first := make(chan abtest.Result, 1)
	cs1 := s1.Session()
	go func() {
		res, err := cs1.CallTool(context.Background(), &mcp.CallToolParams{Name: "process_write", Arguments: args, Meta: reqMeta("w-1")})
		if err == nil {
			first <- abtest.Result{IsError: res.IsError, Text: res.Content[0].(*mcp.TextContent).Text}
		}
		close(first)
	}()
	logOf(t, s3, "cat", "hello\n") // the first try is in progress
	second := make(chan abtest.Result, 1)
	go func() {
		res, err := s2.Session().CallTool(context.Background(), &mcp.CallToolParams{Name: "process_write", Arguments: args, Meta: reqMeta("w-1")})
		if err == nil {
			second <- abtest.Result{IsError: res.IsError, Text: res.Content[0].(*mcp.TextContent).Text}
		}
		close(second)
	}()
	s3.OK("process_write", map[string]any{"name": "cat", "data": "go\n"})
	a, b := <-first, <-second
	require.False(t, a.IsError, a.Text)
	assert.Contains(t, a.Text, "(until matched)")
	assert.Equal(t, a, b)
	assert.Equal(t, "hello\ngo\n", logOf(t, s3, "cat", "go\n"))
}

// The agent-box that took a process_start dies (its SSH link dropped)
// before it answered, after the run started: the repeat, to a new
// agent-box, finds the run by the request id in its record and answers
// with it, starting nothing more; its ready probe, which passes only
// after the death, is run again, as the whole call would have.
func TestRepeatOfALostStartFindsItsRun(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	s1 := spawn(t, state)
	s2 := connect(t, state)
	// ready holds the start's answer back, with the run started, until
	// the gate is there.
	gate := filepath.Join(t.TempDir(), "gate")
	args := map[string]any{"name": "slow", "command": "while [ ! -e " + gate + " ]; do sleep 0.05; done; echo ready; exec sleep 600",
		"ready": map[string]any{"log": "^ready"}, "ready_timeout_s": 600}
	done := callAsync(s1, "process_start", args, reqMeta("start-lost"))
	var runID string
	abtest.WaitFor(t, "the run to be started", 30*time.Second, func() bool {
		l := s2.Call("process_list", map[string]any{"name": "slow"})
		rs, _ := l.Data["runs"].([]any)
		if len(rs) == 1 {
			runID = abtest.Str(rs[0].(map[string]any)["run_id"])
		}
		return runID != ""
	})
	s1.Kill()
	<-done
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	r := s2.CallMeta("process_start", args, reqMeta("start-lost"))
	require.False(t, r.IsError, r.Text)
	assert.Equal(t, runID, abtest.Str(r.Run()["run_id"]))
	assert.Equal(t, "running", r.Run()["state"], r.Text)
	assert.Equal(t, true, r.Data["ready"], r.Text)
	assert.Equal(t, 1, runsOf(t, s2, "slow"))
}

// The agent-box that took a process_write dies before it answered, after
// the data went in: the repeat says that whether it was applied is
// unknown, and writes nothing.
func TestRepeatOfALostWriteIsUnknownOutcome(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	s0 := connect(t, state)
	s1 := spawn(t, state)
	s0.OK("process_start", map[string]any{"name": "cat", "command": "cat", "stdin": "pipe"})
	args := map[string]any{"name": "cat", "data": "hello\n", "wait_ms": 60000, "until": "never"}
	done := callAsync(s1, "process_write", args, reqMeta("w-lost"))
	logOf(t, s0, "cat", "hello\n")
	s1.Kill()
	<-done
	r := s0.CallMeta("process_write", args, reqMeta("w-lost"))
	require.True(t, r.IsError, r.Text)
	assert.Equal(t, string(abwire.UnknownOutcome), errCode(r), r.Text)
	assert.Contains(t, r.Text, "process_write with request w-lost was sent but its answer was lost")
	s0.OK("process_write", map[string]any{"name": "cat", "data": "end\n"})
	assert.Equal(t, "hello\nend\n", logOf(t, s0, "cat", "end\n"))
}
