package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/agent-box/agent-box/session"
)

// fakeBox is a box's tools as the watch calls them: runs that start and
// end, numbered by a sequence; a cursor is the sequence number an answer
// was made at.
type fakeBox struct {
	mu      sync.Mutex
	seq     int
	runs    []*fakeRun
	changed chan struct{} // closed at every change, for process_wait
	calls   map[string]int
	down    bool // every call fails as a box that cannot be reached
	// refuseCursors: changed_since is refused, as by a box that has none.
	refuseCursors bool
	// beforeChanges, if set, runs before a changed_since is answered;
	// onTail before a tail_log is.
	beforeChanges, onTail func()
}

type fakeRun struct {
	name, id      string
	started, done int // sequence numbers; done 0: running
	exitCode      int
	output        string
}

var _ session.Caller = (*fakeBox)(nil)

func newFakeBox() *fakeBox {
	return &fakeBox{changed: make(chan struct{}), calls: map[string]int{}}
}

func (b *fakeBox) tools(name string) session.Tools { return session.Tools{Caller: b, Box: name} }

func (b *fakeBox) bump() {
	b.seq++
	close(b.changed)
	b.changed = make(chan struct{})
}

func (b *fakeBox) start(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bump()
	b.runs = append(b.runs, &fakeRun{name: name, id: fmt.Sprintf("id%d", b.seq), started: b.seq})
}

func (b *fakeBox) end(name string, code int, output string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bump()
	for _, r := range b.runs {
		if r.name == name && r.done == 0 {
			r.done, r.exitCode, r.output = b.seq, code, output
		}
	}
}

func (b *fakeBox) setDown(down bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.down = down
}

func (b *fakeBox) count(tool string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls[tool]
}

func (r *fakeRun) view() map[string]any {
	v := map[string]any{"name": r.name, "run_id": r.id, "state": "running", "reason": "", "log_bytes": 0,
		"started_at": "2026-01-01T00:00:00Z"}
	if r.done != 0 {
		v["state"] = "exited"
		v["exit_code"] = r.exitCode
		v["finished_at"] = "2026-01-01T00:01:05Z"
	}
	return v
}

func (b *fakeBox) CallTool(ctx context.Context, params json.RawMessage, _ func([]byte)) (session.Answer, error) {
	var p struct {
		Name      string `json:"name"`
		Arguments struct {
			ChangedSince string   `json:"changed_since"`
			State        string   `json:"state"`
			Names        []string `json:"names"`
			TimeoutMS    int64    `json:"timeout_ms"`
			Name         string   `json:"name"`
			RunID        string   `json:"run_id"`
		} `json:"arguments"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return session.Answer{}, err
	}
	b.mu.Lock()
	b.calls[p.Name]++
	if b.down {
		b.mu.Unlock()
		return session.Answer{}, fmt.Errorf("%w: ssh: connect to host fake: Connection refused", session.ErrUnreachable)
	}
	a := p.Arguments
	if p.Name == "process_list" && a.ChangedSince != "" && b.beforeChanges != nil {
		hook := b.beforeChanges
		b.mu.Unlock()
		hook()
		b.mu.Lock()
	}
	var out any
	switch p.Name {
	case "process_list":
		runs := []map[string]any{}
		since, err := strconv.Atoi(a.ChangedSince)
		if a.ChangedSince != "" && (err != nil || b.refuseCursors) {
			b.mu.Unlock()
			return toolError("invalid_argument", "changed_since is not a cursor"), nil
		}
		for _, r := range b.runs {
			switch {
			case a.ChangedSince != "" && (r.started > since || r.done > since):
				runs = append(runs, r.view())
			case a.State == "running" && r.done == 0:
				runs = append(runs, r.view())
			}
		}
		out = map[string]any{"runs": runs, "total": len(runs), "cursor": strconv.Itoa(b.seq)}
	case "process_wait":
		changed := b.changed
		b.mu.Unlock()
		timer := time.NewTimer(time.Duration(a.TimeoutMS) * time.Millisecond)
		defer timer.Stop()
		timedOut := false
		select {
		case <-changed:
		case <-timer.C:
			timedOut = true
		case <-ctx.Done():
			return session.Answer{}, ctx.Err()
		}
		b.mu.Lock()
		out = map[string]any{"wait_timed_out": timedOut, "output_tail": ""}
	case "tail_log":
		if b.onTail != nil {
			b.onTail()
		}
		for _, r := range b.runs {
			if r.id == a.RunID {
				out = map[string]any{"content": r.output}
			}
		}
	default:
		b.mu.Unlock()
		return toolError("invalid_argument", "no tool "+p.Name), nil
	}
	b.mu.Unlock()
	return answer(out, false), nil
}

func answer(structured any, isError bool) session.Answer {
	res, _ := json.Marshal(map[string]any{"structuredContent": structured, "isError": isError,
		"content": []map[string]any{{"type": "text", "text": "text"}}})
	return session.Answer{Result: res}
}

func toolError(code, msg string) session.Answer {
	return answer(map[string]any{"error": map[string]any{"code": code, "message": msg, "retryable": false}}, true)
}
