package e2e

import (
	"bytes"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The writer prints numbered lines in phases of phaseLines, alternately to
// stdout and stderr, 0.05 s apart, and between phases waits for a line on
// its stdin. Each connection of the test releases the next phase with
// process_write before its ssh is killed, so every connection finds the run
// running, and most connections die while it writes.
const (
	reconnects = 6 // connections killed while the run runs
	phases     = reconnects + 1
	phaseLines = 8
	lines      = phases * phaseLines
)

// writerScript is the writer. Its lines hold multi-byte UTF-8, so windows
// are cut inside runes; its output ends with a line without newline and
// it exits 3. sh runs it sequentially, so even through the one pipe of
// combined mode the order of the bytes is fixed.
func writerScript() string {
	return fmt.Sprintf(`i=0
phase=1
while :; do
	j=0
	while [ $j -lt %d ]; do
		j=$((j+1)); i=$((i+1))
		printf 'out %%03d héllo ✓ wörld\n' $i
		printf 'err %%03d ошибка ✗\n' $i >&2
		sleep 0.05
	done
	[ $phase -eq %d ] && break
	phase=$((phase+1))
	read -r gate
done
printf 'last line, no newline ✓'
exit 3`, phaseLines, phases)
}

// writerOutput is what writerScript writes, computed independently.
func writerOutput() logBytes {
	var o, e, c bytes.Buffer
	for i := 1; i <= lines; i++ {
		out := fmt.Sprintf("out %03d héllo ✓ wörld\n", i)
		err := fmt.Sprintf("err %03d ошибка ✗\n", i)
		o.WriteString(out)
		e.WriteString(err)
		c.WriteString(out + err)
	}
	o.WriteString("last line, no newline ✓")
	c.WriteString("last line, no newline ✓")
	return logBytes{combined: c.Bytes(), stdout: o.Bytes(), stderr: e.Bytes()}
}

// TestSSHReconnect is agent-box's reason to exist, end to end: a run
// started through `ssh box -- agent-box` keeps running and logging while
// ssh connections to it are killed one after another, each taking its
// agent-box server with it; every new connection sees the run's true
// state and reads the log on from where the last one stopped; at the end
// the log reassembles byte for byte and the exit code is the child's.
func TestSSHReconnect(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("ssh lane: starts an sshd and makes some twenty ssh connections")
	}
	srv := startSSHD(t)
	for _, mode := range []string{"combined", "framed"} {
		// Each mode has a state dir of its own; they share the sshd.
		t.Run(mode, func(t *testing.T) { t.Parallel(); testSSHReconnect(t, srv, mode) })
	}
}

func testSSHReconnect(t *testing.T, srv *sshServer, mode string) {
	state := t.TempDir()
	framed := mode == "framed"
	want := writerOutput()

	dial := func() *session {
		t.Helper()
		s := connect(t, srv.command(binary, "--state-dir", state))
		// The servers of the earlier connections are gone (checked after
		// each kill); this one's is up, since it answered initialize.
		require.Len(t, serverPIDs(state), 1, "agent-box servers on %s", state)
		return s
	}
	// drop SIGKILLs the ssh client of s, as a dropped network connection or
	// a killed agent would, and waits for the remote agent-box to go.
	drop := func(s *session) {
		t.Helper()
		s.kill()
		// The bound is below agent-box's 30 s drain limit and the 60 s
		// process_wait in flight: a server that holds on to a dead
		// connection's calls fails here.
		waitUntil(t, "the remote agent-box to exit after its ssh client was killed", 20*time.Second, func() bool {
			return len(serverPIDs(state)) == 0
		})
	}
	release := func(s *session) {
		t.Helper()
		var wr struct {
			Written int `json:"written"`
		}
		s.ok("process_write", map[string]any{"name": "writer", "data": "next\n"}, &wr)
		require.Equal(t, 5, wr.Written)
	}

	s := dial()
	var started runInfo
	s.ok("process_start", map[string]any{"name": "writer", "command": writerScript(), "capture_mode": mode, "stdin": "pipe"}, underRun(&started))
	require.Equal(t, "writer", started.Name)
	require.Equal(t, mode, started.CaptureMode)
	require.NotEmpty(t, started.RunID)
	require.Positive(t, started.PID)
	_, startTime, _, err := procStat(started.PID)
	require.NoError(t, err, "the run's pid %d is not a process on this machine", started.PID)
	t.Cleanup(func() {
		// A test that failed before the last phase leaves the writer
		// waiting on its stdin: end it through its own process group.
		if pgid, err := syscall.Getpgid(started.PID); err == nil && pgid == started.PID && alive(started.PID, startTime) {
			syscall.Kill(-pgid, syscall.SIGKILL)
		}
	})
	drop(s)

	var (
		got      logBytes // reassembled across connections
		off      int64    // where the next connection reads on
		logSeen  int64
		inFlight int
	)
	for cycle := 1; cycle <= reconnects; cycle++ {
		s := dial()

		var l listOut
		s.ok("process_list", map[string]any{"name": "writer"}, &l)
		// The writer cannot end before the last phase is released, and it
		// is checked after the answer, so it ran while process_list looked.
		require.True(t, alive(started.PID, startTime), "connection %d: the writer's pid %d is gone before its last phase", cycle, started.PID)
		require.Len(t, l.Runs, 1, "process_list: %+v", l.Runs)
		r := l.Runs[0]
		require.Equal(t, started.RunID, r.RunID)
		require.Equal(t, started.PID, r.PID)
		require.Equal(t, "running", r.State, "connection %d: pid %d runs; reason %q", cycle, started.PID, r.Reason)
		require.Nil(t, r.ExitCode)
		require.GreaterOrEqual(t, r.LogBytes, logSeen, "log_bytes shrank")
		logSeen = r.LogBytes

		// Read on from where the previous connection stopped, a couple of
		// small windows: what has arrived must be a prefix of the output.
		for range 2 {
			w := s.window("writer", framed, off, 300, &got)
			require.Equal(t, "running", w.State)
			require.False(t, w.EOF, "eof while the run runs")
			off = w.EndOffset
			if w.EndOffset == w.Offset {
				break
			}
		}
		requirePrefix(t, want, got, framed)

		if cycle%2 == 1 {
			// Drop this connection while a blocking call is in it. The
			// process_list written after the wait and answered shows the
			// server has read the wait, which cannot end before the run
			// (odd cycles do not release the last phase).
			done := s.callAsync("process_wait", map[string]any{"name": "writer", "timeout_ms": 60000})
			s.waitSent("process_wait")
			s.ok("process_list", map[string]any{"name": "writer"}, &l)
			inFlight++
			release(s)
			drop(s)
			select {
			case err := <-done:
				require.Error(t, err, "process_wait answered although the run cannot have ended")
			case <-time.After(callTimeout):
				t.Fatal("the client's process_wait did not return after its connection died")
			}
			continue
		}
		// Let the writer go on, then drop the connection while it writes.
		release(s)
		drop(s)
	}
	t.Logf("%s: %d connections killed while the run ran, %d of them during a process_wait; %d of %d log bytes read by them",
		mode, reconnects, inFlight, off, logSeen)

	s = dial()
	var wr waitOut
	for i := 0; ; i++ {
		s.ok("process_wait", map[string]any{"name": "writer", "timeout_ms": 30000}, &wr)
		if !wr.TimedOut {
			break
		}
		require.Less(t, i, 2, "writer still running after 90 s of process_wait")
	}
	requireExit3(t, wr.Run)
	require.False(t, alive(started.PID, startTime), "process_wait says exited but pid %d still runs", started.PID)

	// Finish the read that spanned the connections.
	last := s.readToEOF("writer", framed, off, 300, &got)
	requireLog(t, want, got, framed, "log reassembled across connections")
	require.Equal(t, last.LogBytes, last.EndOffset, "eof short of log_bytes")
	require.Equal(t, "exited", last.State)
	require.NotNil(t, last.ExitCode)
	require.Equal(t, 3, *last.ExitCode)
	require.False(t, last.Truncated)

	// And from the start with other window sizes (97 cuts inside runes at
	// ever other places).
	for _, maxBytes := range []int{97, 1000, 65536, 1 << 20} {
		var all logBytes
		w := s.readToEOF("writer", framed, 0, maxBytes, &all)
		requireLog(t, want, all, framed, fmt.Sprintf("log read from 0 with max_bytes=%d", maxBytes))
		require.Equal(t, last.EndOffset, w.EndOffset, "max_bytes=%d: eof at another offset", maxBytes)
	}

	var l0 listOut
	s.ok("process_list", map[string]any{"name": "writer"}, &l0)
	require.Len(t, l0.Runs, 1)
	requireExit3(t, l0.Runs[0])
	require.Equal(t, last.EndOffset, l0.Runs[0].LogBytes, "process_list log_bytes")

	// A polite goodbye ends the server too.
	s.close()
	waitUntil(t, "the remote agent-box to exit after its ssh session closed", 20*time.Second, func() bool {
		return len(serverPIDs(state)) == 0
	})
}

func requireExit3(t *testing.T, r runInfo) {
	t.Helper()
	require.Equal(t, "exited", r.State, "reason: %s", r.Reason)
	require.NotNil(t, r.ExitCode, "exited without exit_code (signal %q, reason %s)", r.Signal, r.Reason)
	require.Equal(t, 3, *r.ExitCode, "exit_code")
	require.Empty(t, r.Signal, "an exit 3 is not a signal")
}

// requirePrefix checks that what a client has read of a running writer
// is the start of what it will have written.
func requirePrefix(t *testing.T, want, got logBytes, framed bool) {
	t.Helper()
	check := func(stream string, want, got []byte) {
		if !bytes.HasPrefix(want, got) {
			i := 0
			for i < len(got) && i < len(want) && got[i] == want[i] {
				i++
			}
			t.Fatalf("%s read so far (%d bytes) is not a prefix of the output: differs at byte %d: got %q, want %q",
				stream, len(got), i, got[i:min(len(got), i+40)], want[i:min(len(want), i+40)])
		}
	}
	if framed {
		check("stdout", want.stdout, got.stdout)
		check("stderr", want.stderr, got.stderr)
	} else {
		check("log", want.combined, got.combined)
	}
}

func requireLog(t *testing.T, want, got logBytes, framed bool, what string) {
	t.Helper()
	if framed {
		require.Equal(t, string(want.stdout), string(got.stdout), "%s: stdout", what)
		require.Equal(t, string(want.stderr), string(got.stderr), "%s: stderr", what)
		require.Empty(t, got.combined)
	} else {
		require.Equal(t, string(want.combined), string(got.combined), what)
	}
}
