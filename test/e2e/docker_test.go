package e2e

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDockerExec drives agent-box inside a container as an MCP server on
// stdio through `docker exec -i CT agent-box`: a run started, waited for
// and its log read, all in the container; and the exec'd server ends
// with its session.
func TestDockerExec(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("docker lane: makes an image and starts a container")
	}
	box := startDockerBox(t)
	s := connect(t, box.command())
	require.Equal(t, "agent-box", s.cs.InitializeResult().ServerInfo.Name)
	require.Len(t, box.serverPIDs(), 1, "agent-box servers in the container")

	var started runInfo
	s.ok("process_start", map[string]any{"name": "hi", "command": "echo hi"}, underRun(&started))
	require.NotEmpty(t, started.RunID)
	var wr waitOut
	s.ok("process_wait", map[string]any{"name": "hi", "timeout_ms": 30000}, &wr)
	require.False(t, wr.TimedOut)
	require.Equal(t, started.RunID, wr.Run.RunID)
	require.Equal(t, "exited", wr.Run.State, "reason: %s", wr.Run.Reason)
	require.NotNil(t, wr.Run.ExitCode)
	require.Equal(t, 0, *wr.Run.ExitCode)
	var tl tailOut
	s.ok("tail_log", map[string]any{"name": "hi"}, &tl)
	require.Equal(t, "hi\n", tl.Content)
	require.True(t, tl.EOF)

	// The run's state is the container's: its log is there, not here.
	out, err := box.sh("cat ~/.local/state/agent-box/runs/hi/" + started.RunID + "/log")
	require.NoError(t, err)
	require.Equal(t, "hi", out)

	s.close()
	waitUntil(t, "the container's agent-box to exit after its session closed", 20*time.Second, func() bool {
		return len(box.serverPIDs()) == 0
	})
}

// TestDockerExecReconnect: the run outlives its connection inside a
// container too. A run that waits on its stdin between its lines is
// started through one docker exec; that client is SIGKILLed while the run
// runs, once idle and once during a process_wait, and each time the
// exec'd agent-box goes with it while the run (its supervisor detached)
// goes on; each new docker exec sees it running with its whole log so
// far, and the last sees its exit and the whole log.
func TestDockerExecReconnect(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("docker lane: makes an image and starts a container")
	}
	box := startDockerBox(t)
	const script = `echo one; read -r g; echo "two $g"; read -r g; echo "three $g"; exit 3`

	dial := func() *session {
		t.Helper()
		s := connect(t, box.command())
		require.Len(t, box.serverPIDs(), 1, "agent-box servers in the container")
		return s
	}
	// drop ends a connection with kill and waits for its server in the
	// container to go: dockerd closes the exec's stdin once its client is
	// gone. The bound is below agent-box's 30 s drain limit.
	drop := func(kill func()) {
		t.Helper()
		kill()
		waitUntil(t, "the container's agent-box to exit after its docker exec client was killed", 20*time.Second, func() bool {
			return len(box.serverPIDs()) == 0
		})
	}
	logOf := func(s *session) tailOut {
		t.Helper()
		var w tailOut
		s.ok("tail_log", map[string]any{"name": "gated"}, &w)
		return w
	}
	waitLog := func(s *session, want string) {
		t.Helper()
		waitUntil(t, "the run's log to be "+strconv.Quote(want), 20*time.Second, func() bool {
			return logOf(s).Content == want
		})
	}
	// running checks, on a new connection, that the run is the one started
	// and still runs, with the log it has written so far.
	var started runInfo
	running := func(s *session, log string) {
		t.Helper()
		var l listOut
		s.ok("process_list", map[string]any{"name": "gated"}, &l)
		require.Len(t, l.Runs, 1, "process_list: %+v", l.Runs)
		require.Equal(t, started.RunID, l.Runs[0].RunID)
		require.Equal(t, "running", l.Runs[0].State, "reason: %s", l.Runs[0].Reason)
		// Asked after the answer: the run waits on its stdin, so it ran
		// while process_list looked.
		_, err := box.sh("kill -0 " + strconv.Itoa(started.PID))
		require.NoError(t, err, "the run's pid %d is gone from the container", started.PID)
		w := logOf(s)
		require.Equal(t, log, w.Content)
		require.False(t, w.EOF)
	}
	write := func(s *session, data string) {
		t.Helper()
		var wr struct {
			Written int `json:"written"`
		}
		s.ok("process_write", map[string]any{"name": "gated", "data": data}, &wr)
		require.Equal(t, len(data), wr.Written)
	}

	s := dial()
	s.ok("process_start", map[string]any{"name": "gated", "command": script, "stdin": "pipe"}, underRun(&started))
	require.Positive(t, started.PID)
	waitLog(s, "one\n")
	drop(s.kill) // the test's own docker exec client

	s = dial()
	running(s, "one\n")
	write(s, "a\n")
	waitLog(s, "one\ntwo a\n")
	// Dropped during a process_wait, by the client's pid found on this
	// machine, as a test of agent-box connect --exec kills the docker exec
	// that connect started. The process_list answered after the wait was
	// written shows the server has read it; the run cannot end before it
	// is written to again.
	done := s.callAsync("process_wait", map[string]any{"name": "gated", "timeout_ms": 60000})
	s.waitSent("process_wait")
	var l listOut
	s.ok("process_list", map[string]any{"name": "gated"}, &l)
	drop(func() {
		require.Equal(t, 1, box.killExecClients(), "docker exec clients of %s", box.name)
		s.close() // reaps the killed client
	})
	select {
	case err := <-done:
		require.Error(t, err, "process_wait answered although the run cannot have ended")
	case <-time.After(callTimeout):
		t.Fatal("the client's process_wait did not return after its docker exec was killed")
	}

	s = dial()
	running(s, "one\ntwo a\n")
	write(s, "b\n")
	var wr waitOut
	s.ok("process_wait", map[string]any{"name": "gated", "timeout_ms": 30000}, &wr)
	require.False(t, wr.TimedOut)
	requireExit3(t, wr.Run)
	w := logOf(s)
	require.Equal(t, "one\ntwo a\nthree b\n", w.Content)
	require.True(t, w.EOF)
	require.Equal(t, "exited", w.State)
	s.close()
}
