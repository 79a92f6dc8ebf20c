package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/fleet"
	"github.com/agent-box/agent-box/internal/abtest"
	"github.com/agent-box/agent-box/session"
)

// Real boxes (agent-box processes on this machine, each its own state
// dir, each reached through a session as connect reaches one) where what
// matters is how a box answers, not how the fake does. Linux only: the
// box side is Linux's, and this file's imports would take it into the
// fleet's test build elsewhere.

var (
	buildOnce sync.Once
	binary    string
	cleanup   func()
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if cleanup != nil {
		cleanup()
	}
	os.Exit(code)
}

func realBox(t *testing.T, name string) fleet.Box {
	t.Helper()
	buildOnce.Do(func() {
		// Built at the first test that needs it: the fake's tests need none.
		binary, cleanup, buildErr = abtest.Build()
	})
	require.NoError(t, buildErr)
	init, _ := json.Marshal(map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "fleet test", "version": "0"}})
	sess := session.Open(session.Box{Name: name, Argv: []string{binary, "--state-dir", t.TempDir()}}, init, session.Options{})
	t.Cleanup(sess.Close)
	return fleet.Box{Name: name, Caller: sess}
}

func TestRealBoxes(t *testing.T) {
	h := harnessOf(t, []fleet.Box{realBox(t, "A"), realBox(t, "B")})
	h.f.Timeout = fleet.DefaultTimeout // real boxes: dial and answer
	start := func(box, name, command string) {
		t.Helper()
		r := h.call("process_start", map[string]any{"box": box, "name": name, "command": command})
		require.False(t, r.IsError, r.Text)
		assert.Equal(t, box, r.run()["box"])
		require.True(t, strings.HasPrefix(r.Text, "box "+box+": started "+name), r.Text)
		t.Cleanup(func() { h.call("process_kill", map[string]any{"box": box, "name": name}) })
	}
	start("A", "web", "sleep 60")
	start("B", "db", "sleep 60")

	t.Run("list", func(t *testing.T) {
		r := h.call("process_list", map[string]any{})
		require.False(t, r.IsError, r.Text)
		runs := r.list("runs")
		require.Len(t, runs, 2)
		assert.Equal(t, []any{"db", "B"}, []any{runs[0]["name"], runs[0]["box"]}, "newest first")
		assert.Equal(t, []any{"web", "A"}, []any{runs[1]["name"], runs[1]["box"]})
		assert.Nil(t, r.SC["unreachable"])
		assert.Contains(t, r.Text, "\ndb@B run_id=")
		assert.Contains(t, r.Text, "\nweb@A run_id=")
		cur := r.SC["cursor"].(string)

		start("A", "job", "true")
		r = h.call("process_list", map[string]any{"changed_since": cur})
		require.False(t, r.IsError, r.Text)
		var names []string
		for _, run := range r.list("runs") {
			names = append(names, fmt.Sprint(run["name"], "@", run["box"]))
		}
		assert.Equal(t, []string{"job@A"}, names, r.Text)
	})
	t.Run("look by name", func(t *testing.T) {
		r := h.call("tail_log", map[string]any{"name": "web"})
		require.False(t, r.IsError, r.Text)
		assert.True(t, strings.HasPrefix(r.Text, "box A: "), r.Text)
		assert.Equal(t, "web", r.SC["name"])
	})
	t.Run("wait across boxes", func(t *testing.T) {
		start("B", "quick", "sleep 0.2")
		r := h.call("process_wait", map[string]any{"names": []string{"web@A", "quick@B"}})
		require.False(t, r.IsError, r.Text)
		assert.Equal(t, "quick", r.run()["name"])
		assert.Equal(t, "B", r.run()["box"])
		assert.Equal(t, "exited", r.run()["state"])
		assert.Equal(t, []string{"web@A"}, r.strings("unanswered"))
	})
	t.Run("list by name", func(t *testing.T) {
		r := h.call("process_list", map[string]any{"name": "web"})
		require.False(t, r.IsError, r.Text)
		require.Len(t, r.list("runs"), 1)
		assert.Nil(t, r.SC["unreachable"], "B has no web, and said so: %s", r.Text)
	})
	t.Run("no box has it", func(t *testing.T) {
		r := h.call("tail_log", map[string]any{"name": "nope"})
		assert.True(t, r.IsError)
		assert.Equal(t, "no_such_run", r.code(), r.Text)
	})
	t.Run("change by name", func(t *testing.T) {
		r := h.call("process_kill", map[string]any{"name": "web"})
		require.False(t, r.IsError, "web only on A, B reachable: %s", r.Text)
		assert.Equal(t, "A", r.run()["box"])
	})
}

// testdata/tools.json is the tools/list a box answers now: the fleet's
// tool list is tested on the box's own.
func TestToolListIsTheBoxs(t *testing.T) {
	b := realBox(t, "A")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ans, err := b.Caller.(*session.Session).Call(ctx, "tools/list", json.RawMessage(`{}`))
	require.NoError(t, err)
	require.Nil(t, ans.Error)
	var got, want any
	require.NoError(t, json.Unmarshal(ans.Result, &got))
	require.NoError(t, json.Unmarshal(realToolList(t), &want))
	assert.Equal(t, want, got, "testdata/tools.json is stale: write there the result of a box's tools/list")
}
