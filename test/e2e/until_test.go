package e2e

import (
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A REPL over ssh, one process_write per prompt, across a dropped
// connection: the reply to each write holds the answer and ends at the
// next prompt (python writes it to stderr; combined capture holds both).
func TestSSHReplUntilPrompt(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("ssh lane: starts an sshd")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	srv := startSSHD(t)
	state := t.TempDir()
	dial := func() *session {
		t.Helper()
		return connect(t, srv.command(binary, "--state-dir", state))
	}
	type answer struct {
		Output    string `json:"output"`
		Offset    int64  `json:"offset"`
		EndOffset int64  `json:"end_offset"`
		Matched   bool   `json:"matched"`
	}
	ask := func(s *session, expr, want string) {
		t.Helper()
		var a answer
		s.ok("process_write", map[string]any{"name": "py", "data": expr + "\n", "wait_ms": 30000, "until": ">>> $"}, &a)
		assert.True(t, a.Matched)
		assert.Equal(t, want+"\n>>> ", a.Output)
		assert.Equal(t, a.Offset+int64(len(want)+5), a.EndOffset)
	}

	s := dial()
	s.ok("process_start", map[string]any{"name": "py", "argv": []any{"python3", "-i", "-u"}, "stdin": "pipe"}, &struct{}{})
	var first struct {
		Matched bool `json:"matched"`
	}
	s.ok("tail_log", map[string]any{"name": "py", "wait_ms": 30000, "until": ">>> $"}, &first)
	require.True(t, first.Matched, "the first prompt")
	ask(s, "2**64", "18446744073709551616")
	s.kill()
	waitUntil(t, "the remote agent-box to exit after its ssh client was killed", 20*time.Second, func() bool {
		return len(serverPIDs(state)) == 0
	})

	s = dial()
	ask(s, "2**64", "18446744073709551616")
	s.ok("process_kill", map[string]any{"name": "py", "signal": "KILL"}, &struct{}{})
}
