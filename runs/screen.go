package runs

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/agent-box/agent-box/screen"
)

// ScreenReplayBytes bounds how much of a pty run's log tail_log's screen
// replays on a terminal of the default size (screenReplay): a
// full-screen program redraws its whole screen many times within it.
const ScreenReplayBytes = 64 << 10

// minScreenReplay is the least a screen replays, on the largest terminal.
const minScreenReplay = 1 << 10

// screenReplay is how much of the log a screen of cols × rows replays.
// The emulator moves every cell of the screen for each row it scrolls,
// so a replay's cost is about its lines times the screen's cells: the
// bytes shrink as the screen grows, and the largest terminal costs no
// more than the default one (docs/architecture/performance.md, "The
// screen view").
func screenReplay(cols, rows int) int64 {
	n := int64(ScreenReplayBytes) * DefaultCols * DefaultRows / int64(cols*rows)
	return min(max(n, minScreenReplay), ScreenReplayBytes)
}

// Screen is a pty run's terminal screen, rendered from the end of its log.
type Screen struct {
	screen.Screen
	// From and End are the log bytes replayed to render it.
	From, End int64
	// Partial: the replay began after the log's start and did not clear
	// the whole screen, so rows drawn before From may be missing.
	Partial bool
}

// checkScreen is the rule of the screen argument, before anything is
// opened: the screen replaces the window's text, so the arguments that
// shape the text do not apply.
func (req TailRequest) checkScreen() error {
	if !req.Screen {
		return nil
	}
	if req.Grep != "" || req.TailLines != nil || req.MaxBytes != nil || req.Exact || req.Raw || req.Clean != nil {
		return invalid("screen shows the terminal as it is now; leave out grep, tail_lines, max_bytes, encoding, raw and clean")
	}
	return nil
}

// renderScreen renders run's terminal from the end of its log
// (screenReplay), at the terminal's current size; it gives up when ctx
// ends.
func renderScreen(ctx context.Context, run Run) (*Screen, error) {
	// The size is the record's, which the run's own processes can write:
	// a size agent-box never sets would have the emulator allocate its
	// cells without bound.
	if err := CheckSize(run.Cols, run.Rows); err != nil {
		return nil, fmt.Errorf("%w: the record of run %s of %q says its terminal is %dx%d, a size agent-box never sets (%w); resize it with process_resize",
			ErrRefused, run.RunID, run.Name, run.Cols, run.Rows, errors.Unwrap(err))
	}
	r, closeLog, size, err := openLog(run)
	if err != nil {
		return nil, err
	}
	defer closeLog()
	from := max(0, size-screenReplay(run.Cols, run.Rows))
	buf := make([]byte, size-from)
	if n, err := r.ReadAt(buf, from); n < len(buf) {
		return nil, mapReadErr(err, run)
	}
	if from > 0 {
		// Begin at a line's start, where no escape sequence is open, or
		// at least at a character's.
		skip := 0
		for skip < len(buf) && skip < utf8.UTFMax && !utf8.RuneStart(buf[skip]) {
			skip++
		}
		for i, c := range buf[:min(len(buf), 4<<10)] {
			if c == '\n' {
				skip = i + 1
				break
			}
		}
		buf, from = buf[skip:], from+int64(skip)
	}
	rendered, err := screen.Render(ctx, buf, run.Cols, run.Rows)
	if err != nil {
		return nil, err
	}
	s := &Screen{Screen: rendered, From: from, End: size}
	s.Partial = from > 0 && !screen.Reset(buf)
	return s, nil
}
