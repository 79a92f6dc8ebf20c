package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agent-box/agent-box/session"
	"github.com/agent-box/agent-box/wire"
)

// fakeBox is a box that keeps its runs in memory and answers the run tools
// in the shapes a real box does (tools/schemas/*.out.json, and a real box's
// answers): enough of each tool for the fleet's routing, no more.
type fakeBox struct {
	name string

	mu      sync.Mutex
	runs    []*fakeRun
	gen     int           // bumped by every start and end: the cursor
	changed chan struct{} // closed and replaced at every change
	calls   []seen
	// fail, when set, is every call's error (a box that cannot be reached).
	fail error
	// hang makes every call block until its ctx is done.
	hang bool
	// cancelled counts the calls that ended because their ctx was done,
	// and ended tells of each (never blocks).
	cancelled int
	ended     chan struct{}

	entered  chan string   // a call's tool, as it starts (never blocks)
	progress chan progPush // process_wait sends these to its caller
	expire   chan struct{} // a process_wait in progress times out now
	returned chan string   // a call's tool, as it returns (never blocks)
}

type fakeRun struct {
	name, id, state string
	gen             int
	output          string
}

// seen is one call a box got: its tool and the arguments it saw.
type seen struct {
	tool string
	args map[string]any
}

type progPush struct {
	progress float64
	done     chan struct{}
}

func newFakeBox(name string) *fakeBox {
	return &fakeBox{name: name, changed: make(chan struct{}), entered: make(chan string, 1000), progress: make(chan progPush), expire: make(chan struct{}), returned: make(chan string, 1000), ended: make(chan struct{}, 1000)}
}

// runID is a run id as a box makes them; they sort by start time, so sec
// orders runs across boxes.
func runID(sec int, box string) string {
	return fmt.Sprintf("20260101T0000%02d.000000000Z-%s", sec, box)
}

// start adds a running run of name, started at second sec.
func (b *fakeBox) start(name string, sec int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gen++
	id := runID(sec, b.name)
	b.runs = append(b.runs, &fakeRun{name: name, id: id, state: "running", gen: b.gen, output: name + " says hi\n"})
	b.bump()
	return id
}

// end makes the newest run of name exit.
func (b *fakeBox) end(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.newest(name)
	b.gen++
	r.state, r.gen = "exited", b.gen
	b.bump()
}

func (b *fakeBox) bump() {
	close(b.changed)
	b.changed = make(chan struct{})
}

func (b *fakeBox) setFail(err error) {
	b.mu.Lock()
	b.fail = err
	b.mu.Unlock()
}

func (b *fakeBox) setHang(h bool) {
	b.mu.Lock()
	b.hang = h
	b.mu.Unlock()
}

func (b *fakeBox) cancel() {
	b.mu.Lock()
	b.cancelled++
	b.mu.Unlock()
	select {
	case b.ended <- struct{}{}:
	default:
	}
}

func (b *fakeBox) cancels() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cancelled
}

// got are the calls of tool the box got, in order.
func (b *fakeBox) got(tool string) []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, c := range b.calls {
		if c.tool == tool {
			out = append(out, c.args)
		}
	}
	return out
}

func (b *fakeBox) newest(name string) *fakeRun {
	var best *fakeRun
	for _, r := range b.runs {
		if r.name == name && (best == nil || r.id > best.id) {
			best = r
		}
	}
	return best
}

func (r *fakeRun) wire() map[string]any {
	m := map[string]any{"name": r.name, "run_id": r.id, "state": r.state, "reason": "running", "log_bytes": len(r.output), "pid": 100}
	if r.state == "exited" {
		m["reason"], m["exit_code"] = "exit code 0", 0
	}
	return m
}

func (r *fakeRun) line() string {
	return fmt.Sprintf("%s run_id=%s state=%s pid=100 log_bytes=%d", r.name, r.id, r.state, len(r.output))
}

func ok(text string, sc any) session.Answer {
	b, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}, "structuredContent": sc})
	return session.Answer{Result: b}
}

func toolErr(code wire.Code, msg string) session.Answer {
	b, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": msg}}, "isError": true,
		"structuredContent": map[string]any{"error": map[string]any{"code": code, "message": msg, "retryable": false}}})
	return session.Answer{Result: b}
}

func noSuchRun(name string) session.Answer {
	return toolErr(wire.NoSuchRun, fmt.Sprintf("no such run: no run named %q (process_list shows the runs there are)", name))
}

// CallTool answers one tools/call as a box would.
func (b *fakeBox) CallTool(ctx context.Context, params json.RawMessage, progress func(line []byte)) (session.Answer, error) {
	var p struct {
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
		Meta      struct {
			Token any `json:"progressToken"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return session.Answer{}, err
	}
	defer func() {
		select {
		case b.returned <- p.Name:
		default:
		}
	}()
	b.mu.Lock()
	b.calls = append(b.calls, seen{p.Name, p.Arguments})
	fail, hang := b.fail, b.hang
	b.mu.Unlock()
	select {
	case b.entered <- p.Name:
	default:
	}
	if fail != nil {
		return session.Answer{}, fail
	}
	if hang {
		<-ctx.Done()
		b.cancel()
		return session.Answer{}, ctx.Err()
	}
	a := p.Arguments
	s := func(k string) string { v, _ := a[k].(string); return v }
	switch p.Name {
	case "process_list":
		return b.list(a, s), nil
	case "process_wait":
		return b.wait(ctx, a, s, p.Meta.Token, progress)
	case "tail_log":
		b.mu.Lock()
		defer b.mu.Unlock()
		r := b.newest(s("name"))
		if r == nil {
			return noSuchRun(s("name")), nil
		}
		return ok(fmt.Sprintf("[%s state=%s log bytes 0..%d of %d eof]\n%s", r.name, r.state, len(r.output), len(r.output), r.output),
			map[string]any{"name": r.name, "run_id": r.id, "content": r.output, "encoding": "text", "offset": 0, "end_offset": len(r.output),
				"truncated": false, "eof": true, "state": r.state, "reason": r.wire()["reason"], "log_bytes": len(r.output)}), nil
	case "process_kill":
		b.mu.Lock()
		r := b.newest(s("name"))
		b.mu.Unlock()
		if r == nil {
			return noSuchRun(s("name")), nil
		}
		b.end(r.name)
		b.mu.Lock()
		defer b.mu.Unlock()
		return ok(r.name+": sent SIGTERM to process group 100; now exited (killed by SIGTERM)",
			map[string]any{"run": r.wire(), "signal": "SIGTERM", "signalled_groups": []int{100}, "message": "sent SIGTERM to process group 100"}), nil
	case "process_start":
		b.mu.Lock()
		if r := b.newest(s("name")); r != nil && r.state == "running" {
			b.mu.Unlock()
			return toolErr(wire.NameInUse, fmt.Sprintf("name in use: %s is running", r.name)), nil
		}
		sec := len(b.runs) + 50
		b.mu.Unlock()
		b.start(s("name"), sec)
		b.mu.Lock()
		defer b.mu.Unlock()
		r := b.newest(s("name"))
		return ok("started "+r.name+" running pid=100", map[string]any{"run": r.wire()}), nil
	}
	return toolErr(wire.InvalidArgument, "invalid argument: unknown tool "+p.Name), nil
}

func (b *fakeBox) list(a map[string]any, s func(string) string) session.Answer {
	b.mu.Lock()
	defer b.mu.Unlock()
	if st := s("state"); st != "" && !slices.Contains([]string{"running", "exited", "unknown"}, st) {
		return toolErr(wire.InvalidArgument, fmt.Sprintf("invalid argument: state %q is not one of running, exited, unknown", st))
	}
	since := -1
	if c := s("changed_since"); c != "" {
		for _, k := range []string{"name", "all", "limit", "before", "state"} {
			if _, ok := a[k]; ok {
				return toolErr(wire.InvalidArgument, "invalid argument: changed_since lists every run that changed, of every name; give it alone")
			}
		}
		n, err := strconv.Atoi(strings.TrimPrefix(c, "c1."))
		if !strings.HasPrefix(c, "c1.") || err != nil {
			return toolErr(wire.InvalidArgument, "invalid argument: changed_since is not a cursor of process_list (pass the cursor field of an earlier answer unchanged)")
		}
		since = n
	}
	all, _ := a["all"].(bool)
	var runs []*fakeRun
	for _, r := range b.runs {
		if !all && since < 0 && b.newest(r.name) != r {
			continue // without all, a name's newest run only
		}
		if (s("name") == "" || r.name == s("name")) && (s("state") == "" || r.state == s("state")) && r.gen > since {
			runs = append(runs, r)
		}
	}
	if s("name") != "" && len(runs) == 0 && since < 0 {
		// As a box answers: a name it has no run of is no list.
		return toolErr(wire.NoSuchRun, fmt.Sprintf("no such run: no run named %q", s("name")))
	}
	slices.SortFunc(runs, func(x, y *fakeRun) int { return strings.Compare(y.id, x.id) })
	total := len(runs)
	if before := s("before"); before != "" {
		runs = slices.DeleteFunc(runs, func(r *fakeRun) bool { return r.id >= before })
	}
	limit := 100
	if l, ok := a["limit"].(float64); ok {
		limit = int(l)
	}
	next := ""
	if len(runs) > limit {
		runs = runs[:limit]
		next = runs[len(runs)-1].id
	}
	cursor := "c1." + strconv.Itoa(b.gen)
	var text strings.Builder
	if next != "" {
		fmt.Fprintf(&text, "%d of %d runs, the newest; older ones: process_list with before=%s\n", len(runs), total, next)
	}
	fmt.Fprintf(&text, "%d run(s):", len(runs))
	wireRuns := []any{}
	for _, r := range runs {
		text.WriteString("\n" + r.line())
		wireRuns = append(wireRuns, r.wire())
	}
	text.WriteString("\ncursor=" + cursor + " (process_list changed_since=cursor lists what starts or ends after this)")
	sc := map[string]any{"runs": wireRuns, "total": total, "cursor": cursor}
	if next != "" {
		sc["next_before"] = next
	}
	return ok(text.String(), sc)
}

// wait is process_wait: name or names, all, timeout_ms.
func (b *fakeBox) wait(ctx context.Context, a map[string]any, s func(string) string, token any, progress func([]byte)) (session.Answer, error) {
	names := []string{}
	if n := s("name"); n != "" {
		names = append(names, n)
	}
	if ns, ok := a["names"].([]any); ok {
		for _, n := range ns {
			names = append(names, n.(string))
		}
	}
	all, _ := a["all"].(bool)
	timeout := time.Hour
	if ms, ok := a["timeout_ms"].(float64); ok {
		timeout = time.Duration(ms) * time.Millisecond
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	b.mu.Lock()
	for _, n := range names {
		if b.newest(n) == nil {
			b.mu.Unlock()
			return noSuchRun(n), nil
		}
	}
	b.mu.Unlock()
	timedOut := false
	for {
		b.mu.Lock()
		var ended, running []*fakeRun
		for _, n := range names {
			if r := b.newest(n); r.state == "exited" {
				ended = append(ended, r)
			} else {
				running = append(running, r)
			}
		}
		changed := b.changed
		b.mu.Unlock()
		if (len(ended) > 0 && (!all || len(running) == 0)) || timedOut {
			return waitAnswer(ended, running, timedOut), nil
		}
		select {
		case <-changed:
		case <-timer.C:
			timedOut = true
		case <-b.expire:
			timedOut = true
		case p := <-b.progress:
			if progress != nil && token != nil {
				line, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress",
					"params": map[string]any{"progressToken": token, "progress": p.progress, "message": "waiting on " + b.name}})
				progress(line)
			}
			close(p.done)
		case <-ctx.Done():
			b.cancel()
			return session.Answer{}, ctx.Err()
		}
	}
}

func waitAnswer(ended, running []*fakeRun, timedOut bool) session.Answer {
	sc := map[string]any{"wait_timed_out": timedOut}
	var text strings.Builder
	if len(ended) == 0 {
		r := running[0]
		running = running[1:]
		sc["run"], sc["output_tail"] = r.wire(), ""
		text.WriteString("still running after waiting; call process_wait again to keep waiting\n" + r.name + " running pid=100")
	} else {
		r := ended[0]
		sc["run"], sc["output_tail"], sc["duration_ms"] = r.wire(), r.output, 5
		fmt.Fprintf(&text, "%s exited (code 0) after 5ms\n%s", r.name, r.output)
		var ends []any
		for _, e := range ended[1:] {
			ends = append(ends, map[string]any{"run": e.wire(), "output_tail": e.output, "duration_ms": 5})
			fmt.Fprintf(&text, "%s exited (code 0) after 5ms\n%s", e.name, e.output)
		}
		if ends != nil {
			sc["ends"] = ends
		}
	}
	if len(running) > 0 {
		var names []string
		var others []any
		for _, r := range running {
			names = append(names, r.name)
			others = append(others, r.wire())
		}
		sc["running"], sc["others"] = names, others
		text.WriteString("still running: " + strings.Join(names, ", ") + "\n")
	}
	return ok(text.String(), sc)
}
