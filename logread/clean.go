package logread

import (
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// Clean is text as a model should read terminal output: escape sequences
// (colours, titles, charsets, keypad and cursor modes) removed, and what a
// terminal would draw over drawn over: "\r" and backspace move back along
// the line, erase-in-line (CSI K) cuts it, cursor up (CSI A) and erase
// below (CSI J) redraw the lines above, so that a progress bar reads as
// its last state. removed is how many bytes of text went.
//
// It models lines, not a screen: no wrapping at a width, no cursor past
// the end of a line (text is written where a terminal would pad with
// blanks), and a clear of the whole screen is ignored, so earlier output
// stays readable. Every byte it returns comes from text, so it never grows
// the text; of valid UTF-8 (all the text logread returns) the result holds
// no escape or control but tab and newline, and cleaning it again changes
// nothing.
//
// The sequences are decoded by charmbracelet/x/ansi's parser, which knows
// CSI, OSC, DCS, APC, PM, SOS and plain ESC sequences.
func Clean(text string) (clean string, removed int) {
	if !needsClean(text) {
		return text, 0
	}
	s := screen{lines: [][]string{nil}}
	p := ansi.NewParser()
	var state byte
	for rest := text; rest != ""; {
		seq, width, n, next := ansi.DecodeSequence(rest, state, p)
		if n <= 0 {
			break // cannot happen: the decoder always consumes a byte
		}
		state = next
		rest = rest[n:]
		switch {
		case width > 0:
			s.put(seq)
		case len(seq) == 1 && isControl(seq[0]):
			s.control(seq[0])
		case seq[0] == ansi.ESC && ansi.HasCsiPrefix(seq):
			s.csi(ansi.Cmd(p.Command()), p.Params())
		case seq[0] == ansi.ESC || seq[0] >= 0x80 && seq[0] <= 0x9f || strings.ContainsFunc(seq, isControlRune):
			// Any other sequence (or an 8-bit control's) draws nothing.
		default:
			s.join(seq) // a zero-width character: a combining mark, a joiner
		}
	}
	clean = s.String()
	return clean, len(text) - len(clean)
}

// needsClean reports whether text holds anything Clean changes: a control
// character other than tab and newline, or DEL.
func needsClean(text string) bool {
	for i := 0; i < len(text); i++ {
		if c := text[i]; c != '\t' && c != '\n' && isControl(c) {
			return true
		}
	}
	return false
}

// isControl reports whether c is a C0 control character or DEL.
func isControl(c byte) bool { return c < 0x20 || c == 0x7f }

func isControlRune(r rune) bool { return r < 0x20 || r == 0x7f }

// screen is the lines drawn so far, each a list of cells (one grapheme
// each), and the cursor. The cursor's column is never past its line's end.
type screen struct {
	lines    [][]string
	row, col int
}

func (s *screen) put(cell string) {
	line := s.lines[s.row]
	if s.col < len(line) {
		line[s.col] = cell
	} else {
		s.lines[s.row] = append(line, cell)
	}
	s.col++
}

// join adds a zero-width character to the cell before the cursor (the
// decoder returns an ASCII letter alone, and the accent that combines with
// it after), or, at a line's start, puts it in a cell of its own.
func (s *screen) join(seq string) {
	if s.col == 0 {
		s.put(seq)
		return
	}
	s.lines[s.row][s.col-1] += seq
}

func (s *screen) control(c byte) {
	switch c {
	case '\n':
		s.row++
		if s.row == len(s.lines) {
			s.lines = append(s.lines, nil)
		}
		s.col = 0
	case '\r':
		s.col = 0
	case '\b':
		s.col = max(0, s.col-1)
	case '\t':
		s.put("\t")
	}
	// Any other control character (BEL, SI, SO...) draws nothing.
}

func (s *screen) csi(cmd ansi.Cmd, params ansi.Params) {
	if cmd.Prefix() != 0 || cmd.Intermediate() != 0 {
		return // private modes and the like: nothing drawn
	}
	n, _, _ := params.Param(0, 0)
	switch cmd.Final() {
	case 'K': // erase in line
		s.eraseLine(n)
	case 'J': // erase in display: below the cursor only (see Clean)
		if n == 0 {
			s.lines[s.row] = s.lines[s.row][:s.col]
			s.lines = s.lines[:s.row+1]
		}
	case 'A': // cursor up
		s.moveTo(s.row-max(1, n), s.col)
	case 'B': // cursor down, never past the last line drawn
		s.moveTo(min(len(s.lines)-1, s.row+max(1, n)), s.col)
	case 'G': // cursor to a column
		s.moveTo(s.row, max(1, n)-1)
	case 'D': // cursor back
		s.moveTo(s.row, s.col-max(1, n))
	}
}

func (s *screen) eraseLine(n int) {
	line := s.lines[s.row]
	switch n {
	case 0: // to the end
		s.lines[s.row] = line[:s.col]
	case 1: // to the start: blanks, as a terminal shows them
		for i := range s.col {
			line[i] = " "
		}
	case 2: // the whole line; what follows is written from its start
		s.lines[s.row] = line[:0]
		s.col = 0
	}
}

// moveTo puts the cursor at row and col, within the lines drawn and no
// further than the end of its line.
func (s *screen) moveTo(row, col int) {
	s.row = min(max(0, row), len(s.lines)-1)
	s.col = min(max(0, col), len(s.lines[s.row]))
}

func (s *screen) String() string {
	var b strings.Builder
	for i, line := range s.lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		for _, cell := range line {
			b.WriteString(cell)
		}
	}
	return b.String()
}
