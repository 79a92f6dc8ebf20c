package runs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"time"

	"github.com/agent-box/agent-box/logframe"
	"github.com/agent-box/agent-box/logread"
	"github.com/agent-box/agent-box/runrecord"
)

// MaxWait bounds tail_log's wait_ms.
const MaxWait = 60 * time.Second

// DefaultTailBytes is tail_log's max_bytes when not given, from the end
// or from an offset alike: no answer a model did not size floods its
// context, and max_bytes asks for more.
const DefaultTailBytes = 16 << 10

// GrepLineBytes is how much of each line a grep answer in text returns:
// a model reading a minified bundle or a byte dump needs the line's
// offset and length, not its megabyte (base64 answers are whole).
const GrepLineBytes = 512

// MaxGrepBytes bounds a grep pattern: RE2 compiles in time linear in it,
// but a model has no use for a longer one.
const MaxGrepBytes = 4096

// TailRequest is tail_log's arguments.
type TailRequest struct {
	Name  string
	RunID string
	// Offset is where to read from; negative: from the end. nil: the
	// last whole lines (at most MaxBytes), unless grep, until or idle_ms
	// is given, which read on from the start.
	Offset    *int64
	MaxBytes  *int          // log bytes to read at most; nil: DefaultTailBytes
	TailLines *int          // the last lines instead of from Offset
	Grep      string        // an RE2 pattern: only the lines it matches
	Context   int           // with Grep: lines before and after each match
	Exact     bool          // the bytes as written, not text
	Raw       bool          // a framed log's frames as stored
	Wait      time.Duration // block this long for output past Offset
	Await     Await         // with Wait: what ends it besides the first output
	// Clean: text without terminal escapes, redraws collapsed
	// (logread.Clean); nil: the run's default (cleanFor).
	Clean *bool
	// Screen: the terminal's screen as a pty run's log leaves it
	// (TailResult.Screen), instead of the window's text.
	Screen bool
}

// window checks req's arguments and turns them into a logread request,
// before anything is opened: logread's Check owns the rules of a window,
// this the ones of the arguments (a given tail_lines, the pattern).
func (req TailRequest) window() (logread.Request, error) {
	lr := logread.Request{MaxBytes: DefaultTailBytes, Exact: req.Exact, Raw: req.Raw, Context: req.Context}
	switch {
	case req.Offset != nil:
		lr.Offset = *req.Offset
	case req.TailLines == nil && req.Grep == "" && !req.Await.given():
		// The end, in whole lines: what a model reading a log wants
		// first (how it ended, where it is now); the header says
		// where the window starts, so earlier output is known to exist.
		lr.TailLines = logread.MaxTailLines
	}
	if !req.Exact {
		lr.LineMax = GrepLineBytes
	}
	if req.MaxBytes != nil {
		lr.MaxBytes = *req.MaxBytes
	}
	if req.TailLines != nil {
		// Checked here too, since logread's 0 is "not given".
		if err := logread.CheckTailLines(*req.TailLines); err != nil {
			return lr, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		lr.TailLines = *req.TailLines
	}
	if req.Clean != nil && *req.Clean && (req.Exact || req.Raw) {
		return lr, invalid("clean makes text for reading; base64 and raw answers are the bytes as written: leave clean out")
	}
	if req.Grep != "" {
		re, err := compilePattern("grep", req.Grep)
		if err != nil {
			return lr, err
		}
		lr.Grep = re
	}
	if req.Await.given() && (req.Grep != "" || req.TailLines != nil || lr.Offset < 0) {
		return lr, invalid("until and idle_ms return the output from offset up to the answer: give offset >= 0, without grep or tail_lines")
	}
	if err := lr.Check(); err != nil {
		return lr, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return lr, nil
}

// TailResult is a window of the log and the run as of reading it.
type TailResult struct {
	Window logread.Window
	Run    Run
	EOF    bool // the log can no longer grow and the window reached its end
	// Matched: the wait ended on a line that Await.Until matched; the
	// window ends with that line (unless max_bytes cut it first).
	Matched bool
	// Cleaned: the text is logread.Clean's; CleanedBytes it removed.
	Cleaned      bool
	CleanedBytes int
	// Screen: asked for (TailRequest.Screen), the terminal's screen; the
	// Window is then the log bytes replayed, without text.
	Screen *Screen
	// cut: the wait ended because its ctx did, before any end of its own
	// (output, a match, quiet, the log's end, its time).
	cut bool
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
// past req.Offset while the run can still write: the first window of a
// follower, as Follow's are.
func (m *Manager) Tail(ctx context.Context, req TailRequest) (TailResult, error) {
	if err := inRange("wait_ms", req.Wait, time.Millisecond, MaxWait); err != nil {
		return TailResult{}, err
	}
	if err := req.checkScreen(); err != nil {
		return TailResult{}, err
	}
	lr, err := req.window()
	if err != nil {
		return TailResult{}, err
	}
	until, err := req.Await.check(m, req.Wait)
	if err != nil {
		return TailResult{}, err
	}
	f, err := m.follow(req.Name, req.RunID, lr)
	if err != nil {
		return TailResult{}, err
	}
	defer f.close()
	if !req.Screen {
		return f.read(ctx, req.Wait, req.Await, until, req.Clean)
	}
	if !f.run.Pty {
		return TailResult{}, invalid("screen is a terminal's; run %s of %q has none (it was started without pty: true): read its output without screen", f.run.RunID, f.run.Name)
	}
	// The wait (wait_ms, until, idle_ms) is a window's, as without
	// screen; its text is not shown, so not cleaned.
	res, err := f.read(ctx, req.Wait, req.Await, until, new(false))
	if err != nil {
		return res, err
	}
	s, err := renderScreen(ctx, res.Run)
	if err != nil {
		return res, err
	}
	res.EOF = res.EOF && s.End == res.Window.EndOffset
	res.Window = logread.Window{Offset: s.From, EndOffset: s.End, Size: s.End}
	res.Run.LogBytes = max(res.Run.LogBytes, s.End)
	res.Screen = s
	return res, nil
}

// read is the follower's next window: waiting up to wait for the first
// output past its offset, or, when a is given, for what a waits for
// (until, the pattern a checked, or quiet). A text window is cleaned
// when clean says so or, nil, the run's default (cleanFor).
func (f *follower) read(ctx context.Context, wait time.Duration, a Await, until *regexp.Regexp, clean *bool) (TailResult, error) {
	var res TailResult
	var err error
	if a.given() {
		res, err = f.await(ctx, wait, until, a.Idle)
	} else {
		res, err = f.next(ctx, wait)
	}
	if err == nil && !f.req.Exact && !f.req.Raw && cleanFor(clean) {
		res.Cleaned, res.CleanedBytes = true, cleanWindow(&res.Window, before(res.Run, res.Window.Offset))
	}
	return res, err
}

// readWindow cuts req's window out of a log, as logread.Read does, but
// for the last lines of a framed log, whose MaxBytes here bounds their
// text, as it does a combined log's: logread's bounds the log bytes, and
// one frame of a busy stream (logframe.MaxPayload, encoded) is more than
// the default, so the last lines would be one frame's.
func readWindow(r io.ReaderAt, size int64, req logread.Request) (logread.Window, error) {
	if req.TailLines == 0 || !req.Framed || req.Raw || req.MaxBytes >= logread.MaxWindow {
		return logread.Read(r, size, req)
	}
	wide := req
	wide.MaxBytes, wide.Exact = logread.MaxWindow, false
	w, err := logread.Read(r, size, wide)
	if err != nil {
		return w, err
	}
	text, cut := lastLines(w.Content, req.TailLines, req.MaxBytes)
	switch {
	case cut:
		// The last line alone is longer: its end, as logread answers.
		return logread.Read(r, size, req)
	case text == w.Content && !req.Exact:
		return w, nil
	}
	// As many lines as fit: logread starts them at the frame holding
	// the first one's first byte, and leaves out what it holds before.
	wide.TailLines, wide.Exact = lineCount(text), req.Exact
	return logread.Read(r, size, wide)
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
