// Package screen renders what a terminal shows after a program's output:
// the rows of text and the cursor, as a VT emulator
// (github.com/charmbracelet/x/vt) leaves them. A full-screen program
// (top, less, vim, a progress display) redraws the same rows again and
// again; its log read as text is a collage of every state, its screen is
// the last one.
//
// Caveat: the screen is only as whole as the output replayed. A caller
// that replays the end of a long log (Render of a suffix) gets the rows
// drawn in that suffix; Reset says whether the suffix begins the screen
// anew (a clear, the alternate screen, a terminal reset), so that rows
// drawn before it cannot show.
package screen

import (
	"bytes"
	"context"
	"io"
	"strings"

	"github.com/charmbracelet/x/vt"
)

// Screen is a terminal's screen.
type Screen struct {
	// Lines are the screen's rows from the top, each without trailing
	// spaces, without the empty rows after the last one with text.
	Lines      []string
	Cols, Rows int // the terminal's size
	// CursorRow and CursorCol are where the cursor is, from 1 (as the
	// terminal's own cursor addressing counts).
	CursorRow, CursorCol int
}

// feed is how much of the output Render writes to the emulator between
// looks at its ctx.
const feed = 4 << 10

// Render replays out on a terminal of cols × rows (both > 0) and returns
// its screen: the alternate one when the program switched to it, as the
// user would see it. It gives up, with ctx's error, once ctx is done.
func Render(ctx context.Context, out []byte, cols, rows int) (Screen, error) {
	e := vt.NewEmulator(cols, rows)
	e.SetScrollbackSize(0)
	// Queries in the output (a cursor position report, device
	// attributes) make the emulator answer on its input pipe, which
	// blocks until read: nobody types here, so the answers are dropped.
	drained := make(chan struct{})
	go func() {
		io.Copy(io.Discard, e)
		close(drained)
	}()
	defer func() {
		// Closing the pipe's writer ends the drain; e.Close would write the
		// emulator's closed flag, which its Read in the drain reads unlocked.
		if c, ok := e.InputPipe().(io.Closer); ok {
			c.Close()
		} else {
			e.Close()
		}
		<-drained
	}()
	for rest := out; len(rest) > 0; {
		if err := ctx.Err(); err != nil {
			return Screen{}, err
		}
		n := min(len(rest), feed)
		e.Write(rest[:n])
		rest = rest[n:]
	}
	lines := strings.Split(e.String(), "\n")
	cur := e.CursorPosition()
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \r")
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return Screen{Lines: lines, Cols: cols, Rows: rows, CursorRow: cur.Y + 1, CursorCol: cur.X + 1}, nil
}

// resets are sequences after which nothing written before shows: erase
// in display of the whole screen, entering the alternate screen (which
// xterm's mode 1049 clears), a full terminal reset.
var resets = [][]byte{
	[]byte("\x1b[2J"),
	[]byte("\x1b[?1049h"),
	[]byte("\x1bc"),
}

// homes are cursor-home sequences: followed by an erase to the end of the
// screen they clear it as \x1b[2J does (how top and many curses programs
// redraw).
var homes = [][]byte{[]byte("\x1b[H"), []byte("\x1b[1;1H"), []byte("\x1b[;H")}

// leaveAlt returns to the main screen, which shows again what was drawn
// before the alternate screen was entered.
var leaveAlt = []byte("\x1b[?1049l")

// Reset reports whether out clears the whole screen (see resets, homes)
// and does not leave the alternate screen after, so that a screen
// rendered from out cannot miss rows drawn before it. Modes a program set
// before it (a scroll region, origin mode) still can be missed.
func Reset(out []byte) bool {
	last := -1
	for _, r := range resets {
		last = max(last, bytes.LastIndex(out, r))
	}
	for _, h := range homes {
		for i := 0; ; {
			j := bytes.Index(out[i:], h)
			if j < 0 {
				break
			}
			at := i + j
			i = at + len(h)
			if bytes.HasPrefix(out[i:], []byte("\x1b[J")) || bytes.HasPrefix(out[i:], []byte("\x1b[0J")) {
				last = max(last, at)
			}
		}
	}
	return last >= 0 && bytes.LastIndex(out, leaveAlt) < last
}
