package fleet_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBoxGivenGoesToThatBoxOnly(t *testing.T) {
	a, b := newFakeBox("A"), newFakeBox("B")
	a.start("web", 1)
	bID := b.start("web", 2)
	h := newHarness(t, a, b)

	r := h.call("process_kill", map[string]any{"box": "B", "name": "web"})
	require.False(t, r.IsError, r.Text)
	assert.Equal(t, "B", r.run()["box"], "the run says its box")
	assert.Equal(t, bID, r.run()["run_id"])
	assert.True(t, strings.HasPrefix(r.Text, "box B: web: sent SIGTERM"), r.Text)
	require.Len(t, b.got("process_kill"), 1)
	assert.Equal(t, map[string]any{"name": "web"}, b.got("process_kill")[0], "the box sees no box argument")
	assert.Empty(t, a.got("process_kill"))
	assert.Empty(t, a.got("process_list"), "a call given box asks no other box")

	r = h.call("process_list", map[string]any{"box": "A"})
	require.False(t, r.IsError, r.Text)
	runs := r.list("runs")
	require.Len(t, runs, 1)
	assert.Equal(t, "A", runs[0]["box"])
	assert.True(t, strings.HasPrefix(r.Text, "box A: 1 run(s):"), r.Text)
	assert.Equal(t, map[string]any{}, a.got("process_list")[0])
	assert.Empty(t, b.got("process_list"))

	r = h.call("process_start", map[string]any{"box": "A", "name": "db", "command": "sleep 9"})
	require.False(t, r.IsError, r.Text)
	assert.Equal(t, "A", r.run()["box"])
	assert.Equal(t, "db", r.run()["name"])
	assert.True(t, strings.HasPrefix(r.Text, "box A: started db"), r.Text)
	assert.Empty(t, b.got("process_start"))

	// A box's failure says the box too.
	r = h.call("tail_log", map[string]any{"box": "A", "name": "nope"})
	assert.True(t, r.IsError)
	assert.Equal(t, "no_such_run", r.code())
	assert.True(t, strings.HasPrefix(r.Text, "box A: no such run"), r.Text)
}

func TestBoxGivenUnknown(t *testing.T) {
	a, b := newFakeBox("A"), newFakeBox("B")
	a.start("web", 1)
	h := newHarness(t, a, b)
	for _, tool := range []string{"tail_log", "process_list", "process_start", "process_wait"} {
		r := h.call(tool, map[string]any{"box": "C", "name": "web"})
		assert.True(t, r.IsError, tool)
		assert.Equal(t, "invalid_argument", r.code(), tool)
		assert.Contains(t, r.Text, `"C"`, tool)
		assert.Contains(t, r.Text, "A, B", tool)
	}
	r := h.call("tail_log", map[string]any{"box": 7, "name": "web"})
	assert.Equal(t, "invalid_argument", r.code())
	assert.Contains(t, r.Text, "A, B")
	assert.Empty(t, a.got("tail_log"))
	assert.Empty(t, b.got("tail_log"))
}

func TestStartNeedsBox(t *testing.T) {
	a, b := newFakeBox("A"), newFakeBox("B")
	h := newHarness(t, a, b)
	r := h.call("process_start", map[string]any{"name": "web", "command": "sleep 9"})
	assert.True(t, r.IsError)
	assert.Equal(t, "invalid_argument", r.code())
	assert.Contains(t, r.Text, "process_start needs box")
	assert.Contains(t, r.Text, "A, B")
	assert.Empty(t, a.got("process_start"))
	assert.Empty(t, b.got("process_start"))
}

func TestRunToolWithoutBox(t *testing.T) {
	t.Run("one box has it: a look", func(t *testing.T) {
		a, b := newFakeBox("A"), newFakeBox("B")
		b.start("web", 1)
		h := newHarness(t, a, b)
		r := h.call("tail_log", map[string]any{"name": "web"})
		require.False(t, r.IsError, r.Text)
		assert.True(t, strings.HasPrefix(r.Text, "box B: [web state=running"), r.Text)
		assert.Equal(t, "web says hi\n", r.SC["content"])
		assert.Len(t, b.got("tail_log"), 1)
		assert.Empty(t, a.got("tail_log"))
	})
	t.Run("one box has it: a change", func(t *testing.T) {
		a, b := newFakeBox("A"), newFakeBox("B")
		b.start("web", 1)
		h := newHarness(t, a, b)
		r := h.call("process_kill", map[string]any{"name": "web"})
		require.False(t, r.IsError, "web only on B, A reachable: %s", r.Text)
		assert.Equal(t, "B", r.run()["box"])
		assert.True(t, strings.HasPrefix(r.Text, "box B: web: sent SIGTERM"), r.Text)
		assert.Len(t, b.got("process_kill"), 1)
		assert.Empty(t, a.got("process_kill"))
	})
	t.Run("two boxes have it", func(t *testing.T) {
		a, b := newFakeBox("A"), newFakeBox("B")
		a.start("web", 1)
		b.start("web", 2)
		h := newHarness(t, a, b)
		for _, tool := range []string{"tail_log", "process_kill"} {
			r := h.call(tool, map[string]any{"name": "web"})
			assert.True(t, r.IsError, tool)
			assert.Equal(t, "invalid_argument", r.code(), tool)
			assert.Contains(t, r.Text, "A and B", tool)
			assert.Contains(t, r.Text, "give box", tool)
			assert.Empty(t, a.got(tool))
			assert.Empty(t, b.got(tool))
		}
	})
	t.Run("no box has it", func(t *testing.T) {
		a, b := newFakeBox("A"), newFakeBox("B")
		a.start("db", 1)
		h := newHarness(t, a, b)
		r := h.call("tail_log", map[string]any{"name": "web"})
		assert.True(t, r.IsError)
		assert.Equal(t, "no_such_run", r.code(), r.Text)
		assert.Contains(t, r.Text, `no run named "web" on any box`)
	})
	for _, how := range []string{"fails", "hangs"} {
		t.Run("one box has it, another "+how, func(t *testing.T) {
			a, b := newFakeBox("A"), newFakeBox("B")
			a.start("web", 1)
			if how == "fails" {
				b.setFail(errors.New("ssh: connection refused"))
			} else {
				b.setHang(true)
			}
			h := newHarness(t, a, b)
			r := h.call("tail_log", map[string]any{"name": "web"})
			require.False(t, r.IsError, r.Text)
			assert.True(t, strings.HasPrefix(r.Text, "box A: [web state=running"), r.Text)

			r = h.call("process_kill", map[string]any{"name": "web"})
			assert.True(t, r.IsError)
			assert.Equal(t, "invalid_argument", r.code())
			assert.Contains(t, r.Text, `a run named "web" is on A`)
			if how == "fails" {
				assert.Contains(t, r.Text, "B (ssh: connection refused)")
			} else {
				assert.Contains(t, r.Text, "B (no answer in 300ms)")
			}
			assert.Contains(t, r.Text, "give box")
			assert.Empty(t, a.got("process_kill"), "a change goes nowhere when a box could not be asked")

			// Given box, it goes ahead.
			r = h.call("process_kill", map[string]any{"name": "web", "box": "A"})
			require.False(t, r.IsError, r.Text)
			assert.Equal(t, "A", r.run()["box"])
		})
	}
	t.Run("no box that answers has it, another fails", func(t *testing.T) {
		a, b := newFakeBox("A"), newFakeBox("B")
		a.start("db", 1)
		b.setFail(errors.New("ssh: connection refused"))
		h := newHarness(t, a, b)
		r := h.call("tail_log", map[string]any{"name": "web"})
		assert.True(t, r.IsError)
		assert.Equal(t, "unreachable", r.code())
		assert.Equal(t, true, r.SC["error"].(map[string]any)["retryable"], "B may have it once it answers")
		assert.Contains(t, r.Text, "B (ssh: connection refused)")
		assert.NotContains(t, r.Text, "A (", "A said it has none: %s", r.Text)
		assert.Equal(t, `no box that answered has a run named "web", and B (ssh: connection refused) could not be asked`, r.Text)
	})
	t.Run("without name", func(t *testing.T) {
		a, b := newFakeBox("A"), newFakeBox("B")
		h := newHarness(t, a, b)
		r := h.call("process_remove", map[string]any{"all_finished": true})
		assert.Equal(t, "invalid_argument", r.code())
		assert.Contains(t, r.Text, "needs box")
	})
}

// TestNameAtBoxIsThatBox: a run named NAME@BOX, as listings name runs, is
// on BOX, for every tool: no box is asked which has it.
func TestNameAtBoxIsThatBox(t *testing.T) {
	a, b := newFakeBox("A"), newFakeBox("B")
	a.start("web", 1)
	bID := b.start("web", 2)
	h := newHarness(t, a, b)

	r := h.call("process_kill", map[string]any{"name": "web@B"})
	require.False(t, r.IsError, r.Text)
	assert.Equal(t, bID, r.run()["run_id"])
	assert.Equal(t, map[string]any{"name": "web"}, b.got("process_kill")[0], "the box sees its own name of the run")
	assert.Empty(t, a.got("process_list"), "no box asked")

	r = h.call("process_start", map[string]any{"name": "db@A", "command": "sleep 9"})
	require.False(t, r.IsError, r.Text)
	assert.Equal(t, "A", r.run()["box"])
	assert.Equal(t, "db", r.run()["name"])

	r = h.call("process_wait", map[string]any{"name": "web@A", "box": "A", "timeout_ms": 1})
	require.False(t, r.IsError, r.Text)
	r = h.call("tail_log", map[string]any{"name": "web@A", "box": "B"})
	assert.Equal(t, "invalid_argument", r.code(), r.Text)
	assert.Contains(t, r.Text, "box says B")
	r = h.call("tail_log", map[string]any{"name": "web@C"})
	assert.Equal(t, "invalid_argument", r.code(), r.Text)
	assert.Contains(t, r.Text, `no box "C"`)
}

// TestRunIDSeenGoesToItsBox: a run id seen in an answer routes a call
// that gives it to its box, without asking every box: also where two
// boxes have runs of that name (a follow pinned to one run goes on when
// another box starts a run of the same name).
func TestRunIDSeenGoesToItsBox(t *testing.T) {
	a, b := newFakeBox("A"), newFakeBox("B")
	a.start("web", 1)
	bID := b.start("web", 2)
	h := newHarness(t, a, b)
	r := h.call("process_list", map[string]any{})
	require.False(t, r.IsError, r.Text)
	asked := len(a.got("process_list"))

	r = h.call("tail_log", map[string]any{"name": "web", "run_id": bID})
	require.False(t, r.IsError, r.Text)
	assert.Equal(t, "B", r.SC["box"])
	assert.Len(t, a.got("process_list"), asked, "no box asked which has web")
	assert.Empty(t, a.got("tail_log"))

	// An id never seen is no route: the name is looked for, as ever.
	r = h.call("tail_log", map[string]any{"name": "web", "run_id": "20260101T000009.000000000Z-zzzzzz"})
	assert.Equal(t, "invalid_argument", r.code(), r.Text)
	assert.Contains(t, r.Text, "boxes A and B")
}

// TestRunIDRoutesLooksOnly: a change that gives a run id seen before still
// asks every box (boxes cloned with their state dir share run ids), and an
// id seen on two boxes routes nothing.
func TestRunIDRoutesLooksOnly(t *testing.T) {
	a, b := newFakeBox("A"), newFakeBox("B")
	aID := a.start("web", 1)
	h := newHarness(t, a, b)
	r := h.call("process_list", map[string]any{})
	require.False(t, r.IsError, r.Text)
	asked := len(b.got("process_list"))
	r = h.call("process_kill", map[string]any{"name": "web", "run_id": aID})
	require.False(t, r.IsError, r.Text)
	assert.Greater(t, len(b.got("process_list")), asked, "a change asks every box which has web")
}
