package runs

import (
	"context"
	"slices"
	"time"

	"github.com/agent-box/agent-box/live"
	"github.com/agent-box/agent-box/logread"
	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/supervisor"
)

// WaitPolicy bounds how long one process_wait call may block. A client's
// own request timeout ends a call that blocks past it with an error and no
// answer at all: the official TypeScript SDK and Codex time a request out
// after 60 s unless progress notifications keep it alive, so a wait that
// no notification reaches is cut to Unwatched, and says so.
//
// It also holds the waits of the supervisors: the grace between SIGTERM and
// SIGKILL at a run's timeout_s (TimeoutGrace), given to each run at its
// start, and how long a process_write may wait for the child to take its
// data (StdinWrite), asked of the supervisor with each write. A test suite
// sets them short, so that it does not sit out the production values.
type WaitPolicy struct {
	Default       time.Duration // when timeout_ms is not given
	Unwatched     time.Duration // at most this long without progress notifications
	Max           time.Duration // at most this long with them
	ProgressEvery time.Duration // how often a watched wait reports progress
	TimeoutGrace  time.Duration // from SIGTERM to SIGKILL at a run's timeout_s
	StdinWrite    time.Duration // one process_write's wait for the child (at most supervisor.MaxStdinWriteTimeout)
}

// DefaultWaitPolicy is the policy of a Manager whose Waits is zero.
var DefaultWaitPolicy = WaitPolicy{
	Default:       30 * time.Second,
	Unwatched:     50 * time.Second,
	Max:           10 * time.Minute,
	ProgressEvery: 3 * time.Second,
	TimeoutGrace:  supervisor.DefaultKillGrace,
	StdinWrite:    supervisor.StdinWriteTimeout,
}

// MaxWaitTimeout bounds process_wait's timeout_ms.
const MaxWaitTimeout = 10 * time.Minute

// MaxWaitNames bounds the runs one process_wait waits on.
const MaxWaitNames = 64

func (m *Manager) waitPolicy() WaitPolicy {
	p := m.Waits
	d := DefaultWaitPolicy
	if p.Default <= 0 {
		p.Default = d.Default
	}
	if p.Unwatched <= 0 {
		p.Unwatched = d.Unwatched
	}
	if p.Max <= 0 {
		p.Max = d.Max
	}
	if p.ProgressEvery <= 0 {
		p.ProgressEvery = d.ProgressEvery
	}
	if p.TimeoutGrace <= 0 {
		p.TimeoutGrace = d.TimeoutGrace
	}
	if p.StdinWrite <= 0 {
		p.StdinWrite = d.StdinWrite
	}
	return p
}

// bound is how long a wait may block: the asked timeout (nil: the
// default), cut to Unwatched when no progress notification reaches the
// client (shortened says it was).
func (p WaitPolicy) bound(asked *time.Duration, watched bool) (d time.Duration, shortened bool, err error) {
	d = p.Default
	if asked != nil {
		if err := inRange("timeout_ms", *asked, time.Millisecond, p.Max); err != nil {
			return 0, false, err
		}
		d = *asked
	}
	if !watched && d > p.Unwatched {
		return p.Unwatched, asked != nil, nil
	}
	return d, false, nil
}

// progressClock says when a blocking call reports progress next. Without
// a reporter no report is ever due, so it never shortens a sleep.
type progressClock struct {
	send  func(elapsed time.Duration, running []string)
	every time.Duration
	start time.Time
	next  time.Time
}

func newProgressClock(send func(time.Duration, []string), every time.Duration) *progressClock {
	now := time.Now()
	return &progressClock{send: send, every: every, start: now, next: now.Add(every)}
}

// sleep bounds a sleep that must end before the bound left does, and in
// time for the next report.
func (p *progressClock) sleep(left time.Duration) time.Duration {
	if p.send == nil {
		return left
	}
	return min(left, time.Until(p.next))
}

// tick reports progress when a report is due.
func (p *progressClock) tick(running []string) {
	if p.send != nil && !time.Now().Before(p.next) {
		p.send(time.Since(p.start), running)
		p.next = time.Now().Add(p.every)
	}
}

// outputSettle bounds the wait for the output to close after the exit.
const outputSettle = 500 * time.Millisecond

// WaitRequest is process_wait's arguments.
type WaitRequest struct {
	// Name is the run waited on (its newest run), or Names several: the
	// wait ends when the first of them ends, or with All when every one
	// has. RunID picks an older run of the only name.
	Name  string
	Names []string
	All   bool
	RunID string
	// Timeout is timeout_ms; nil means the policy's default, or its Max
	// for a watched call.
	Timeout *time.Duration
	// Watched says progress notifications reach the client (it sent a
	// progress token), so that its request timeout does not fire while
	// the call blocks. Progress, if not nil, sends one.
	Watched  bool
	Progress func(elapsed time.Duration, running []string)
	// SinceOffset: the caller has read the log up to here; the output
	// tail starts no earlier.
	SinceOffset int64
	// Survivors: a run whose leader exited is over only once the
	// processes that outlived it are gone too.
	Survivors bool
	// Clean: the output tail without terminal escapes (logread.Clean);
	// nil: the run's default (cleanFor).
	Clean *bool
}

// End is a run as a wait answers it: the run, how long it ran, and the
// end of its output.
type End struct {
	Run      Run
	Duration time.Duration // run time so far, or until its exit; see DurationKnown
	// DurationKnown is false for a run whose end is unknown (no exit
	// recorded, and not running): its duration cannot be told.
	DurationKnown bool
	Tail
}

// WaitResult is what process_wait answers.
type WaitResult struct {
	// End is the first of the runs to end (in the order named), or the
	// first named when none has.
	End
	// Ends are, with All, the other runs that ended, each with its tail.
	Ends []End
	// Others are the other runs waited on, as of the answer (with All,
	// those still going).
	Others []Run
	// Running names, when several runs were waited on, those still going:
	// a caller that waits again drops the others.
	Running []string
	// WaitTimedOut: the wait's bound passed with every run still going,
	// or with All, with any (not the run's own timeout_s, which is
	// Run.TimedOut).
	WaitTimedOut bool
	// Shortened: the asked timeout was cut to the bound for clients
	// without progress notifications.
	Shortened bool
}

func (req *WaitRequest) check() error {
	switch {
	case req.Name != "" && len(req.Names) > 0:
		return invalid("give name or names, not both")
	case len(req.Names) == 0:
		req.Names = []string{req.Name} // an empty name is refused as every tool refuses it
	}
	switch {
	case len(req.Names) > MaxWaitNames:
		return invalid("names has %d runs, at most %d", len(req.Names), MaxWaitNames)
	case len(req.Names) > 1 && req.RunID != "":
		return invalid("run_id picks a run of one name; with names each is its newest run")
	case len(req.Names) > 1 && req.SinceOffset != 0:
		return invalid("since_offset is an offset in one run's log; give it with name, not names")
	case req.SinceOffset < 0:
		return invalid("since_offset %d is negative; pass a previous answer's end_offset", req.SinceOffset)
	}
	for i, n := range req.Names {
		if slices.Contains(req.Names[:i], n) {
			return invalid("names lists %q twice", n)
		}
	}
	return nil
}

// over reports whether waiting for run is over.
func (req *WaitRequest) over(run Run) bool {
	if req.Survivors && run.State == outcome.Exited && len(run.Survivors) > 0 {
		return false
	}
	return run.Ended()
}

// done reports whether the wait for rs is over: one of them is, or with
// All every one.
func (req *WaitRequest) done(rs []Run) bool {
	if req.All {
		return !slices.ContainsFunc(rs, func(r Run) bool { return !req.over(r) })
	}
	return slices.ContainsFunc(rs, req.over)
}

// running names the runs of rs not over.
func (req *WaitRequest) running(rs []Run) []string {
	var names []string
	for _, r := range rs {
		if !req.over(r) {
			names = append(names, r.Name)
		}
	}
	return names
}

// Wait blocks until the first of the runs ends (with All, the last), the
// bound passes or ctx is done (cancel, client gone, shutdown).
func (m *Manager) Wait(ctx context.Context, req WaitRequest) (WaitResult, error) {
	if err := req.check(); err != nil {
		return WaitResult{}, err
	}
	bound, shortened, err := m.waitPolicy().waitBound("timeout_ms", req.Timeout, req.Watched)
	if err != nil {
		return WaitResult{}, err
	}
	return m.wait(ctx, req, bound, shortened)
}

// waitBound is how long a wait for a run's end (process_wait's
// timeout_ms, process_start's wait_ms, named arg) may block: as bound,
// but a watched call that asks no timeout waits up to Max, as
// process_wait's description promises.
func (p WaitPolicy) waitBound(arg string, asked *time.Duration, watched bool) (d time.Duration, shortened bool, err error) {
	switch {
	case asked != nil:
		if err := inRange(arg, *asked, time.Millisecond, p.Max); err != nil {
			return 0, false, err
		}
	case watched:
		asked = &p.Max
	}
	return p.bound(asked, watched)
}

// wait is Wait past its checks, blocking bound at most.
func (m *Manager) wait(ctx context.Context, req WaitRequest, bound time.Duration, shortened bool) (WaitResult, error) {
	pol := m.waitPolicy()
	var err error
	rs := make([]Run, len(req.Names))
	dirs := make([]string, len(req.Names))
	for i, name := range req.Names {
		if rs[i], err = m.Get(name, req.RunID); err != nil {
			return WaitResult{}, err
		}
		dirs[i] = m.Store.RunDir(rs[i].Name, rs[i].RunID)
	}
	clock := newProgressClock(req.Progress, pol.ProgressEvery)
	deadline := clock.start.Add(bound)
	var watch *live.Watch
	defer func() { watch.Close() }()
	for !req.done(rs) {
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			break
		}
		if watch == nil {
			watch = live.WatchDirs(live.WatchRecord, dirs...)
		} else {
			watch.Wait(ctx, clock.sleep(left))
		}
		clock.tick(req.running(rs))
		for i := range rs {
			if rs[i], err = m.Get(rs[i].Name, rs[i].RunID); err != nil {
				return WaitResult{}, err
			}
		}
	}
	watch.Close()
	watch = nil
	res := WaitResult{WaitTimedOut: !req.done(rs), Shortened: shortened}
	first := max(0, slices.IndexFunc(rs, req.over))
	// The runs whose tails are answered: the first to end, and with All
	// every other that ended.
	tailed := func(i int) bool { return i == first || req.All && req.over(rs[i]) }
	// The exit is recorded before the output is drained; give the
	// supervisors a moment so that the answer can say the log is
	// complete. A descendant that keeps the output open does not hold us
	// longer.
	settle := time.Now().Add(outputSettle)
	for i := range rs {
		if tailed(i) {
			if rs[i], err = m.logSettled(ctx, rs[i], dirs[i], settle); err != nil {
				return WaitResult{}, err
			}
		}
	}
	if len(rs) > 1 {
		res.Running = req.running(rs)
	}
	for i, r := range rs {
		if !tailed(i) {
			res.Others = append(res.Others, r)
		}
	}
	m.withUsages(&rs[first], res.Others)
	res.End = m.endOf(rs[first], req.SinceOffset, req.Clean)
	for i := range rs {
		if i != first && tailed(i) {
			m.withUsages(&rs[i], nil)
			res.Ends = append(res.Ends, m.endOf(rs[i], 0, req.Clean))
		}
	}
	return res, nil
}

// logSettled is run once its log is final, or as it is at until: an ended
// run's supervisor records the exit before it has drained the output.
func (m *Manager) logSettled(ctx context.Context, run Run, dir string, until time.Time) (Run, error) {
	var watch *live.Watch
	defer func() { watch.Close() }()
	for run.Ended() && !run.LogFinal() && time.Now().Before(until) && ctx.Err() == nil {
		if watch == nil {
			watch = live.WatchDirs(live.WatchRecord, dir)
		} else {
			watch.Wait(ctx, time.Until(until))
		}
		var err error
		if run, err = m.Get(run.Name, run.RunID); err != nil {
			return run, err
		}
	}
	return run, nil
}

// endOf is run's end as a wait answers it: its duration and the tail of
// its output past since.
func (m *Manager) endOf(run Run, since int64, clean *bool) End {
	e := End{Run: run}
	if run.StartedAt != nil && (run.FinishedAt != nil || run.State == outcome.Running) {
		end := time.Now()
		if run.FinishedAt != nil {
			end = *run.FinishedAt
		}
		e.Duration, e.DurationKnown = end.Sub(*run.StartedAt), true
	}
	if run.rec != nil {
		e.Tail = outputTail(run, since)
		if cleanFor(clean) {
			var b logread.Before // a framed tail's chunks are of a window read from a frame before them
			if e.Tail.OutputChunks == nil {
				b = before(run, e.Tail.OutputFrom)
			}
			e.Cleaned, e.CleanedBytes = true, e.Tail.clean(b)
		}
	}
	return e
}
