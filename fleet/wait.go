package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/agent-box/agent-box/session"
	"github.com/agent-box/agent-box/wire"
)

// wait is process_wait without box. name goes to its box;
// names are placed on their boxes and each box waits for its own, in
// parallel: the first end on any box answers (the other boxes' waits are
// cancelled), or with all, every box's answer merged.
func (f *Fleet) wait(ctx context.Context, c call, progress func([]byte)) (session.Answer, error) {
	var names []string
	if raw, ok := c.args["names"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &names); err != nil {
			return failure(wire.InvalidArgument, "invalid argument: names must be a list of run names"), nil
		}
	}
	if len(names) == 0 {
		// name alone (a client may send an empty or null names beside it).
		delete(c.args, "names")
		name, ok, err := c.str("name")
		if err != nil || !ok || name == "" {
			return failure(wire.InvalidArgument, "invalid argument: name is required (or names)"), nil
		}
		return f.byName(ctx, c, name, progress)
	}
	all := false
	_ = json.Unmarshal(c.args["all"], &all)
	groups, order, fail := f.place(ctx, names)
	if ctx.Err() != nil {
		return session.Answer{}, ctx.Err()
	}
	if fail != nil {
		return *fail, nil
	}
	if len(order) == 1 {
		args := c.cloneArgs()
		args["names"], _ = json.Marshal(groups[order[0]])
		return f.one(ctx, order[0], c.with(args), progress)
	}
	prog, stop := monotonic(progress)
	defer stop() // no progress after the answer
	return f.waitAcross(ctx, c, groups, order, all, prog)
}

// place puts each of names on its box: NAME@BOX on BOX, a bare NAME on
// the one box that has a run of it.
func (f *Fleet) place(ctx context.Context, names []string) (map[int][]string, []int, *session.Answer) {
	groups := map[int][]string{}
	var order []int
	add := func(i int, name string) {
		if _, ok := groups[i]; !ok {
			order = append(order, i)
		}
		groups[i] = append(groups[i], name)
	}
	var bare []string
	for _, n := range names {
		run, box, at := strings.Cut(n, "@")
		if !at {
			bare = append(bare, n)
			continue
		}
		i, known := f.index[box]
		if !known {
			a := failure(wire.InvalidArgument, fmt.Sprintf("invalid argument: names: %q: there is no box %q: box is one of %s", n, box, f.list()))
			return nil, nil, &a
		}
		add(i, run)
	}
	if len(bare) == 0 {
		return groups, order, nil
	}
	have, gone, fail := f.holders(ctx, bare)
	if fail != nil {
		return nil, nil, fail
	}
	for _, n := range bare {
		on := have[n]
		var a session.Answer
		switch {
		case len(on) == 1:
			add(on[0], n)
			continue
		case len(on) > 1:
			a = failure(wire.InvalidArgument, fmt.Sprintf("invalid argument: runs named %q are on boxes %s: name one as %s@BOX", n, f.join(on), n))
		case len(gone) > 0:
			a = failureRetry(wire.Unreachable, fmt.Sprintf("no box that answered has a run named %q, and %s could not be asked", n, describeAway(gone)))
		default:
			a = failure(wire.NoSuchRun, fmt.Sprintf("no such run: no run named %q on any box (process_list shows the runs there are)", n))
		}
		return nil, nil, &a
	}
	return groups, order, nil
}

// boxWait is one box's answer to its part of a wait.
type boxWait struct {
	box int
	res result
	sc  map[string]json.RawMessage // decorated: runs say their box
}

func (w boxWait) timedOut() bool {
	var t bool
	_ = json.Unmarshal(w.sc["wait_timed_out"], &t)
	return t
}

func (w boxWait) running() []string {
	var r []string
	_ = json.Unmarshal(w.sc["running"], &r)
	return r
}

// waitAcross waits on several boxes at once.
func (f *Fleet) waitAcross(ctx context.Context, c call, groups map[int][]string, order []int, all bool, progress func([]byte)) (session.Answer, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type got struct {
		i   int
		res result
		err error
	}
	ch := make(chan got, len(order))
	for _, i := range order {
		args := c.cloneArgs()
		args["names"], _ = json.Marshal(groups[i])
		params := c.with(args).params()
		go func() {
			res, err := parseAnswer(f.boxes[i].Caller.CallTool(wctx, params, progress))
			ch <- got{i, res, err}
		}()
	}
	pending := map[int]bool{}
	for _, i := range order {
		pending[i] = true
	}
	var done []boxWait
	var gone []away
	ended := false // a run ended: without all, the answer
	take := func(g got) *session.Answer {
		delete(pending, g.i)
		switch {
		case g.err != nil && ended && errors.Is(g.err, context.Canceled):
			pending[g.i] = true // cancelled for the end: not answered
		case g.err != nil:
			gone = append(gone, away{Box: f.boxes[g.i].Name, Reason: f.reason(wctx, g.i, g.err)})
		case g.res.IsError && (!ended || refusal(g.res.code())):
			// One box refused its part (a name it has no run of): the
			// wait as asked cannot be, so none of it is answered, also
			// after an end elsewhere (a wait again on an ended run
			// answers at once: nothing is lost).
			a := answer(prefixed(g.res, f.boxes[g.i].Name))
			return &a
		case g.res.IsError:
			// A box that failed its part after an end elsewhere (busy,
			// internal): the end answers, and the box is said.
			gone = append(gone, away{Box: f.boxes[g.i].Name, Reason: g.res.message()})
		default:
			w := boxWait{box: g.i, res: g.res, sc: map[string]json.RawMessage{}}
			_ = json.Unmarshal(g.res.Structured, &w.sc)
			f.learn(g.i, tagRuns(w.sc, f.boxes[g.i].Name))
			done = append(done, w)
			ended = ended || (!all && !w.timedOut())
		}
		return nil
	}
	n := 0
	for ; n < len(order) && !ended; n++ {
		g := <-ch
		if ctx.Err() != nil {
			return session.Answer{}, ctx.Err()
		}
		if a := take(g); a != nil {
			return *a, nil
		}
	}
	if ended {
		// The other boxes' waits are cancelled, and their answers read:
		// one that failed before is unreachable, not unanswered, and
		// one that ended as well is an end too.
		cancel()
		for ; n < len(order); n++ {
			if a := take(<-ch); a != nil {
				return *a, nil
			}
		}
	}
	if len(done) == 0 {
		return failureRetry(wire.Unreachable, "no box of this wait could be reached: "+describeAway(gone)), nil
	}
	if all && len(gone) > 0 {
		// Every one cannot be said to have ended while a box's runs are
		// unknown: no answer that a program could read as "all ended".
		return failureRetry(wire.Unreachable, fmt.Sprintf("%s could not be asked whether its runs ended (wait again: runs that ended answer at once)", describeAway(gone))), nil
	}
	// The boxes whose wait was cancelled for the end had not answered:
	// whether their runs ended is not known.
	var unanswered []string
	for _, i := range order {
		if pending[i] {
			for _, n := range groups[i] {
				unanswered = append(unanswered, n+"@"+f.boxes[i].Name)
			}
		}
	}
	return f.merged(done, unanswered, gone, all), nil
}

// runEnd are the fields of a wait's answer that say a run's end beside
// it (process_wait's RunEnd), which ends[] entries carry too.
var runEnd = []string{"duration_ms", "output_tail", "stderr_tail", "output_tail_offset", "stderr_tail_offset", "output_tail_whole", "output_tail_cut", "cleaned_bytes"}

// merged is the boxes' answers as one: the first run to end is run, and
// every other end is in ends; the runs of boxes whose wait
// timed out are running; the names of boxes that had not answered when
// the first end came are unanswered: not known to have ended, nor not to.
func (f *Fleet) merged(done []boxWait, unanswered []string, gone []away, all bool) session.Answer {
	base := 0
	for k, w := range done {
		if !w.timedOut() {
			base = k
			break
		}
	}
	sc := done[base].sc
	var ends []json.RawMessage
	_ = json.Unmarshal(sc["ends"], &ends)
	running := done[base].running()
	timedOut := done[base].timedOut()
	texts := []string{"box " + f.boxes[done[base].box].Name + ": " + done[base].res.text()}
	for k, w := range done {
		if k == base {
			continue
		}
		texts = append(texts, "box "+f.boxes[w.box].Name+": "+w.res.text())
		var more []json.RawMessage
		_ = json.Unmarshal(w.sc["ends"], &more)
		if w.timedOut() {
			// With all, the wait is not over while a run is still going;
			// without, one end is its answer.
			timedOut = timedOut || all
		}
		var run struct {
			Name  string `json:"name"`
			State string `json:"state"`
		}
		_ = json.Unmarshal(w.sc["run"], &run)
		switch {
		case run.Name == "":
		case run.State == "running":
			// A wait that timed out names a run still going as its run
			// (without all; with all, its run is the first that ended).
			if !contains(w.running(), run.Name+"@"+f.boxes[w.box].Name) {
				running = append(running, run.Name+"@"+f.boxes[w.box].Name)
			}
		default:
			end := map[string]json.RawMessage{"run": w.sc["run"]}
			for _, k := range runEnd {
				if v, ok := w.sc[k]; ok {
					end[k] = v
				}
			}
			b, _ := json.Marshal(end)
			ends = append(ends, b)
		}
		ends = append(ends, more...)
		running = append(running, w.running()...)
	}
	if len(unanswered) > 0 {
		sc["unanswered"], _ = json.Marshal(unanswered)
	}
	if len(ends) > 0 {
		sc["ends"], _ = json.Marshal(ends)
	}
	if len(running) > 0 {
		sc["running"], _ = json.Marshal(running)
	}
	sc["wait_timed_out"], _ = json.Marshal(timedOut)
	if len(gone) > 0 {
		sc["unreachable"], _ = json.Marshal(gone)
	}
	b, _ := json.Marshal(sc)
	text := strings.Join(texts, "\n")
	if len(unanswered) > 0 {
		text += "\nno answer yet, when this end came, about: " + strings.Join(unanswered, ", ")
	}
	return answer(result{Content: []content{{Type: "text", Text: text + unreachableText(gone)}}, Structured: b})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func unreachableText(gone []away) string {
	var b strings.Builder
	for _, a := range gone {
		fmt.Fprintf(&b, "\nunreachable: %s (%s)", a.Box, a.Reason)
	}
	return b.String()
}

// refusal says whether a box's failure code is a refusal of the wait as
// asked (the caller's to correct), not a failure of the box.
func refusal(code wire.Code) bool {
	return code == wire.InvalidArgument || code == wire.NoSuchRun
}

// monotonic passes on the progress of several boxes' waits under one
// token only as it grows, as MCP requires of a token's progress; stop
// ends it, so that none follows the answer (a box's call may still be
// ending).
func monotonic(fn func([]byte)) (progress func([]byte), stop func()) {
	if fn == nil {
		return nil, func() {}
	}
	var mu sync.Mutex
	var last float64
	sent, stopped := false, false
	progress = func(line []byte) {
		var m struct {
			Params struct {
				Progress float64 `json:"progress"`
			} `json:"params"`
		}
		if json.Unmarshal(line, &m) != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if stopped || (sent && m.Params.Progress <= last) {
			return
		}
		last, sent = m.Params.Progress, true
		fn(line)
	}
	stop = func() {
		mu.Lock()
		stopped = true
		mu.Unlock()
	}
	return progress, stop
}

// ownNames lets a process_wait given box name its runs NAME@BOX in
// names too, as long as BOX is that box (CallTool reads name's).
func (c call) ownNames(box string) error {
	strip := func(n string) (string, error) {
		run, b, at := strings.Cut(n, "@")
		if at && b != box {
			return "", fmt.Errorf("%q is not on box %s: leave box out to wait across boxes", n, box)
		}
		return run, nil
	}
	var names []string
	if raw, ok := c.args["names"]; ok && json.Unmarshal(raw, &names) == nil {
		for i, n := range names {
			run, err := strip(n)
			if err != nil {
				return err
			}
			names[i] = run
		}
		c.args["names"], _ = json.Marshal(names)
	}
	return nil
}
