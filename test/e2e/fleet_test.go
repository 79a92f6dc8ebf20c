package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
)

// TestFleetOverSSH: one agent-box connect over three boxes from a boxes
// file, each over the real sshd: a (through a forwarder the test cuts),
// b, and c (a port nothing listens on). The model sees one tool list with
// box; process_list merges a and b and says c is unreachable; a wait
// across boxes answers the first end, on b; a wait on a's run goes on
// through a cut of a's link; the merged cursor lists what ended on each.
func TestFleetOverSSH(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("connect lane: starts an sshd")
	}
	srv := startSSHD(t)
	fwd := newForwarder(t, srv.port)
	stateA, stateB := t.TempDir(), t.TempDir()
	reapAtCleanup(t, stateA)
	reapAtCleanup(t, stateB)
	box := func(name string, port int, state string) string {
		opts := []string{"Port=" + fmt.Sprint(port), "IdentityFile=" + srv.key, "IdentitiesOnly=yes", "IdentityAgent=none",
			"StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null", "LogLevel=ERROR"}
		return fmt.Sprintf("[boxes.%s]\nssh = %q\noptions = [%s]\nremote_bin = %q\n\n", name, srv.user+"@127.0.0.1",
			`"`+strings.Join(opts, `", "`)+`"`, fmt.Sprintf("%s --state-dir %s", shellQuote(binary), shellQuote(state)))
	}
	file := filepath.Join(t.TempDir(), "boxes.toml")
	require.NoError(t, os.WriteFile(file, []byte(box("a", fwd.port(), stateA)+box("b", srv.port, stateB)+box("c", freePort(t), t.TempDir())), 0o600))
	cmd := exec.Command(binary, "connect", "--boxes-file", file)
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+t.TempDir())
	c := abtest.ConnectCmd(t, cmd)
	c.CallTimeout = callTimeout

	tools, err := c.Session().ListTools(t.Context(), nil)
	require.NoError(t, err)
	for _, tl := range tools.Tools {
		box := tl.InputSchema.(map[string]any)["properties"].(map[string]any)["box"].(map[string]any)
		assert.Equal(t, []any{"a", "b", "c"}, box["enum"], tl.Name)
	}

	r := c.OK("process_list", map[string]any{})
	require.Empty(t, r.Data["runs"])
	cursor := r.Data["cursor"].(string)
	unreachable := r.Data["unreachable"].([]any)
	require.Len(t, unreachable, 1)
	assert.Equal(t, "c", unreachable[0].(map[string]any)["box"])
	assert.Contains(t, unreachable[0].(map[string]any)["reason"], "refused", "ssh's own words")

	gate := filepath.Join(t.TempDir(), "gate")
	slow := c.OK("process_start", map[string]any{"box": "a", "name": "slow",
		"command": fmt.Sprintf("while [ ! -e %s ]; do sleep 0.05; done; exit 5", shellQuote(gate))})
	killAtCleanup(t, int(slow.Data["run"].(map[string]any)["pid"].(float64)))
	c.OK("process_start", map[string]any{"box": "b", "name": "fast", "command": "echo on-b; exit 2"})

	r = c.OK("process_wait", map[string]any{"names": []string{"slow@a", "fast@b"}, "timeout_ms": 30000})
	run := r.Data["run"].(map[string]any)
	assert.Equal(t, []any{"fast", "b", float64(2)}, []any{run["name"], run["box"], run["exit_code"]})
	assert.Contains(t, r.Data["unanswered"], "slow@a", "its wait was cancelled for the end on b")

	// a's link is cut under a wait on its run, found by its bare name.
	waited := make(chan abtest.Result, 1)
	go func() { waited <- c.Call("process_wait", map[string]any{"name": "slow", "timeout_ms": 30000}) }()
	fresh := freshServer(map[procID]bool{}, func() []int { return serverPIDs(stateA) })
	require.True(t, pollUntil(t.Context(), callTimeout, fresh), "box a's agent-box")
	fwd.cut()
	require.True(t, pollUntil(t.Context(), callTimeout, fresh), "a new agent-box on box a after the cut")
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	r = <-waited
	require.False(t, r.IsError, r.Text)
	assert.EqualValues(t, 5, r.Data["run"].(map[string]any)["exit_code"])
	assert.Equal(t, "a", r.Data["run"].(map[string]any)["box"])

	r = c.OK("process_list", map[string]any{"changed_since": cursor})
	got := map[string]string{}
	for _, x := range r.Data["runs"].([]any) {
		run := x.(map[string]any)
		got[run["name"].(string)+"@"+run["box"].(string)] = run["state"].(string)
	}
	assert.Equal(t, map[string]string{"slow@a": "exited", "fast@b": "exited"}, got)
	assert.Len(t, r.Data["unreachable"], 1)
}
