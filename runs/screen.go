package runs

import (
	"unicode/utf8"

	"github.com/agent-box/agent-box/screen"
)

// ScreenReplayBytes bounds how much of a pty run's log tail_log's screen
// replays: the emulator's cost grows with every row it scrolls, and a
// full-screen program redraws its whole screen many times within it.
const ScreenReplayBytes = 64 << 10

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

// renderScreen renders run's terminal from the last ScreenReplayBytes of
// its log, at the terminal's current size.
func renderScreen(run Run) (*Screen, error) {
	r, closeLog, size, err := openLog(run)
	if err != nil {
		return nil, err
	}
	defer closeLog()
	from := max(0, size-ScreenReplayBytes)
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
	s := &Screen{Screen: screen.Render(buf, run.Cols, run.Rows), From: from, End: size}
	s.Partial = from > 0 && !screen.Reset(buf)
	return s, nil
}
