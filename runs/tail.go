package runs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agent-box/agent-box/logframe"
	"github.com/agent-box/agent-box/logread"
	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/runrecord"
)

// MaxWait bounds tail_log's wait_ms.
const MaxWait = 60 * time.Second

// TailRequest is tail_log's arguments.
type TailRequest struct {
	Name  string
	RunID string
	logread.Request
	Wait time.Duration // block this long for output past Offset
}

// TailResult is a window of the log and the run as of reading it.
type TailResult struct {
	Window logread.Window
	Run    Run
	EOF    bool // the log can no longer grow and the window reached its end
}

// emptyLog stands in for a log that was never created (start failed).
type emptyLog struct{}

func (emptyLog) ReadAt(p []byte, off int64) (int, error) { return 0, io.EOF }

// openLog opens a run's log for reading: what the store's OpenFile
// allows (a regular file, no symlink, never blocking in open), or nothing
// when the run never made one.
func openLog(run Run) (io.ReaderAt, func(), int64, error) {
	what := fmt.Sprintf("the log of run %s/%s", run.Name, run.RunID)
	f, err := runrecord.OpenFile(run.LogPath, os.O_RDONLY, 0, what)
	if errors.Is(err, os.ErrNotExist) {
		return emptyLog{}, func() {}, 0, nil
	}
	if err != nil {
		return nil, nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, 0, fmt.Errorf("opening %s: %w", what, err)
	}
	return f, func() { f.Close() }, fi.Size(), nil
}

// Tail reads one window of a run's log, waiting up to req.Wait for output
// past req.Offset while the run can still write.
func (m *Manager) Tail(ctx context.Context, req TailRequest) (TailResult, error) {
	if req.Wait < 0 || req.Wait > MaxWait {
		return TailResult{}, invalid("wait_ms must be between 0 and %d", MaxWait.Milliseconds())
	}
	run, err := m.Get(req.Name, req.RunID)
	if err != nil {
		return TailResult{}, err
	}
	if run.rec == nil {
		return TailResult{}, fmt.Errorf("%w: run %s of %q: %s", ErrNotFound, run.RunID, req.Name, run.Reason)
	}
	req.RunID = run.RunID
	req.Framed = run.rec.LogFormat == logframe.FormatName
	if req.Raw && !req.Framed {
		return TailResult{}, invalid("raw applies to framed runs only; run %s is %s", run.RunID, run.CaptureMode)
	}
	deadline := time.Now().Add(req.Wait)
	var watch *dirWatch
	defer func() {
		if watch != nil {
			watch.Close()
		}
	}()
	for {
		final := run.LogFinal() // decided before the size is read
		r, closeLog, size, err := openLog(run)
		if err != nil {
			return TailResult{}, err
		}
		lr := req.Request
		lr.Final = final
		w, err := logread.Read(r, size, lr)
		closeLog()
		if err != nil {
			return TailResult{}, mapReadErr(err, run)
		}
		// An empty window of a log that can still grow has nothing to return
		// yet: either nothing past Offset, or only bytes the writer is still
		// inside (an incomplete last frame line or character), which logread
		// holds back instead of replacing. Wait for them; Final, read again
		// after the run ends, returns whatever is left.
		progressed := w.EndOffset > w.Offset || len(w.Skipped) > 0
		left := time.Until(deadline)
		if progressed || final || left <= 0 || ctx.Err() != nil || req.TailLines > 0 || req.Offset < 0 {
			run.LogBytes = size
			return TailResult{Window: w, Run: run, EOF: final && w.EndOffset == size}, nil
		}
		if watch == nil {
			watch = watchDir(m.Store.RunDir(run.Name, run.RunID), watchOutput)
			continue // re-read once: output may have landed before the watch
		}
		watch.Wait(ctx, left)
		if run, err = m.Get(req.Name, req.RunID); err != nil {
			return TailResult{}, err
		}
	}
}

func mapReadErr(err error, run Run) error {
	switch {
	case errors.Is(err, logread.ErrBadOffset), errors.Is(err, logread.ErrBadMaxBytes), errors.Is(err, logread.ErrBadRequest):
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	case errors.Is(err, logframe.ErrMalformed):
		return fmt.Errorf("log of run %s is damaged: %w", run.RunID, err)
	}
	return fmt.Errorf("reading log of run %s: %w", run.RunID, err)
}

// MaxWaitTimeout bounds process_wait's timeout_ms.
const MaxWaitTimeout = 10 * time.Minute

// outputSettle bounds the wait for the output to close after the exit.
const outputSettle = 500 * time.Millisecond

// progressEvery is how often Wait reports progress while it blocks.
const progressEvery = 3 * time.Second

// WaitResult is what process_wait answers.
type WaitResult struct {
	Run      Run
	TimedOut bool          // the run was still running at the timeout
	Duration time.Duration // run time so far, or until its exit; see DurationKnown
	// DurationKnown is false for a run whose end is unknown (no exit
	// recorded, and not running): its duration cannot be told.
	DurationKnown bool
	Output        string // last lines of the combined / interleaved output
	Stderr        string // framed runs: last lines of stderr
	Lossy         bool
	// OutputFrom is where the tail begins in the log: tail_log from 0 up
	// to it returns the output before the tail (framed: the frame holding
	// its first byte, which may hold output before it too).
	OutputFrom int64
	// OutputWhole: the tail is the run's whole output; nothing was left
	// out.
	OutputWhole bool
	// OutputCut: the tail's first line was longer than the tail's bound,
	// so only its end is shown.
	OutputCut bool
}

// tailLines is how much of the output process_wait returns.
const (
	waitTailLines = 20
	waitTailBytes = 8 << 10
)

// Wait blocks until the run ends, the timeout passes or ctx is done.
// progress, if not nil, is called every few seconds while waiting.
func (m *Manager) Wait(ctx context.Context, name, runID string, timeout time.Duration, progress func(elapsed time.Duration)) (WaitResult, error) {
	if timeout < 0 || timeout > MaxWaitTimeout {
		return WaitResult{}, invalid("timeout_ms must be between 0 and %d", MaxWaitTimeout.Milliseconds())
	}
	run, err := m.Get(name, runID)
	if err != nil {
		return WaitResult{}, err
	}
	start := time.Now()
	deadline := start.Add(timeout)
	nextProgress := start.Add(progressEvery)
	var watch *dirWatch
	for !run.Ended() {
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			break
		}
		if watch == nil {
			watch = watchDir(m.Store.RunDir(run.Name, run.RunID), watchRecord)
			defer watch.Close()
		} else {
			watch.Wait(ctx, min(left, time.Until(nextProgress)))
		}
		if progress != nil && !time.Now().Before(nextProgress) {
			progress(time.Since(start))
			nextProgress = time.Now().Add(progressEvery)
		}
		if run, err = m.Get(name, run.RunID); err != nil {
			return WaitResult{}, err
		}
	}
	// The exit is recorded before the output is drained; give the
	// supervisor a moment so that the answer can say the log is complete.
	// A descendant that keeps the output open does not hold us longer.
	for settle := time.Now().Add(outputSettle); run.Ended() && !run.LogFinal() && time.Now().Before(settle) && ctx.Err() == nil; {
		if watch == nil {
			watch = watchDir(m.Store.RunDir(run.Name, run.RunID), watchRecord)
			defer watch.Close()
		}
		watch.Wait(ctx, time.Until(settle))
		if run, err = m.Get(name, run.RunID); err != nil {
			return WaitResult{}, err
		}
	}
	res := WaitResult{Run: run, TimedOut: !run.Ended()}
	if run.StartedAt != nil && (run.FinishedAt != nil || run.State == outcome.Running) {
		end := time.Now()
		if run.FinishedAt != nil {
			end = *run.FinishedAt
		}
		res.Duration, res.DurationKnown = end.Sub(*run.StartedAt), true
	}
	if run.rec != nil {
		m.outputTail(&res)
	}
	return res, nil
}

// outputTail fills the last lines of output into res, best effort: the
// answer is about the exit, a damaged log must not hide it.
func (m *Manager) outputTail(res *WaitResult) {
	rec := res.Run.rec
	r, closeLog, size, err := openLog(res.Run)
	if err != nil {
		return
	}
	defer closeLog()
	framed := rec.LogFormat == logframe.FormatName
	if !framed {
		w, err := logread.Read(r, size, logread.Request{TailLines: waitTailLines, MaxBytes: waitTailBytes, Final: true})
		if err == nil {
			res.Output, res.Lossy, res.OutputFrom = w.Content, w.Lossy, w.Offset
			res.OutputCut = w.Offset > 0 && !endsLine(r, w.Offset-1)
			res.OutputWhole = w.Offset == 0
		}
		return
	}
	w, err := logread.Read(r, size, logread.Request{Offset: -64 << 10, MaxBytes: 64 << 10, Framed: true, Final: true})
	if err != nil {
		return
	}
	var cutErr bool
	res.Output, res.OutputCut = lastLines(w.Content, waitTailLines, waitTailBytes)
	res.Stderr, cutErr = lastLines(w.Stderr, waitTailLines, waitTailBytes)
	res.Lossy, res.OutputFrom = w.Lossy, w.Offset
	res.OutputWhole = w.Offset == 0 && !res.OutputCut && trimNL(res.Output) == trimNL(w.Content)
	res.OutputCut = res.OutputCut || cutErr
	// The window's start is before the tail; the frame holding the tail's
	// first byte is where it begins: tail_lines, for as many lines as the
	// tail has, finds it, when its answer holds the whole tail (a last
	// line too long for it is answered by its last frame alone).
	if res.Output != "" {
		n := max(1, strings.Count(trimNL(res.Output), "\n")+1)
		t, err := logread.Read(r, size, logread.Request{TailLines: n, MaxBytes: 64 << 10, Framed: true, Final: true})
		if err == nil && strings.HasSuffix(trimNL(t.Content), trimNL(res.Output)) {
			res.OutputFrom = t.Offset
		}
	}
}

func trimNL(s string) string { return strings.TrimSuffix(s, "\n") }

// endsLine reports whether the log byte at off is a newline.
func endsLine(r io.ReaderAt, off int64) bool {
	var b [1]byte
	n, _ := r.ReadAt(b[:], off)
	return n == 1 && b[0] == '\n'
}

// lastLines returns at most n lines and max bytes from the end of s, cut
// at a line start. When the last line alone is longer than max, its last
// max bytes (from a character boundary) are returned, and cut says so:
// the end of a long line beats an empty tail.
func lastLines(s string, n, max int) (tail string, cut bool) {
	// The newline ending the output, if it has one, is kept; none is
	// added: an output that ends without one (a prompt, printf) reads as
	// the child wrote it (issue 9).
	nl := ""
	if strings.HasSuffix(s, "\n") {
		s, nl = s[:len(s)-1], "\n"
	}
	if s == "" {
		return nl, false
	}
	keep, search := len(s), len(s)
	for lines := 0; lines < n; lines++ {
		j := strings.LastIndexByte(s[:search], '\n')
		if len(s)-(j+1) > max {
			break
		}
		keep = j + 1
		if j < 0 {
			break
		}
		search = j
	}
	if keep == len(s) {
		keep = len(s) - max
		for keep < len(s) && !utf8.RuneStart(s[keep]) {
			keep++
		}
		cut = true
	}
	return s[keep:] + nl, cut
}
