//go:build linux

package connect_test

import (
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
)

// fleet is agent-box connect over several boxes on this machine, each an
// exec transport to an agent-box of its own state dir, and one box ("gone")
// whose transport fails at once.
type fleet struct {
	states map[string]string // box name -> state dir
	*abtest.Server
}

func newFleet(t *testing.T, names ...string) *fleet {
	f := &fleet{states: map[string]string{}}
	args := []string{"connect"}
	for _, n := range names {
		f.states[n] = t.TempDir()
		abtest.ReapRunsAtCleanup(t, f.states[n])
		args = append(args, "--exec", fmt.Sprintf("%s=%s --state-dir %s", n, binary, f.states[n]))
	}
	args = append(args, "--exec", "gone=false")
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+t.TempDir())
	f.Server = abtest.ConnectCmd(t, cmd)
	return f
}

// boxesOf are the boxes of the runs of a process_list answer, by name.
func boxesOf(t *testing.T, r abtest.Result) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, x := range r.Data["runs"].([]any) {
		run := x.(map[string]any)
		out[run["name"].(string)] = run["box"].(string)
	}
	return out
}

// TestFleetHasOneToolList: several boxes are one tool list, in which every
// tool takes box and process_start needs it.
func TestFleetHasOneToolList(t *testing.T) {
	t.Parallel()
	f := newFleet(t, "a", "b")
	res, err := f.Session().ListTools(t.Context(), nil)
	require.NoError(t, err)
	require.NotEmpty(t, res.Tools)
	for _, tl := range res.Tools {
		schema := tl.InputSchema.(map[string]any)
		box, ok := schema["properties"].(map[string]any)["box"].(map[string]any)
		require.True(t, ok, "%s takes no box", tl.Name)
		assert.ElementsMatch(t, []any{"a", "b", "gone"}, box["enum"], tl.Name)
		if tl.Name == "process_start" {
			assert.Contains(t, schema["required"], "box")
		}
	}
	r := f.Call("process_start", map[string]any{"name": "x", "command": "true"})
	require.True(t, r.IsError)
	assert.Contains(t, r.Text, "process_start needs box")
	r = f.Call("process_start", map[string]any{"name": "x", "command": "true", "box": "nope"})
	require.True(t, r.IsError)
	assert.Contains(t, r.Text, `no box "nope"`)
}

// TestFleetListsEveryBox: process_list without box merges every box's runs,
// each saying its box; a box that cannot be reached is listed as such and
// the call still answers; the cursor covers every box.
func TestFleetListsEveryBox(t *testing.T) {
	t.Parallel()
	f := newFleet(t, "a", "b")
	f.OK("process_start", map[string]any{"box": "a", "name": "build", "command": "exit 3", "wait_ms": 30000})
	f.OK("process_start", map[string]any{"box": "b", "name": "serve", "command": "sleep 600"})

	r := f.OK("process_list", map[string]any{})
	assert.Equal(t, map[string]string{"build": "a", "serve": "b"}, boxesOf(t, r))
	assert.EqualValues(t, 2, r.Data["total"])
	unreachable := r.Data["unreachable"].([]any)
	require.Len(t, unreachable, 1)
	assert.Equal(t, "gone", unreachable[0].(map[string]any)["box"])
	reason := unreachable[0].(map[string]any)["reason"].(string)
	assert.Contains(t, reason, "false")
	assert.NotContains(t, reason, "box unreachable", "said once: %q", reason)
	assert.Contains(t, r.Text, "build@a run_id=")
	assert.Contains(t, r.Text, "serve@b run_id=")
	assert.Contains(t, r.Text, "unreachable: gone")
	cursor := r.Data["cursor"].(string)

	// Nothing changed: nothing listed, on any box.
	r = f.OK("process_list", map[string]any{"changed_since": cursor})
	assert.Empty(t, r.Data["runs"])

	// A run ends on b, another starts on a: both, and only they, are news.
	f.OK("process_kill", map[string]any{"box": "b", "name": "serve", "signal": "KILL"})
	f.OK("process_wait", map[string]any{"name": "serve@b"})
	f.OK("process_start", map[string]any{"box": "a", "name": "test", "command": "sleep 600"})
	r = f.OK("process_list", map[string]any{"changed_since": cursor})
	assert.Equal(t, map[string]string{"serve": "b", "test": "a"}, boxesOf(t, r))
	next := r.Data["cursor"].(string)
	r = f.OK("process_list", map[string]any{"changed_since": next})
	assert.Empty(t, r.Data["runs"])

	// A box's own cursor is no fleet cursor.
	r = f.OK("process_list", map[string]any{"box": "a"})
	boxCursor := r.Data["cursor"].(string)
	r = f.Call("process_list", map[string]any{"changed_since": boxCursor})
	require.True(t, r.IsError)
	assert.Contains(t, r.Text, "give that box too")
	f.OK("process_kill", map[string]any{"box": "a", "name": "test", "signal": "KILL"})
}

// TestFleetFindsARunsBox: a tool acting on a run finds the one box with a
// run of that name; of two, it says which.
func TestFleetFindsARunsBox(t *testing.T) {
	t.Parallel()
	f := newFleet(t, "a", "b")
	f.OK("process_start", map[string]any{"box": "b", "name": "only", "command": "echo from-b", "wait_ms": 30000})
	f.OK("process_start", map[string]any{"box": "a", "name": "twice", "command": "true", "wait_ms": 30000})
	f.OK("process_start", map[string]any{"box": "b", "name": "twice", "command": "true", "wait_ms": 30000})

	r := f.OK("tail_log", map[string]any{"name": "only"})
	assert.Contains(t, r.Text, "from-b")
	assert.Equal(t, "b", r.Data["box"])
	assert.True(t, strings.HasPrefix(r.Text, "box b: "), "%q", r.Text)

	r = f.Call("tail_log", map[string]any{"name": "twice"})
	require.True(t, r.IsError)
	assert.Contains(t, r.Text, "boxes a and b")

	r = f.Call("tail_log", map[string]any{"name": "nowhere"})
	require.True(t, r.IsError)
	assert.Contains(t, r.Text, "nowhere")

	// gone cannot say whether it has one too: a look goes ahead, a change
	// does not.
	r = f.Call("process_remove", map[string]any{"name": "only"})
	require.True(t, r.IsError)
	assert.Contains(t, r.Text, "gone")
	assert.Contains(t, r.Text, "give box")
	r = f.OK("process_remove", map[string]any{"name": "only", "box": "b"})
	assert.Equal(t, "b", r.Data["removed"].([]any)[0].(map[string]any)["box"], "%v", r.Data)
}

// TestFleetWaitsAcrossBoxes: process_wait names on different boxes answer
// the first to end on any box, or with all, every one.
func TestFleetWaitsAcrossBoxes(t *testing.T) {
	t.Parallel()
	f := newFleet(t, "a", "b")
	gate := t.TempDir() + "/open"
	f.OK("process_start", map[string]any{"box": "a", "name": "slow", "command": fmt.Sprintf("while [ ! -e %s ]; do sleep 0.05; done; exit 5", gate)})
	f.OK("process_start", map[string]any{"box": "b", "name": "fast", "command": "echo done-on-b; exit 2"})

	r := f.OK("process_wait", map[string]any{"names": []string{"slow@a", "fast@b"}, "timeout_ms": 60000})
	run := r.Data["run"].(map[string]any)
	assert.Equal(t, "fast", run["name"])
	assert.Equal(t, "b", run["box"])
	assert.EqualValues(t, 2, run["exit_code"])
	assert.Contains(t, r.Data["unanswered"], "slow@a", "its wait was cancelled for the end on b")
	assert.Contains(t, r.Text, "done-on-b")

	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	// Bare names are placed on the box that has them.
	r = f.OK("process_wait", map[string]any{"names": []string{"slow", "fast"}, "all": true, "timeout_ms": 60000})
	assert.Equal(t, false, r.Data["wait_timed_out"])
	ended := map[string]string{}
	add := func(x any) {
		run := x.(map[string]any)
		ended[run["name"].(string)+"@"+run["box"].(string)] = fmt.Sprint(run["exit_code"])
	}
	add(r.Data["run"])
	for _, e := range r.Data["ends"].([]any) {
		add(e.(map[string]any)["run"])
	}
	keys := make([]string, 0, len(ended))
	for k := range ended {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	assert.Equal(t, []string{"fast@b", "slow@a"}, keys)
	assert.Equal(t, "5", ended["slow@a"])
}
