// Package watch is agent-box watch: it waits until a run ends on any of
// the boxes it is given that its cursor file has not reported yet, writes
// one line per ended run, and then advances the cursor file. It is the
// program an agent's hook runs to wake the model when a background run
// ends, also one that ended while no agent was there
// (docs/architecture/README.md, "agent-box watch").
//
// Caveats: every end is reported at least once, never twice by watches
// that share a cursor file; the cursor is written only after the report
// was, so a watch killed in between reports the same end again next time.
// A box's cursor is process_list's; a saved cursor the box refuses (one
// that is not a cursor, as an edited file holds) is said, and that box is
// watched from now.
//
// It speaks to the boxes only through session.Tools (MCP tools by name),
// so it builds on macOS too.
package watch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agent-box/agent-box/session"
	"github.com/agent-box/agent-box/wire"
)

// Options are a watch's boxes, cursor file and ways.
type Options struct {
	Boxes []session.Tools // each keyed in the cursor file by its Box
	// CursorFile holds a cursor per box; CursorFile.lock and
	// CursorFile.owner are its sidecars.
	CursorFile string
	// NoWait: look once, report what ended, and return.
	NoWait bool
	// Report receives the report: one line per ended run, in one write.
	Report io.Writer
	// Diag receives what is not the report: a box that cannot be reached
	// (once per outage), a cursor a box rejects.
	Diag io.Writer

	// Poll bounds one wait on a box (default 5 s): a run started during a
	// wait is seen within it.
	Poll time.Duration
	// OwnerPoll is how often a blocking watch checks that it still owns
	// the cursor file (default 1 s).
	OwnerPoll time.Duration
	// MinBackoff and MaxBackoff bound the pause before a box that could
	// not be reached is tried again (default 1 s and 30 s).
	MinBackoff, MaxBackoff time.Duration
}

// Outcome is how a watch ended without an error.
type Outcome int

const (
	// Quiet: nothing to report (ctx ended: a signal, --max-wait; or
	// NoWait found nothing).
	Quiet Outcome = iota
	// Reported: the report was written and the cursor advanced.
	Reported
	// Superseded: a newer watch took the cursor file over.
	Superseded
)

// maxLastLine is how much of a run's last line of output a report shows.
const maxLastLine = 100

// maxTails bounds the tail_log calls of one report: past it, ended runs
// are reported without their last line.
const maxTails = 20

// Run watches until something is reported (Reported), a newer watch took
// the cursor file over (Superseded), or ctx ends (Quiet). An error is the
// watch's own failure (the cursor file cannot be read or written, the
// report cannot be written); a box that cannot be reached is none.
//
// A blocking watch (not NoWait) takes ownership of the cursor file first.
func Run(ctx context.Context, o Options) (Outcome, error) {
	if o.Poll <= 0 {
		o.Poll = 5 * time.Second
	}
	if o.OwnerPoll <= 0 {
		o.OwnerPoll = time.Second
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 30 * time.Second
	}
	if o.Diag == nil {
		o.Diag = io.Discard
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &watcher{o: o, st: store{o.CursorFile}, cancel: cancel}
	if !o.NoWait {
		unlock, err := w.st.lock(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return Quiet, nil
			}
			return Quiet, err
		}
		w.token, err = w.st.claim()
		unlock()
		if err != nil {
			return Quiet, fmt.Errorf("taking the cursor file over: %w", err)
		}
		go w.keepOwning(ctx)
	}
	var wg sync.WaitGroup
	for _, t := range o.Boxes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.watchBox(ctx, t)
		}()
	}
	wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.err != nil:
		return Quiet, w.err
	case w.reported:
		return Reported, nil
	case w.superseded:
		return Superseded, nil
	}
	return Quiet, nil
}

type watcher struct {
	o      Options
	st     store
	token  string // ownership of the cursor file; "" with NoWait
	cancel context.CancelFunc

	mu         sync.Mutex
	reported   bool
	superseded bool
	err        error
	diagMu     sync.Mutex
}

// finish ends the watch: every box's loop returns.
func (w *watcher) finish(f func()) {
	w.mu.Lock()
	f()
	w.mu.Unlock()
	w.cancel()
}

// keepOwning ends the watch once another watch owns the cursor file.
func (w *watcher) keepOwning(ctx context.Context) {
	tick := time.NewTicker(w.o.OwnerPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if owner, err := w.st.owner(); err == nil && owner != w.token {
			w.finish(func() { w.superseded = true })
			return
		}
	}
}

func (w *watcher) diag(format string, args ...any) {
	w.diagMu.Lock()
	defer w.diagMu.Unlock()
	fmt.Fprintf(w.o.Diag, "agent-box watch: "+format+"\n", args...)
}

// run is the part of a run that a report and the wait read.
type run struct {
	Name       string `json:"name"`
	RunID      string `json:"run_id"`
	State      string `json:"state"`
	Reason     string `json:"reason"`
	ExitCode   *int   `json:"exit_code"`
	Signal     string `json:"signal"`
	TimedOut   bool   `json:"timed_out"`
	OOMKilled  bool   `json:"oom_killed"`
	StartedAt  string `json:"started_at"`
	FinishedAt string `json:"finished_at"`
}

type listAnswer struct {
	Runs   []run  `json:"runs"`
	Cursor string `json:"cursor"`
}

// boxState is one box's loop's knowledge.
type boxState struct {
	t session.Tools
	// base is the cursor of the cursor file this loop's chain of
	// cursors began from; cur the newest of the chain. A look that finds
	// nothing ended moves cur on without writing the file: nothing was
	// reported, so the file's cursor still stands for everything since.
	base, cur string
	running   map[string]string // name: run id, of the runs known running
	down      bool              // in an outage, already said
	early     bool              // the last wait ended before its time
	issued    string            // the last cursor the box gave this loop
	backoff   time.Duration
}

// watchBox is one box's loop: look for ends since the cursor; report
// them, or wait for a known running run to end (at most Poll), and look
// again.
func (w *watcher) watchBox(ctx context.Context, t session.Tools) {
	b := &boxState{t: t}
	for ctx.Err() == nil {
		err := w.look(ctx, b)
		if err == nil {
			if w.o.NoWait {
				return
			}
			continue
		}
		if errors.Is(err, errDone) || ctx.Err() != nil {
			return
		}
		if errors.Is(err, errStale) {
			continue
		}
		var fatal *fatalError
		if errors.As(err, &fatal) {
			w.finish(func() {
				if w.err == nil {
					w.err = fatal.err
				}
			})
			return
		}
		if !b.down {
			b.down = true
			if w.o.NoWait {
				w.diag("%s: %v", t.Box, err)
			} else {
				w.diag("%s: %v (trying again; said once until it answers)", t.Box, err)
			}
		}
		if w.o.NoWait {
			return
		}
		b.backoff = min(max(2*b.backoff, w.o.MinBackoff), w.o.MaxBackoff)
		b.base, b.cur = "", "" // read afresh from the file once it answers
		if !sleep(ctx, b.backoff) {
			return
		}
	}
}

// errDone: this box's loop is over (it reported, or the watch ended).
var errDone = errors.New("done")

// errStale: look again from the file's cursor (another watch advanced
// it while this one looked, or this one dropped a cursor the box refused).
var errStale = errors.New("stale")

// fatalError is a failure of the watch itself.
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }

// look looks once: news since the cursor are reported (errDone), or it
// waits for a running run to end, at most Poll.
func (w *watcher) look(ctx context.Context, b *boxState) error {
	if b.base == "" {
		if err := w.begin(ctx, b); err != nil {
			return err
		}
	}
	var page listAnswer
	err := b.t.Call(ctx, "process_list", map[string]any{"changed_since": b.cur}, &page)
	var te *session.ToolError
	if errors.As(err, &te) && te.Err.Code == wire.InvalidArgument && b.cur != b.issued {
		// The box does not take the saved cursor: the file was edited,
		// or holds what no agent-box issued under this name. (One
		// it gave this loop is refused only by a box that cannot answer
		// changed_since at all: that is an outage of its own, said once.)
		w.diag("%s: the box does not take the saved cursor (%v); watching it from now", b.t.Box, err)
		return w.forget(ctx, b)
	}
	if err != nil {
		return err
	}
	b.down, b.backoff = false, 0
	var ended []run
	for _, r := range page.Runs {
		if r.State == "running" {
			b.running[r.Name] = r.RunID
			continue
		}
		ended = append(ended, r)
		if b.running[r.Name] == r.RunID {
			delete(b.running, r.Name)
		}
	}
	if len(ended) > 0 {
		return w.report(ctx, b, ended, page.Cursor)
	}
	b.cur, b.issued = page.Cursor, page.Cursor
	if w.o.NoWait {
		return nil
	}
	if b.early {
		// The last wait said a run ended, and the list says none did
		// (a name whose newest run is not the one known running): learn
		// the running runs afresh, after a pause that keeps such a
		// disagreement from spinning.
		b.early = false
		b.base, b.cur = "", ""
		sleep(ctx, w.o.Poll/10)
		return nil
	}
	return w.wait(ctx, b)
}

// begin starts a chain from the cursor file's cursor for the box, or,
// when it has none, from now: a fresh cursor, saved at once, so that an
// end after it is reported even if this watch is killed before it sees
// it. It learns which runs are running too, to wait for them.
func (w *watcher) begin(ctx context.Context, b *boxState) error {
	var page listAnswer
	if err := b.t.Call(ctx, "process_list", map[string]any{"state": "running", "limit": 64}, &page); err != nil {
		return err
	}
	b.running = map[string]string{}
	for _, r := range page.Runs {
		b.running[r.Name] = r.RunID
	}
	return w.locked(ctx, func() error {
		c, err := w.st.read()
		if err != nil {
			return &fatalError{err}
		}
		if saved := c.Cursors[b.t.Box]; saved != "" {
			b.base, b.cur = saved, saved
			return nil
		}
		c.Cursors[b.t.Box] = page.Cursor
		if err := w.st.write(c); err != nil {
			return &fatalError{err}
		}
		b.base, b.cur, b.issued = page.Cursor, page.Cursor, page.Cursor
		return nil
	})
}

// forget drops the box's saved cursor (if it is still the one the box
// rejected), so that the next look starts the box from now.
func (w *watcher) forget(ctx context.Context, b *boxState) error {
	err := w.locked(ctx, func() error {
		c, err := w.st.read()
		if err != nil {
			return &fatalError{err}
		}
		if c.Cursors[b.t.Box] == b.base {
			delete(c.Cursors, b.t.Box)
			if err := w.st.write(c); err != nil {
				return &fatalError{err}
			}
		}
		return nil
	})
	b.base, b.cur = "", ""
	if err != nil {
		return err
	}
	return errStale // look again, from now
}

// report describes the ended runs, and under the lock, if the cursor file
// still holds the cursor this chain began from (no other watch reported
// since) and this watch still owns it, writes the report and then the
// new cursor.
func (w *watcher) report(ctx context.Context, b *boxState, ended []run, next string) error {
	var sb strings.Builder
	for i, r := range ended {
		last := ""
		if i < maxTails {
			last = w.lastLine(ctx, b.t, r)
		}
		sb.WriteString(line(b.t.Box, r.Name, r.RunID, status(r), duration(r), last))
		sb.WriteByte('\n')
	}
	return w.locked(ctx, func() error {
		if ctx.Err() != nil {
			return errDone // a signal or --max-wait: report nothing now
		}
		if w.token != "" {
			if owner, err := w.st.owner(); err == nil && owner != w.token {
				w.finish(func() { w.superseded = true })
				return errDone
			}
		}
		c, err := w.st.read()
		if err != nil {
			return &fatalError{err}
		}
		if c.Cursors[b.t.Box] != b.base {
			// Another watch reported since: start again from its cursor.
			b.base, b.cur = "", ""
			return errStale
		}
		if _, err := io.WriteString(w.o.Report, sb.String()); err != nil {
			return &fatalError{fmt.Errorf("writing the report: %w", err)}
		}
		c.Cursors[b.t.Box] = next
		if err := w.st.write(c); err != nil {
			return &fatalError{fmt.Errorf("the report was written, the cursor not (the next watch reports it again): %w", err)}
		}
		w.finish(func() { w.reported = true })
		return errDone
	})
}

func (w *watcher) locked(ctx context.Context, f func() error) error {
	unlock, err := w.st.lock(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return errDone // a signal or --max-wait while another held it
		}
		return &fatalError{err}
	}
	defer unlock()
	return f()
}

// wait waits up to Poll for one of the runs known running to end, or
// for Poll when none is.
func (w *watcher) wait(ctx context.Context, b *boxState) error {
	names := make([]string, 0, len(b.running))
	for n := range b.running {
		if len(names) == 64 { // process_wait's bound; the others are seen by the next look
			break
		}
		names = append(names, n)
	}
	if len(names) == 0 {
		sleep(ctx, w.o.Poll)
		return nil
	}
	start := time.Now()
	b.early = false
	var ans struct {
		WaitTimedOut bool `json:"wait_timed_out"`
	}
	err := b.t.Call(ctx, "process_wait", map[string]any{"names": names, "timeout_ms": w.o.Poll.Milliseconds()}, &ans)
	var te *session.ToolError
	if errors.As(err, &te) {
		// A name was removed, or the box refuses the wait: learn the
		// running runs afresh at the next look, and do not spin.
		b.base, b.cur = "", ""
		sleep(ctx, w.o.Poll-time.Since(start))
		return nil
	}
	b.early = err == nil && !ans.WaitTimedOut
	return err
}

// lastLine is the run's last line of output, or "" if it has none or it
// cannot be read (the report goes on without it).
func (w *watcher) lastLine(ctx context.Context, t session.Tools, r run) string {
	var ans struct {
		Content string `json:"content"`
		Stdout  string `json:"stdout"`
		Stderr  string `json:"stderr"`
	}
	if err := t.Call(ctx, "tail_log", map[string]any{"name": r.Name, "run_id": r.RunID, "tail_lines": 1}, &ans); err != nil {
		return ""
	}
	for _, s := range []string{ans.Content, ans.Stderr, ans.Stdout} {
		if l := sanitize(s); l != "" {
			return l
		}
	}
	return ""
}

// line is one line of a report: a run that ended, on which box, how,
// after how long, and its last line of output.
func line(box, name, runID, status string, took time.Duration, last string) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "agent-box: run %s (%s) on %s ended: %s", name, runID, box, status)
	if took >= 0 {
		fmt.Fprintf(&sb, " after %s", took)
	}
	if last != "" {
		fmt.Fprintf(&sb, "; last line: %s", last)
	} else {
		sb.WriteString("; no output")
	}
	return sb.String()
}

// status says how a run ended: its exit code, the signal that killed it,
// out of memory, or unknown with the box's reason.
func status(r run) string {
	var s string
	switch {
	case r.OOMKilled:
		s = "out of memory"
		if r.Signal != "" {
			s += " (killed by " + r.Signal + ")"
		}
	case r.State == "exited" && r.ExitCode != nil:
		s = fmt.Sprintf("exit code %d", *r.ExitCode)
	case r.State == "exited" && r.Signal != "":
		s = "killed by " + r.Signal
	default:
		s = "status unknown"
		if r.Reason != "" {
			s += " (" + sanitize(r.Reason) + ")"
		}
	}
	if r.TimedOut {
		s += ", timed out"
	}
	return s
}

// duration is how long the run ran, to the second (under a second, to
// the millisecond); -1: unknown.
func duration(r run) time.Duration {
	start, err1 := time.Parse(time.RFC3339Nano, r.StartedAt)
	end, err2 := time.Parse(time.RFC3339Nano, r.FinishedAt)
	if err1 != nil || err2 != nil || end.Before(start) {
		return -1
	}
	if d := end.Sub(start); d < time.Second {
		return d.Round(time.Millisecond)
	}
	return end.Sub(start).Round(time.Second)
}

// sanitize makes s one short line fit to show a model: the last
// non-blank line, control characters as spaces, runs of spaces as one,
// cut to maxLastLine runes.
func sanitize(s string) string {
	lines := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.Map(func(r rune) rune {
			if r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
				return ' '
			}
			return r
		}, lines[i])
		l = strings.Join(strings.Fields(l), " ")
		if l == "" {
			continue
		}
		if utf8.RuneCountInString(l) > maxLastLine {
			l = string([]rune(l)[:maxLastLine-1]) + "…"
		}
		return l
	}
	return ""
}

// sleep waits d or until ctx ends; false: ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
