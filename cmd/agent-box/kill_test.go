//go:build linux

package main

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
	"github.com/agent-box/agent-box/runrecord"
)

// process_kill's TERM, grace_ms, KILL is carried out by the run's
// supervisor: a server that dies during the grace (its SSH connection
// dropped) must not leave behind a run that ignores TERM. Before, the
// server waited out the grace and sent the SIGKILL itself, and died with
// it: the run lived on.
func TestKillEscalatesWhenTheServerDiesDuringTheGrace(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	termed := filepath.Join(t.TempDir(), "termed")
	a := spawn(t, state)
	// The shell outlives every TERM (its trap notes it); the sleep it
	// waits for dies of it and is started again.
	st := a.OK("process_start", map[string]any{"name": "stubborn",
		"command": `trap 'echo > ` + termed + `' TERM; while :; do sleep 100 & wait; done`})
	runID := abtest.Str(st.Run()["run_id"])

	// The kill's answer never comes: the server is killed while it waits.
	// The grace is long enough that the server, were it the one to escalate,
	// would still be waiting when it is killed.
	go a.Session().CallTool(context.Background(), &mcp.CallToolParams{Name: "process_kill",
		Arguments: map[string]any{"name": "stubborn", "signal": "TERM", "grace_ms": 3000}})
	abtest.WaitFor(t, "the run to get the TERM", 10*time.Second, func() bool {
		_, err := os.Stat(termed)
		return err == nil
	})
	a.Kill()

	store := &runrecord.Store{Root: state}
	var rec *runrecord.Record
	abtest.WaitFor(t, "the run's exit to be recorded, after the grace, with no server", 30*time.Second, func() bool {
		r, err := store.Read("stubborn", runID)
		if err == nil && r.Exit != nil && r.OutputClosed {
			rec = r
		}
		return rec != nil
	})
	require.Equal(t, "SIGKILL", rec.Exit.Signal, "exit %+v", rec.Exit)
	assert.False(t, rec.Exit.TimedOut, "no timeout_s was set")

	b := connect(t, state)
	run := abtest.RunOf(t, b.OK("process_list", nil), "stubborn")
	assert.Equal(t, "exited", run["state"], "%v", run)
	assert.Equal(t, "killed by SIGKILL", run["reason"], "%v", run)
	assert.Nil(t, run["survivors"], "no process of the run is left: %v", run)
	assert.ErrorIs(t, syscall.Kill(-rec.PID, 0), syscall.ESRCH, "a process of the run's group %d is left", rec.PID)
}

// The supervisor answers an armed kill as soon as the run is gone: a run
// that dies of the TERM does not hold process_kill for its grace.
func TestKillGraceAnswersOnceTheRunIsGone(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	s.CallTimeout = time.Minute // the grace is ten
	s.OK("process_start", map[string]any{"name": "meek", "command": "exec sleep 1000"})
	k := s.OK("process_kill", map[string]any{"name": "meek", "signal": "TERM", "grace_ms": 600000})
	assert.Nil(t, k.Data["escalated"], k.Text)
	run := k.Data["run"].(map[string]any)
	assert.Equal(t, "SIGTERM", run["signal"], k.Text)
}

// A supervisor killed during the grace of the kill it took leaves the
// SIGKILL to the server, which is still waiting for its word.
func TestKillEscalatesWhenTheSupervisorDiesDuringTheGrace(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	termed := filepath.Join(t.TempDir(), "termed")
	s := connect(t, state)
	st := s.OK("process_start", map[string]any{"name": "stubborn",
		"command": `trap 'echo > ` + termed + `' TERM; while :; do sleep 100 & wait; done`})
	rec, err := (&runrecord.Store{Root: state}).Read("stubborn", abtest.Str(st.Run()["run_id"]))
	require.NoError(t, err)
	t.Cleanup(func() { syscall.Kill(-rec.PID, syscall.SIGKILL) })

	answer := make(chan abtest.Result, 1)
	go func() {
		r, err := s.Session().CallTool(context.Background(), &mcp.CallToolParams{Name: "process_kill",
			Arguments: map[string]any{"name": "stubborn", "signal": "TERM", "grace_ms": 2000}})
		var res abtest.Result
		if err == nil {
			for _, c := range r.Content {
				if tc, ok := c.(*mcp.TextContent); ok {
					res.Text += tc.Text
				}
			}
			res.IsError = r.IsError
		} else {
			res.IsError, res.Text = true, err.Error()
		}
		answer <- res
	}()
	abtest.WaitFor(t, "the run to get the TERM", 10*time.Second, func() bool {
		_, err := os.Stat(termed)
		return err == nil
	})
	syscallKill(rec.SupervisorPID)

	var r abtest.Result
	select {
	case r = <-answer:
	case <-time.After(30 * time.Second):
		t.Fatal("process_kill did not answer within 30 s of a 2 s grace")
	}
	require.False(t, r.IsError, r.Text)
	assert.Contains(t, r.Text, "still alive after 2s, sent SIGKILL")
	abtest.WaitFor(t, "the run's group to be gone", 10*time.Second, func() bool {
		return syscall.Kill(-rec.PID, 0) == syscall.ESRCH
	})
}
