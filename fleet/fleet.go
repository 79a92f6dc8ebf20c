// Package fleet is many boxes behind one tool list: the box's own tools,
// each taking box, and calls routed to the box they name or fanned out to
// every box and merged (process_list, process_wait).
//
// It is local side: it reaches each box through a session.Caller (a
// reconnecting session, or a box called in process) and knows agent-box's
// tools only by their wire form. One box needs no fleet: connect relays
// it unchanged.
//
// A run's name may be NAME@BOX, as answers name runs: that is box BOX.
// The rules, for a call without box:
//   - process_start needs box.
//   - process_list covers every box: runs carry box, a box that does not
//     answer within Timeout is listed under unreachable, and the cursor
//     covers every box (cursor.go).
//   - process_wait covers the boxes of its names (NAME@BOX, or a NAME
//     that only one box has): the first to end on any box, or with all
//     every one (wait.go).
//   - Every other tool acts on a run of name: it goes to the box of its
//     run_id when an answer showed that run, else to the one box that
//     has a run of that name. When several have, the call says which and
//     asks for box. When a box cannot be reached it might have one too, so
//     only a look (tail_log) goes ahead; a change (process_kill, …) asks
//     for box: trust over convenience.
package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/agent-box/agent-box/session"
	"github.com/agent-box/agent-box/wire"
)

// Box is one box of a fleet.
type Box struct {
	Name   string // what box takes, and answers say
	Caller session.Caller
}

// Fleet routes tool calls to its boxes. It is a session.Caller itself, so
// the CLI and watch reach a fleet as they reach one box.
type Fleet struct {
	boxes []Box
	index map[string]int
	// runBox is the box of each run id seen in an answer: a look that
	// names a run by its id (a CLI's follow pins one) goes to its box
	// without asking every box. Run ids are made unique (a time to the
	// nanosecond and random bits), but boxes cloned with their state dir
	// share them: an id seen on two boxes routes nothing (-1), and a
	// change is never routed so, it asks every box.
	mu     sync.Mutex
	runBox map[string]int
	// Timeout bounds one box's part of a call that asks every box
	// (process_list, finding which box has a run): a box that has not
	// answered by then is unreachable for that call, and holds back no
	// other. Default DefaultTimeout.
	Timeout time.Duration
}

// DefaultTimeout is Fleet.Timeout's default: well under the minute
// clients give a request, and above a session's redial of a box that
// dropped.
const DefaultTimeout = 15 * time.Second

// namePattern is a box name: a run name's alphabet, so NAME@BOX splits at
// its one @.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// CheckName says whether name can name a box.
func CheckName(name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("box name %q: use letters, digits, '.', '_' and '-', at most 64, starting with a letter or digit", name)
	}
	return nil
}

// New is a fleet of boxes, in the order given (answers list them so).
func New(boxes []Box) (*Fleet, error) {
	f := &Fleet{boxes: boxes, index: map[string]int{}}
	for i, b := range boxes {
		if err := CheckName(b.Name); err != nil {
			return nil, err
		}
		if _, dup := f.index[b.Name]; dup {
			return nil, fmt.Errorf("box name %q is given twice", b.Name)
		}
		f.index[b.Name] = i
	}
	if len(boxes) == 0 {
		return nil, errors.New("a fleet needs a box")
	}
	return f, nil
}

// Names are the boxes' names, in order.
func (f *Fleet) Names() []string {
	names := make([]string, len(f.boxes))
	for i, b := range f.boxes {
		names[i] = b.Name
	}
	return names
}

func (f *Fleet) timeout() time.Duration {
	if f.Timeout > 0 {
		return f.Timeout
	}
	return DefaultTimeout
}

// looks are the tools that change nothing on a box: one may go to the
// only reachable box with a run of its name.
var looks = map[string]bool{"tail_log": true, "process_wait": true}

// CallTool routes one tools/call (params as a client gives them).
func (f *Fleet) CallTool(ctx context.Context, params json.RawMessage, progress func(line []byte)) (session.Answer, error) {
	c, err := parseCall(params)
	if err != nil {
		return failure(wire.InvalidArgument, "invalid argument: "+err.Error()), nil
	}
	box, given, err := c.take("box")
	if err != nil {
		return failure(wire.InvalidArgument, "invalid argument: box must be a string (one of "+f.list()+")"), nil
	}
	// A run named NAME@BOX, as answers name them, is on BOX.
	if name, ok, err := c.str("name"); err == nil && ok {
		if run, on, at := strings.Cut(name, "@"); at {
			if given && on != box {
				return failure(wire.InvalidArgument, fmt.Sprintf("invalid argument: name %q says box %s, and box says %s", name, on, box)), nil
			}
			c.args["name"] = mustString(run)
			box, given = on, true
		}
	}
	if given {
		i, ok := f.index[box]
		if !ok {
			return failure(wire.InvalidArgument, fmt.Sprintf("invalid argument: there is no box %q: box is one of %s", box, f.list())), nil
		}
		return f.one(ctx, i, c, progress)
	}
	switch c.tool {
	case "process_list":
		return f.listAll(ctx, c)
	case "process_wait":
		return f.wait(ctx, c, progress)
	case "process_start":
		return failure(wire.InvalidArgument, "invalid argument: process_start needs box: one of "+f.list()), nil
	}
	name, ok, err := c.str("name")
	if err != nil || !ok || name == "" {
		// Without a run's name there is nothing to find a box by
		// (process_remove all_finished, a mistake): the box must be said.
		return failure(wire.InvalidArgument, fmt.Sprintf("invalid argument: %s without name needs box: one of %s", c.tool, f.list())), nil
	}
	return f.byName(ctx, c, name, progress)
}

// byName sends a call on the run name to its box: the box of its run_id
// if an answer showed that run, else the one box with a run of name.
func (f *Fleet) byName(ctx context.Context, c call, name string, progress func([]byte)) (session.Answer, error) {
	if id, ok, err := c.str("run_id"); err == nil && ok && looks[c.tool] {
		if i, seen := f.boxOfRun(id); seen {
			return f.one(ctx, i, c, progress)
		}
	}
	i, fail := f.find(ctx, c.tool, name)
	if ctx.Err() != nil {
		return session.Answer{}, ctx.Err()
	}
	if fail != nil {
		return *fail, nil
	}
	return f.one(ctx, i, c, progress)
}

// one sends the call to box i, and says the box in the answer.
func (f *Fleet) one(ctx context.Context, i int, c call, progress func([]byte)) (session.Answer, error) {
	b := f.boxes[i]
	if c.tool == "process_list" {
		if err := c.boxCursor(b.Name); err != nil {
			return failure(wire.InvalidArgument, "invalid argument: "+err.Error()), nil
		}
	}
	if c.tool == "process_wait" {
		if err := c.ownNames(b.Name); err != nil {
			return failure(wire.InvalidArgument, "invalid argument: "+err.Error()), nil
		}
	}
	ans, err := b.Caller.CallTool(ctx, c.params(), progress)
	if err != nil || ans.Error != nil {
		return ans, err
	}
	r, ids := decorate(ans.Result, b.Name)
	f.learn(i, ids)
	return answer(r), nil
}

// maxRunBox bounds what runBox holds; past it, it starts again.
const maxRunBox = 1 << 14

// learn keeps the box of run ids seen in its answers.
func (f *Fleet) learn(i int, ids []string) {
	if len(ids) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(ids) > maxRunBox {
		ids = ids[:maxRunBox]
	}
	if f.runBox == nil || len(f.runBox)+len(ids) > maxRunBox {
		f.runBox = map[string]int{}
	}
	for _, id := range ids {
		box := i
		if was, ok := f.runBox[id]; ok && was != i {
			box = -1 // on two boxes: no route
		}
		f.runBox[id] = box
	}
}

// boxOfRun is the box of a run id seen before.
func (f *Fleet) boxOfRun(id string) (int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i, ok := f.runBox[id]
	return i, ok && i >= 0
}

// find is the box with a run of name, or the answer that says why there
// is not exactly one.
func (f *Fleet) find(ctx context.Context, tool, name string) (int, *session.Answer) {
	have, away, fail := f.holders(ctx, []string{name})
	if fail != nil {
		return 0, fail
	}
	on := have[name]
	switch {
	case len(on) > 1:
		a := failure(wire.InvalidArgument, fmt.Sprintf("invalid argument: runs named %q are on boxes %s: give box", name, f.join(on)))
		return 0, &a
	case len(on) == 1 && (len(away) == 0 || looks[tool]):
		return on[0], nil
	case len(on) == 1:
		a := failure(wire.InvalidArgument, fmt.Sprintf("invalid argument: a run named %q is on %s, and %s could not be asked whether it has one too: give box",
			name, f.boxes[on[0]].Name, describeAway(away)))
		return 0, &a
	case len(away) > 0:
		a := failureRetry(wire.Unreachable, fmt.Sprintf("no box that answered has a run named %q, and %s could not be asked", name, describeAway(away)))
		return 0, &a
	}
	a := failure(wire.NoSuchRun, fmt.Sprintf("no such run: no run named %q on any box (process_list shows the runs there are)", name))
	return 0, &a
}

// away is a box that could not be asked, and why.
type away struct {
	Box    string `json:"box"`
	Reason string `json:"reason"`
}

func describeAway(a []away) string {
	parts := make([]string, len(a))
	for i, x := range a {
		parts[i] = x.Box + " (" + x.Reason + ")"
	}
	return strings.Join(parts, ", ")
}

// holders asks every box which of names it has a run of: the boxes of
// each name, in the fleet's order, and the boxes that could not be asked.
// A box's refusal of the question (a name no box could have) is the
// answer.
func (f *Fleet) holders(ctx context.Context, names []string) (map[string][]int, []away, *session.Answer) {
	type key struct{ box, name int }
	var mu sync.Mutex
	found := map[key]bool{}
	failed := map[int]string{}
	var refused *session.Answer
	f.each(ctx, f.all(), func(ctx context.Context, i int) {
		for n, name := range names {
			args, _ := json.Marshal(map[string]any{"name": name, "limit": 1})
			var out struct {
				Total int `json:"total"`
			}
			ans, err := f.boxes[i].Caller.CallTool(ctx, toolParams("process_list", args), nil)
			res, rerr := parseAnswer(ans, err)
			mu.Lock()
			switch {
			case rerr != nil:
				failed[i] = f.reason(ctx, i, rerr)
			case res.IsError && res.code() == wire.NoSuchRun:
				// Not here: a box that has no run of a name says so.
			case res.IsError && res.code() == wire.InvalidArgument:
				a := answer(prefixed(res, f.boxes[i].Name))
				refused = &a
			case res.IsError:
				failed[i] = res.message()
			case json.Unmarshal(res.Structured, &out) == nil && out.Total > 0:
				found[key{i, n}] = true
			}
			stop := failed[i] != "" || refused != nil
			mu.Unlock()
			if stop {
				return
			}
		}
	})
	if refused != nil {
		return nil, nil, refused
	}
	have := map[string][]int{}
	var gone []away
	for i := range f.boxes {
		if r, ok := failed[i]; ok {
			gone = append(gone, away{Box: f.boxes[i].Name, Reason: r})
			continue
		}
		for n, name := range names {
			if found[key{i, n}] {
				have[name] = append(have[name], i)
			}
		}
	}
	return have, gone, nil
}

// reason is why box i's part of a call failed, in words for the model,
// which see the box's name beside it.
func (f *Fleet) reason(ctx context.Context, i int, err error) string {
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		return fmt.Sprintf("no answer in %s", f.timeout())
	}
	// A session's "box unreachable: NAME: " says again what unreachable
	// and the box's name beside it say.
	return strings.TrimPrefix(err.Error(), session.ErrUnreachable.Error()+": "+f.boxes[i].Name+": ")
}

// each runs fn for the boxes idx in parallel, each bounded by Timeout,
// and returns when all have.
func (f *Fleet) each(ctx context.Context, idx []int, fn func(ctx context.Context, i int)) {
	var wg sync.WaitGroup
	for _, i := range idx {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, f.timeout())
			defer cancel()
			fn(ctx, i)
		}()
	}
	wg.Wait()
}

func (f *Fleet) all() []int {
	idx := make([]int, len(f.boxes))
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// list is the boxes' names for a message.
func (f *Fleet) list() string { return strings.Join(f.Names(), ", ") }

// join is the names of boxes idx.
func (f *Fleet) join(idx []int) string {
	names := make([]string, len(idx))
	for k, i := range idx {
		names[k] = f.boxes[i].Name
	}
	return strings.Join(names, " and ")
}
