package fleet_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/fleet"
	"github.com/agent-box/agent-box/session"
)

func ids(runs []map[string]any) []string {
	var out []string
	for _, r := range runs {
		out = append(out, r["run_id"].(string))
	}
	return out
}

func TestListMergesEveryBox(t *testing.T) {
	a, b := newFakeBox("A"), newFakeBox("B")
	a.start("web", 1)
	b.start("db", 2)
	a.start("job", 3)
	h := newHarness(t, a, b)
	r := h.call("process_list", map[string]any{})
	require.False(t, r.IsError, r.Text)
	runs := r.list("runs")
	assert.Equal(t, []string{runID(3, "A"), runID(2, "B"), runID(1, "A")}, ids(runs), "newest first, across boxes")
	assert.Equal(t, []any{"A", "B", "A"}, []any{runs[0]["box"], runs[1]["box"], runs[2]["box"]})
	assert.EqualValues(t, 3, r.SC["total"])
	assert.Nil(t, r.SC["next_before"])
	assert.Nil(t, r.SC["unreachable"])
	lines := strings.Split(r.Text, "\n")
	require.Len(t, lines, 5, r.Text)
	assert.Equal(t, "3 run(s):", lines[0])
	assert.True(t, strings.HasPrefix(lines[1], "job@A run_id="+runID(3, "A")+" state=running"), lines[1])
	assert.True(t, strings.HasPrefix(lines[2], "db@B run_id="+runID(2, "B")+" "), lines[2])
	assert.True(t, strings.HasPrefix(lines[3], "web@A run_id="+runID(1, "A")+" "), lines[3])
	assert.True(t, strings.HasPrefix(lines[4], "cursor="+r.SC["cursor"].(string)+" "), lines[4])
}

func TestListPagesAcrossBoxes(t *testing.T) {
	a, b := newFakeBox("A"), newFakeBox("B")
	for sec := 1; sec <= 6; sec++ {
		if sec%2 == 1 {
			a.start("a"+string(rune('0'+sec)), sec)
		} else {
			b.start("b"+string(rune('0'+sec)), sec)
		}
	}
	h := newHarness(t, a, b)
	r := h.call("process_list", map[string]any{"limit": 4})
	require.False(t, r.IsError, r.Text)
	first := ids(r.list("runs"))
	assert.Equal(t, []string{runID(6, "B"), runID(5, "A"), runID(4, "B"), runID(3, "A")}, first)
	assert.Equal(t, runID(3, "A"), r.SC["next_before"])
	assert.EqualValues(t, 6, r.SC["total"])
	assert.True(t, strings.HasPrefix(r.Text, "4 of 6 runs, the newest; older ones: process_list with before="+runID(3, "A")), r.Text)

	r = h.call("process_list", map[string]any{"limit": 4, "before": r.SC["next_before"]})
	require.False(t, r.IsError, r.Text)
	second := ids(r.list("runs"))
	assert.Equal(t, []string{runID(2, "B"), runID(1, "A")}, second, "the rest, none again")
	assert.Nil(t, r.SC["next_before"], "the last page says no more")
	for _, args := range append(a.got("process_list"), b.got("process_list")...) {
		assert.Equal(t, float64(4), args["limit"], "each box is asked for limit: any of them may hold all of the page")
	}
}

func TestListHangingBoxIsUnreachable(t *testing.T) {
	a, b := newFakeBox("A"), newFakeBox("B")
	a.start("web", 1)
	b.setHang(true)
	h := newHarness(t, a, b)
	began := time.Now()
	r := h.call("process_list", map[string]any{})
	took := time.Since(began)
	require.False(t, r.IsError, r.Text)
	assert.Less(t, took, 10*testTimeout, "a box that does not answer holds the list back about Timeout, no more")
	assert.GreaterOrEqual(t, took, testTimeout-50*time.Millisecond)
	assert.Equal(t, []string{runID(1, "A")}, ids(r.list("runs")))
	assert.Equal(t, []map[string]any{{"box": "B", "reason": "no answer in 300ms"}}, r.list("unreachable"))
	assert.Contains(t, r.Text, "\nunreachable: B (no answer in 300ms)\n")
	assert.Equal(t, 1, b.cancels(), "the box's call was ended")

	b.setHang(false)
	b.setFail(errors.New("ssh: connection refused"))
	r = h.call("process_list", map[string]any{})
	assert.Equal(t, []map[string]any{{"box": "B", "reason": "ssh: connection refused"}}, r.list("unreachable"))
}

func TestListCursorCoversEveryBox(t *testing.T) {
	a, b := newFakeBox("A"), newFakeBox("B")
	a.start("web", 1)
	b.start("db", 2)
	h := newHarness(t, a, b)
	r := h.call("process_list", map[string]any{})
	c0 := r.SC["cursor"].(string)
	aCur, bCur := "c1.1", "c1.1" // each box's own, from the fake's one change each

	a.start("job", 3)
	r = h.call("process_list", map[string]any{"changed_since": c0})
	require.False(t, r.IsError, r.Text)
	assert.Equal(t, []string{runID(3, "A")}, ids(r.list("runs")))
	assert.Equal(t, "A", r.list("runs")[0]["box"])
	assert.Equal(t, aCur, last(a.got("process_list"))["changed_since"], "box A gets its own cursor")
	assert.Equal(t, bCur, last(b.got("process_list"))["changed_since"], "box B gets its own cursor")
	assert.Contains(t, r.Text, "1 run(s) started or ended since that cursor:\njob@A run_id=")
	c1 := r.SC["cursor"].(string)
	assert.NotEqual(t, c0, c1)

	// B away: its part of the cursor stays as it was.
	b.setFail(errors.New("ssh: connection refused"))
	r = h.call("process_list", map[string]any{"changed_since": c1})
	require.False(t, r.IsError, r.Text)
	assert.Empty(t, r.list("runs"))
	assert.Equal(t, "B", r.list("unreachable")[0]["box"])
	c2 := r.SC["cursor"].(string)

	b.setFail(nil)
	b.start("cache", 4)
	r = h.call("process_list", map[string]any{"changed_since": c2})
	require.False(t, r.IsError, r.Text)
	assert.Equal(t, bCur, last(b.got("process_list"))["changed_since"], "B is asked from where it was when it went away")
	assert.Equal(t, []string{runID(4, "B")}, ids(r.list("runs")))
	assert.Equal(t, "c1.2", last(a.got("process_list"))["changed_since"])

	// A fleet's cursor given with box is that box's own.
	r = h.call("process_list", map[string]any{"box": "A", "changed_since": c2})
	require.False(t, r.IsError, r.Text)
	assert.Equal(t, "c1.2", last(a.got("process_list"))["changed_since"])
	// A box's own cursor with its box goes as it is.
	r = h.call("process_list", map[string]any{"box": "B", "changed_since": "c1.1"})
	require.False(t, r.IsError, r.Text)
	assert.Equal(t, "c1.1", last(b.got("process_list"))["changed_since"])
}

func last(calls []map[string]any) map[string]any {
	if len(calls) == 0 {
		return nil
	}
	return calls[len(calls)-1]
}

func TestListCursorRefused(t *testing.T) {
	a, b := newFakeBox("A"), newFakeBox("B")
	h := newHarness(t, a, b)
	before := len(a.got("process_list")) + len(b.got("process_list"))

	r := h.call("process_list", map[string]any{"changed_since": "c1.3"})
	assert.Equal(t, "invalid_argument", r.code())
	assert.Contains(t, r.Text, "changed_since is the cursor of one box's process_list: give that box too")

	r = h.call("process_list", map[string]any{"changed_since": "f1.!!"})
	assert.Equal(t, "invalid_argument", r.code())
	assert.Contains(t, r.Text, "changed_since is not a cursor of process_list")

	r = h.call("process_list", map[string]any{"changed_since": 5})
	assert.Equal(t, "invalid_argument", r.code())
	assert.Equal(t, before, len(a.got("process_list"))+len(b.got("process_list")), "no box is asked")
}

func TestListBoxRefusal(t *testing.T) {
	a, b := newFakeBox("A"), newFakeBox("B")
	a.start("web", 1)
	h := newHarness(t, a, b)
	r := h.call("process_list", map[string]any{"state": "bogus"})
	assert.True(t, r.IsError)
	assert.Equal(t, "invalid_argument", r.code())
	assert.Regexp(t, `^box [AB]: invalid argument: state "bogus" is not one of running, exited, unknown$`, r.Text)
	assert.Equal(t, r.Text, r.message())
}

func TestListByNameOverEveryBox(t *testing.T) {
	a, b := newFakeBox("A"), newFakeBox("B")
	a.start("web", 1)
	b.start("db", 2)
	h := newHarness(t, a, b)
	r := h.call("process_list", map[string]any{"name": "web"})
	require.False(t, r.IsError, r.Text)
	assert.Equal(t, []string{runID(1, "A")}, ids(r.list("runs")))
	assert.Nil(t, r.SC["unreachable"], "B has no web, and said so: %s", r.Text)
	assert.NotContains(t, r.Text, "unreachable")
}

func TestListCursorAndNewBox(t *testing.T) {
	a, b := newFakeBox("A"), newFakeBox("B")
	a.start("web", 1)
	b.start("db", 2)
	ha := newHarness(t, a)
	r := ha.call("process_list", map[string]any{})
	cur := r.SC["cursor"].(string)

	// B joined the fleet since the cursor: all its runs are new.
	h := newHarness(t, a, b)
	r = h.call("process_list", map[string]any{"changed_since": cur})
	require.False(t, r.IsError, r.Text)
	assert.Equal(t, []string{runID(2, "B")}, ids(r.list("runs")))
	assert.NotContains(t, last(b.got("process_list")), "changed_since")
	assert.Equal(t, "c1.1", last(a.got("process_list"))["changed_since"])

	r = h.call("process_list", map[string]any{"box": "B", "changed_since": cur})
	assert.Equal(t, "invalid_argument", r.code())
	assert.Contains(t, r.Text, "that cursor was made before box B was in the fleet")
}

// A box's own refusal of the arguments, the same on every box, is the
// answer; the fleet adds nothing of its own to what the model gave.
func TestListChangedSinceAlone(t *testing.T) {
	a, b := newFakeBox("A"), newFakeBox("B")
	h := newHarness(t, a, b)
	cur := h.call("process_list", map[string]any{}).SC["cursor"]
	r := h.call("process_list", map[string]any{"changed_since": cur, "limit": 5})
	assert.Equal(t, "invalid_argument", r.code())
	assert.Regexp(t, `^box [AB]: invalid argument: changed_since lists every run that changed, of every name; give it alone$`, r.Text)
}

// cannedList is a box whose process_list answer is given.
type cannedList struct{ text, sc string }

func (c cannedList) CallTool(context.Context, json.RawMessage, func([]byte)) (session.Answer, error) {
	b, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": c.text}}, "structuredContent": json.RawMessage(c.sc)})
	return session.Answer{Result: b}, nil
}

// TestListRunsWithoutAnIDComeFirstAndPageOn: a box lists a run it cannot
// read (no run id) as its newest; the merge keeps it first, shows its
// line, and pages on from the oldest run that has an id.
func TestListRunsWithoutAnIDComeFirstAndPageOn(t *testing.T) {
	r3 := runID(3, "A")
	a := cannedList{
		text: "2 of 4 runs, the newest; older ones: process_list with before=" + r3 + "\nbroken run_id= state=unknown reason=\"record unreadable\"\nr3 run_id=" + r3 + " state=exited (code 0)\ncursor=c1.A",
		sc:   `{"runs":[{"name":"broken","run_id":"","state":"unknown","reason":"record unreadable","log_bytes":0},{"name":"r3","run_id":"` + r3 + `","state":"exited","reason":"exit code 0","log_bytes":0}],"total":4,"next_before":"` + r3 + `","cursor":"c1.A"}`,
	}
	b := cannedList{text: "no runs\ncursor=c1.B", sc: `{"runs":[],"total":0,"cursor":"c1.B"}`}
	h := harnessOf(t, []fleet.Box{{Name: "A", Caller: a}, {Name: "B", Caller: b}})
	r := h.call("process_list", map[string]any{"limit": 2})
	require.False(t, r.IsError, r.Text)
	runs := r.list("runs")
	require.Len(t, runs, 2)
	assert.Equal(t, "broken", runs[0]["name"])
	assert.Equal(t, r3, runs[1]["run_id"])
	assert.Equal(t, r3, r.SC["next_before"], "paging goes on from the oldest run with an id")
	assert.Contains(t, r.Text, "\nbroken@A run_id= state=unknown")
	assert.Contains(t, r.Text, "\nr3@A run_id="+r3)
}

// TestListTextIsBounded: the merged text shows at most a box's own bound
// of runs; structured content has them all.
func TestListTextIsBounded(t *testing.T) {
	var boxes []*fakeBox
	for i := range 4 {
		b := newFakeBox(fmt.Sprintf("B%d", i))
		for j := range 20 {
			b.start(fmt.Sprintf("r%02d", j), i*100+j+1)
		}
		boxes = append(boxes, b)
	}
	h := newHarness(t, boxes...)
	r := h.call("process_list", map[string]any{})
	require.False(t, r.IsError, r.Text)
	assert.Len(t, r.list("runs"), 80)
	assert.Equal(t, 50, strings.Count(r.Text, " run_id="), "lines of runs")
	assert.Contains(t, r.Text, "\n30 more in structured content")
}

// TestListSplicesAnyRunObject: a box's run written with spaces is still a
// JSON object once the box is added.
func TestListSplicesAnyRunObject(t *testing.T) {
	c := cannedList{text: "2 run(s):\ncursor=c1.A", sc: `{"runs":[{` + "\n\t" + `"name":"y","run_id":"` + runID(2, "A") + `","state":"exited","reason":"r","log_bytes":0},{ "name":"x","run_id":"` + runID(1, "A") + `","state":"exited","reason":"r","log_bytes":0}],"total":2,"cursor":"c1.A"}`}
	h := harnessOf(t, []fleet.Box{{Name: "A", Caller: c}})
	r := h.call("process_list", map[string]any{})
	require.False(t, r.IsError, r.Text)
	runs := r.list("runs")
	require.Len(t, runs, 2)
	for _, run := range runs {
		assert.Equal(t, "A", run["box"])
	}
}
