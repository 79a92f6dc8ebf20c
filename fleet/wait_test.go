package fleet_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/fleet"
	"github.com/agent-box/agent-box/session"
	"github.com/agent-box/agent-box/wire"
)

// goCall runs a call in the background; its reply comes on the channel.
func (h *harness) goCall(ctx context.Context, tool string, args, meta map[string]any, progress func([]byte)) <-chan reply {
	ch := make(chan reply, 1)
	go func() {
		ans, err := h.f.CallTool(ctx, params(tool, args, meta), progress)
		if err != nil || ans.Error != nil {
			ch <- reply{Text: "call failed", IsError: true}
			return
		}
		ch <- h.decode(tool, ans.Result)
	}()
	return ch
}

func await(t *testing.T, ch <-chan reply) reply {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
		return reply{}
	}
}

func TestWaitFirstEndAcrossBoxes(t *testing.T) {
	a, b := newFakeBox("A"), newFakeBox("B")
	a.start("web", 1)
	b.start("db", 2)
	h := newHarness(t, a, b)
	ch := h.goCall(context.Background(), "process_wait", map[string]any{"names": []string{"web@A", "db@B"}}, nil, nil)
	enter(t, a, "process_wait")
	enter(t, b, "process_wait")
	assert.Equal(t, []any{"web"}, a.got("process_wait")[0]["names"], "each box waits for its own, by its own names")
	assert.Equal(t, []any{"db"}, b.got("process_wait")[0]["names"])
	assert.Empty(t, a.got("process_list"), "NAME@BOX needs no look for its box")

	a.end("web")
	r := await(t, ch)
	require.False(t, r.IsError, r.Text)
	assert.Equal(t, "web", r.run()["name"])
	assert.Equal(t, "A", r.run()["box"])
	assert.Equal(t, "exited", r.run()["state"])
	// B's wait was cancelled for A's end: db is not known to run still.
	assert.Nil(t, r.SC["running"])
	assert.Equal(t, []string{"db@B"}, r.strings("unanswered"))
	assert.Equal(t, false, r.SC["wait_timed_out"])
	assert.True(t, strings.HasPrefix(r.Text, "box A: web exited (code 0)"), r.Text)
	assert.True(t, strings.HasSuffix(r.Text, "\nno answer yet, when this end came, about: db@B"), r.Text)
	select {
	case <-b.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("B's wait was not cancelled")
	}
	assert.Equal(t, 1, b.cancels())
	assert.Equal(t, 0, a.cancels())
}

func TestWaitAllAcrossBoxes(t *testing.T) {
	a, b := newFakeBox("A"), newFakeBox("B")
	a.start("web", 1)
	b.start("db", 2)
	h := newHarness(t, a, b)
	ch := h.goCall(context.Background(), "process_wait", map[string]any{"names": []string{"web@A", "db@B"}, "all": true}, nil, nil)
	enter(t, a, "process_wait")
	enter(t, b, "process_wait")
	b.end("db")
	a.end("web")
	r := await(t, ch)
	require.False(t, r.IsError, r.Text)
	assert.Equal(t, false, r.SC["wait_timed_out"])
	assert.Nil(t, r.SC["running"])
	ends := r.list("ends")
	require.Len(t, ends, 1, "one run is run, the other's end is in ends")
	first, other := r.run(), ends[0]["run"].(map[string]any)
	got := map[any]any{first["name"]: first["box"], other["name"]: other["box"]}
	assert.Equal(t, map[any]any{"web": "A", "db": "B"}, got)
	assert.Equal(t, "exited", other["state"])
	assert.Contains(t, ends[0], "output_tail", "an end in ends carries its output as a box's ends do")
	assert.Contains(t, r.Text, "box A: web exited")
	assert.Contains(t, r.Text, "box B: db exited")
	assert.Equal(t, 0, a.cancels()+b.cancels())
}

func TestWaitBareNameOnItsBox(t *testing.T) {
	a, b := newFakeBox("A"), newFakeBox("B")
	a.start("web", 1)
	b.start("db", 2)
	h := newHarness(t, a, b)
	b.end("db")
	r := h.call("process_wait", map[string]any{"names": []string{"db"}})
	require.False(t, r.IsError, r.Text)
	assert.Equal(t, "B", r.run()["box"])
	assert.True(t, strings.HasPrefix(r.Text, "box B: db exited"), r.Text)
	assert.Empty(t, a.got("process_wait"))
	assert.Equal(t, []any{"db"}, b.got("process_wait")[0]["names"])

	r = h.call("process_wait", map[string]any{"name": "db"})
	require.False(t, r.IsError, r.Text)
	assert.Equal(t, "B", r.run()["box"])
	assert.Empty(t, a.got("process_wait"))

	// Names on two boxes, one bare: each goes to its box.
	ch := h.goCall(context.Background(), "process_wait", map[string]any{"names": []string{"web", "cache@B"}}, nil, nil)
	// cache does not exist on B: B refuses its part, and so the wait.
	r = await(t, ch)
	assert.True(t, r.IsError)
	assert.Equal(t, "no_such_run", r.code())
	assert.True(t, strings.HasPrefix(r.Text, "box B: no such run"), r.Text)
}

func TestWaitUnknownBox(t *testing.T) {
	a, b := newFakeBox("A"), newFakeBox("B")
	a.start("web", 1)
	h := newHarness(t, a, b)
	for _, args := range []map[string]any{{"names": []string{"web@A", "web@C"}}, {"name": "web@C"}} {
		r := h.call("process_wait", args)
		assert.True(t, r.IsError)
		assert.Equal(t, "invalid_argument", r.code())
		assert.Contains(t, r.Text, `there is no box "C"`)
		assert.Contains(t, r.Text, "A, B")
	}
	assert.Empty(t, a.got("process_wait"))
	// A name of another box, given box, is refused too.
	r := h.call("process_wait", map[string]any{"box": "A", "names": []string{"web@B"}})
	assert.Equal(t, "invalid_argument", r.code())
	assert.Contains(t, r.Text, `"web@B" is not on box A`)
	assert.Empty(t, a.got("process_wait"))
	// And one's own is its bare name.
	a.end("web")
	r = h.call("process_wait", map[string]any{"box": "A", "names": []string{"web@A"}})
	require.False(t, r.IsError, r.Text)
	assert.Equal(t, []any{"web"}, a.got("process_wait")[0]["names"])
}

func TestWaitUnreachableBox(t *testing.T) {
	a, b := newFakeBox("A"), newFakeBox("B")
	a.start("web", 1)
	b.setFail(errors.New("ssh: connection refused"))
	h := newHarness(t, a, b)
	ch := h.goCall(context.Background(), "process_wait", map[string]any{"names": []string{"web@A", "db@B"}}, nil, nil)
	enter(t, a, "process_wait")
	// B's failure is read before A's end (a box the fleet has not heard
	// from when an end comes is still waiting, not away).
	for <-b.returned != "process_wait" {
	}
	a.end("web")
	r := await(t, ch)
	require.False(t, r.IsError, r.Text)
	assert.Equal(t, "A", r.run()["box"])
	assert.Nil(t, r.SC["running"], "db@B is not running: its box could not be asked")
	assert.Equal(t, []map[string]any{{"box": "B", "reason": "ssh: connection refused"}}, r.list("unreachable"))
	assert.Contains(t, r.Text, "\nunreachable: B (ssh: connection refused)")

	// Every box of the wait away: the wait says so, and may be tried again.
	a.setFail(errors.New("ssh: no route to host"))
	r = h.call("process_wait", map[string]any{"names": []string{"web@A", "db@B"}})
	assert.True(t, r.IsError)
	assert.Equal(t, "unreachable", r.code())
	assert.Contains(t, r.Text, "A (ssh: no route to host)")
	assert.Contains(t, r.Text, "B (ssh: connection refused)")
	assert.Equal(t, true, r.SC["error"].(map[string]any)["retryable"])
}

func TestWaitProgressOnlyGrows(t *testing.T) {
	a, b := newFakeBox("A"), newFakeBox("B")
	a.start("web", 1)
	b.start("db", 2)
	h := newHarness(t, a, b)
	var got []float64
	progress := func(line []byte) {
		var m struct {
			Params struct {
				Token    string  `json:"progressToken"`
				Progress float64 `json:"progress"`
			} `json:"params"`
		}
		require.NoError(t, json.Unmarshal(line, &m))
		assert.Equal(t, "tok", m.Params.Token)
		got = append(got, m.Params.Progress) // the boxes' pushes are one at a time
	}
	ch := h.goCall(context.Background(), "process_wait", map[string]any{"names": []string{"web@A", "db@B"}},
		map[string]any{"progressToken": "tok"}, progress)
	enter(t, a, "process_wait")
	enter(t, b, "process_wait")
	for _, p := range []struct {
		box *fakeBox
		at  float64
	}{{a, 1}, {b, 0.5}, {b, 2}, {a, 1.5}, {a, 2}, {a, 3}, {b, 3.5}} {
		done := make(chan struct{})
		p.box.progress <- progPush{p.at, done}
		<-done
	}
	a.end("web")
	r := await(t, ch)
	require.False(t, r.IsError, r.Text)
	assert.Equal(t, []float64{1, 2, 3, 3.5}, got)
}

// A box whose wait ended without an end (its timeout) while another's
// run ends: the answer is the end, and the first box's run is still
// running.
func TestWaitOneBoxTimesOutAnotherEnds(t *testing.T) {
	a, b := newFakeBox("A"), newFakeBox("B")
	a.start("web", 1)
	b.start("db", 2)
	h := newHarness(t, a, b)
	ch := h.goCall(context.Background(), "process_wait", map[string]any{"names": []string{"web@A", "db@B"}, "timeout_ms": 60000}, nil, nil)
	enter(t, a, "process_wait")
	enter(t, b, "process_wait")
	a.expire <- struct{}{}
	// A's answer is most likely read first: what it leaves running
	// must be in the answer B's end makes.
	for <-a.returned != "process_wait" {
	}
	b.end("db")
	r := await(t, ch)
	require.False(t, r.IsError, r.Text)
	assert.Equal(t, "db", r.run()["name"])
	assert.Equal(t, "B", r.run()["box"])
	assert.Equal(t, false, r.SC["wait_timed_out"])
	assert.Contains(t, r.strings("running"), "web@A", r.Text)
}

func TestWaitAllOneBoxTimesOut(t *testing.T) {
	a, b := newFakeBox("A"), newFakeBox("B")
	a.start("web", 1)
	b.start("db", 2)
	h := newHarness(t, a, b)
	ch := h.goCall(context.Background(), "process_wait", map[string]any{"names": []string{"web@A", "db@B"}, "all": true, "timeout_ms": 60000}, nil, nil)
	enter(t, a, "process_wait")
	enter(t, b, "process_wait")
	a.expire <- struct{}{}
	b.end("db")
	r := await(t, ch)
	require.False(t, r.IsError, r.Text)
	assert.Equal(t, "db", r.run()["name"], "the run that ended is run")
	assert.Equal(t, "B", r.run()["box"])
	assert.Equal(t, true, r.SC["wait_timed_out"], "not every run ended")
	assert.Equal(t, []string{"web@A"}, r.strings("running"))
	assert.Nil(t, r.SC["ends"])
}

// One box's wait, through the fleet: the runs it names still running are
// NAME@BOX, as a wait across boxes takes them.
func TestWaitOnOneBoxNamesItsRunning(t *testing.T) {
	a, b := newFakeBox("A"), newFakeBox("B")
	a.start("web", 1)
	a.start("db", 2)
	h := newHarness(t, a, b)
	a.end("web")
	r := h.call("process_wait", map[string]any{"names": []string{"web@A", "db@A"}})
	require.False(t, r.IsError, r.Text)
	assert.Equal(t, "A", r.run()["box"])
	assert.Equal(t, []string{"db@A"}, r.strings("running"))
	others := r.list("others")
	require.Len(t, others, 1)
	assert.Equal(t, "A", others[0]["box"])
	assert.Equal(t, []any{"web", "db"}, a.got("process_wait")[0]["names"])
	assert.Empty(t, b.got("process_wait"))
}

func TestWaitBareNameOnTwoBoxes(t *testing.T) {
	a, b := newFakeBox("A"), newFakeBox("B")
	a.start("web", 1)
	b.start("web", 2)
	h := newHarness(t, a, b)
	r := h.call("process_wait", map[string]any{"names": []string{"web"}})
	assert.Equal(t, "invalid_argument", r.code())
	assert.Equal(t, `invalid argument: runs named "web" are on boxes A and B: name one as web@BOX`, r.Text)
	r = h.call("process_wait", map[string]any{"name": "web"})
	assert.Equal(t, "invalid_argument", r.code())
	assert.Contains(t, r.Text, `runs named "web" are on boxes A and B`)
	assert.Empty(t, a.got("process_wait"))
	assert.Empty(t, b.got("process_wait"))
}

// failsLate is a box whose call fails on its own words once its ctx is
// done: a transport that died as the wait ended elsewhere.
type failsLate struct{ err error }

func (x failsLate) CallTool(ctx context.Context, _ json.RawMessage, _ func([]byte)) (session.Answer, error) {
	<-ctx.Done()
	return session.Answer{}, x.err
}

// TestWaitAnEndDoesNotHideAFailedBox: the first end answers the wait,
// and a box whose part failed is unreachable in that answer, not a box
// whose runs are still running: the fleet reads every box's part before
// it answers.
func TestWaitAnEndDoesNotHideAFailedBox(t *testing.T) {
	a := newFakeBox("A")
	a.start("web", 1)
	a.end("web")
	h := harnessOf(t, []fleet.Box{{Name: "A", Caller: a}, {Name: "B", Caller: failsLate{errors.New("ssh: connection reset")}}})
	r := h.call("process_wait", map[string]any{"names": []string{"web@A", "db@B"}, "timeout_ms": 60000})
	require.False(t, r.IsError, r.Text)
	assert.Equal(t, "web", r.run()["name"])
	assert.NotContains(t, r.strings("unanswered"), "db@B")
	assert.Equal(t, []map[string]any{{"box": "B", "reason": "ssh: connection reset"}}, r.list("unreachable"))
	assert.Contains(t, r.Text, "unreachable: B (ssh: connection reset)")
}

// refusesLate is a box that refuses its part of a wait, but only once its
// ctx is done: its refusal comes after an end elsewhere.
type refusesLate struct{}

func (refusesLate) CallTool(ctx context.Context, _ json.RawMessage, _ func([]byte)) (session.Answer, error) {
	<-ctx.Done()
	return toolErr(wire.NoSuchRun, `no such run: no run named "ghost"`), nil
}

// TestWaitARefusalAnswersAlsoAfterAnEnd: a box's refusal of its part
// answers the wait, also when it comes after an end elsewhere; it is not
// a box that could not be reached.
func TestWaitARefusalAnswersAlsoAfterAnEnd(t *testing.T) {
	a := newFakeBox("A")
	a.start("web", 1)
	a.end("web")
	h := harnessOf(t, []fleet.Box{{Name: "A", Caller: a}, {Name: "B", Caller: refusesLate{}}})
	r := h.call("process_wait", map[string]any{"names": []string{"web@A", "ghost@B"}})
	require.True(t, r.IsError, r.Text)
	assert.Equal(t, "no_such_run", r.code())
	assert.True(t, strings.HasPrefix(r.Text, "box B: no such run"), r.Text)
}

// TestWaitAllWithABoxAwayIsNoAnswer: with all, a box that cannot be asked
// leaves its runs unknown, so the wait does not answer as if every one
// ended: it says which box, and that a wait again answers at once.
func TestWaitAllWithABoxAwayIsNoAnswer(t *testing.T) {
	a, b := newFakeBox("A"), newFakeBox("B")
	a.start("web", 1)
	a.end("web")
	b.start("db", 2)
	b.setFail(errors.New("ssh: connection refused"))
	h := newHarness(t, a, b)
	r := h.call("process_wait", map[string]any{"names": []string{"web@A", "db@B"}, "all": true})
	require.True(t, r.IsError, r.Text)
	assert.Equal(t, "unreachable", r.code())
	assert.Contains(t, r.Text, "B (ssh: connection refused)")
	assert.Contains(t, r.Text, "wait again")
}

// TestWaitNameBesideAnEmptyNames: names given empty or null beside name
// is name's wait, as a client that sends every optional field may ask.
func TestWaitNameBesideAnEmptyNames(t *testing.T) {
	a, b := newFakeBox("A"), newFakeBox("B")
	a.start("web", 1)
	a.end("web")
	h := newHarness(t, a, b)
	for _, names := range []any{nil, []string{}} {
		r := h.call("process_wait", map[string]any{"name": "web", "names": names})
		require.False(t, r.IsError, "names %v: %s", names, r.Text)
		assert.Equal(t, "A", r.run()["box"])
	}
}

// TestWaitAllKeepsTheEndOfABoxThatTimedOut: with all, a box whose wait
// timed out after one of its runs ended answers that run as its run: it is
// an end of the merged answer, not a run still running.
func TestWaitAllKeepsTheEndOfABoxThatTimedOut(t *testing.T) {
	a, b := newFakeBox("A"), newFakeBox("B")
	a.start("web1", 1)
	a.start("web2", 2)
	b.start("db", 3)
	h := newHarness(t, a, b)
	ch := h.goCall(context.Background(), "process_wait", map[string]any{"names": []string{"web1@A", "web2@A", "db@B"}, "all": true, "timeout_ms": 60000}, nil, nil)
	enter(t, a, "process_wait")
	enter(t, b, "process_wait")
	a.end("web1")
	a.expire <- struct{}{}
	for <-a.returned != "process_wait" {
	}
	b.end("db")
	r := await(t, ch)
	require.False(t, r.IsError, r.Text)
	ended := map[string]bool{r.run()["name"].(string) + "@" + r.run()["box"].(string): true}
	for _, e := range r.list("ends") {
		run := e["run"].(map[string]any)
		ended[run["name"].(string)+"@"+run["box"].(string)] = true
	}
	assert.Equal(t, map[string]bool{"web1@A": true, "db@B": true}, ended)
	assert.Equal(t, []string{"web2@A"}, r.strings("running"))
	assert.Equal(t, true, r.SC["wait_timed_out"], "web2 still runs")
}

// busyLate is a box whose part of a wait fails busy once its ctx is done.
type busyLate struct{}

func (busyLate) CallTool(ctx context.Context, _ json.RawMessage, _ func([]byte)) (session.Answer, error) {
	<-ctx.Done()
	return toolErr(wire.Busy, "busy: try again"), nil
}

// TestWaitAnEndOutlivesAFailureAfterIt: a box's failure (not a refusal of
// the names) after an end elsewhere does not hide the end: the end
// answers, and the box is said.
func TestWaitAnEndOutlivesAFailureAfterIt(t *testing.T) {
	a := newFakeBox("A")
	a.start("web", 1)
	a.end("web")
	h := harnessOf(t, []fleet.Box{{Name: "A", Caller: a}, {Name: "B", Caller: busyLate{}}})
	r := h.call("process_wait", map[string]any{"names": []string{"web@A", "db@B"}})
	require.False(t, r.IsError, r.Text)
	assert.Equal(t, "web", r.run()["name"])
	assert.Equal(t, []map[string]any{{"box": "B", "reason": "busy: try again"}}, r.list("unreachable"))
}
