package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type inboxOut struct {
	Runs   []runInfo `json:"runs"`
	Cursor string    `json:"cursor"`
}

func (o inboxOut) names() []string {
	var n []string
	for _, r := range o.Runs {
		n = append(n, r.Name)
	}
	return n
}

// TestSSHExitInbox: over real ssh, a cursor kept across a dropped
// connection lists the run that ended while no agent-box was alive, once,
// and the next cursor the run that ended after it (issue 10).
func TestSSHExitInbox(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("ssh lane: starts an sshd")
	}
	srv := startSSHD(t)
	state := t.TempDir()
	dial := func() *session { return connect(t, srv.command(binary, "--state-dir", state)) }

	s := dial()
	var out inboxOut
	// brief ends once the test says so, after the connection dropped: a
	// fixed sleep could end before the first listing on a loaded machine,
	// whose cursor then rightly holds brief's exit already.
	gate := filepath.Join(t.TempDir(), "end-brief")
	reapAtCleanup(t, state) // brief too, if the test fails before it opens the gate
	s.ok("process_start", map[string]any{"name": "brief", "env": map[string]any{"GATE": gate},
		"command": `until [ -e "$GATE" ]; do sleep 0.05; done`}, underRun(&runInfo{}))
	s.ok("process_start", map[string]any{"name": "server", "argv": []any{"sleep", "60"}}, underRun(&runInfo{}))
	s.ok("process_list", map[string]any{}, &out)
	c0 := out.Cursor
	require.NotEmpty(t, c0)
	s.kill() // the connection drops
	waitUntil(t, "the remote agent-box to exit", 20*time.Second, func() bool { return len(serverPIDs(state)) == 0 })
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	waitUntil(t, "brief's exit to be recorded with no agent-box alive", 20*time.Second, func() bool {
		ids, _ := os.ReadDir(filepath.Join(state, "runs", "brief"))
		for _, id := range ids {
			if b, err := os.ReadFile(filepath.Join(state, "runs", "brief", id.Name(), "record.json")); err == nil && strings.Contains(string(b), `"exit"`) {
				return true
			}
		}
		return false
	})
	require.Empty(t, serverPIDs(state), "no agent-box was alive while brief ended")

	s = dial()
	s.ok("process_list", map[string]any{"changed_since": c0}, &out)
	require.Equal(t, []string{"brief"}, out.names())
	assert.Equal(t, "exited", out.Runs[0].State)
	c1 := out.Cursor

	var k struct{}
	s.ok("process_kill", map[string]any{"name": "server", "signal": "KILL"}, &k)
	var w waitOut
	s.ok("process_wait", map[string]any{"name": "server", "timeout_ms": 20000}, &w)
	s.ok("process_list", map[string]any{"changed_since": c1}, &out)
	assert.Equal(t, []string{"server"}, out.names(), "brief is not listed again")
	s.ok("process_list", map[string]any{"changed_since": out.Cursor}, &out)
	assert.Empty(t, out.Runs)
}
