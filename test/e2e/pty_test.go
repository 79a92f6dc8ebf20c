package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSSHPtyAcrossConnections: a pty run started through one ssh
// connection keeps its terminal when that connection is killed (the
// supervisor holds it); the next connection resizes it and writes to it.
func TestSSHPtyAcrossConnections(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("ssh lane: starts an sshd")
	}
	srv := startSSHD(t)
	state := t.TempDir()
	dial := func() *session { return connect(t, srv.command(binary, "--state-dir", state)) }
	// until reads the run's log from off (tail_log wait_ms) until it holds
	// want, and returns where the text read ends.
	until := func(s *session, off int64, want string) int64 {
		t.Helper()
		var got logBytes
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(string(got.combined), want) {
			require.True(t, time.Now().Before(deadline), "no %q in the terminal's output: %q", want, got.combined)
			var w tailOut
			s.ok("tail_log", map[string]any{"name": "term", "offset": off, "encoding": "base64", "wait_ms": 2000}, &w)
			got.combined = append(got.combined, unb64(t, w.Content)...)
			off = w.EndOffset
		}
		return off
	}

	s := dial()
	var started runInfo
	s.ok("process_start", map[string]any{"name": "term", "pty": true, "command": `stty size; while read x; do stty size; done`}, underRun(&started))
	off := until(s, 0, "40 120\r\n")
	s.kill()
	waitUntil(t, "the remote agent-box to exit after its ssh client was killed", 20*time.Second, func() bool {
		return len(serverPIDs(state)) == 0
	})

	s = dial()
	var resized struct {
		Run struct {
			State      string `json:"state"`
			Cols, Rows int
		} `json:"run"`
	}
	s.ok("process_resize", map[string]any{"name": "term", "cols": 100, "rows": 30}, &resized)
	require.Equal(t, "running", resized.Run.State)
	require.Equal(t, [2]int{100, 30}, [2]int{resized.Run.Cols, resized.Run.Rows})
	var wr struct {
		Written int `json:"written"`
	}
	s.ok("process_write", map[string]any{"name": "term", "data": "\n"}, &wr)
	require.Equal(t, 1, wr.Written)
	until(s, off, "30 100\r\n")
	var killed struct{}
	s.ok("process_kill", map[string]any{"name": "term", "signal": "KILL"}, &killed)
}
