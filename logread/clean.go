package logread

import (
	"bytes"
	"io"
	"strings"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/ansi/parser"
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
	// A parser for a CSI's parameters alone: Clean reads no string's
	// data, and ansi.NewParser's buffer for it, as large as a look back and
	// made for every call, was most of what cleaning a window of many chunks cost.
	p := new(ansi.Parser)
	p.SetParamsSize(parser.MaxParamsSize)
	p.SetDataSize(1) // the least that is not "unlimited"
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

// CleanLookback is how much of the log before a window its cleaning reads
// (ReadBefore), to find the escape sequence the window may begin inside
// (SequenceTail). It bounds the cost of that search: one read, and one
// decode of at most this much text.
const CleanLookback = 64 << 10

// SequenceTail returns how many bytes at the start of text are the rest
// of an escape sequence that began before it, which Clean, decoding text
// alone, would show as text. before is the text just before text, of the
// same stream: at most CleanLookback bytes of it, from the stream's start
// when whole.
//
// Every escape sequence begins with ESC, and an ESC ends any sequence
// still open and begins another (ECMA-48 5.6; charmbracelet/x/ansi's
// decoder does the same), so the last ESC of before is where the state at
// text's start is decided: decoding from it the way Clean decodes says
// whether its sequence ends before text or runs into it, and where.
//
// Without an ESC in before, a sequence begun further back than
// CleanLookback may still be open. before then tells what it could be: a
// CSI's parameters and intermediates are bytes 0x20-0x3F, and a control
// string (OSC, DCS, APC, PM, SOS) long enough for that, in practice an
// OSC 52 clipboard or an inline image, is base64 with no control byte in
// it, ended by BEL or ST (ESC \). When at least half of CleanLookback
// before text is only such bytes, text's leading parameters and their
// final byte, or its text up to a string terminator met before any line
// end or other ESC, are taken for the sequence's tail. A line that long
// of digits and punctuation alone, or one that long ending in a bell, is
// the price of that guess; a string that runs past the end of text
// without a terminator is shown as text, since nothing in the window
// tells it from a long line.
func SequenceTail(before, text string, whole bool) int {
	if i := strings.LastIndexByte(before, ansi.ESC); i >= 0 {
		return tailFrom(before[i:], text)
	}
	return guessTail(text, whole || len(before) < CleanLookback/2,
		!strings.ContainsFunc(before, func(r rune) bool { return !isCSIBody(r) }),
		!strings.ContainsFunc(before, isControlRune))
}

// guessTail is SequenceTail's guess for a look back without an ESC:
// tooLittle when it is too short to tell (or begins the stream), csiBody
// when all of it could be a CSI's parameters, noControl when it holds no
// control byte, as a control string's base64 would.
func guessTail(text string, tooLittle, csiBody, noControl bool) int {
	if tooLittle {
		return 0
	}
	switch {
	case csiBody:
		n := strings.IndexFunc(text, func(r rune) bool { return !isCSIBody(r) })
		switch {
		case n < 0:
			return len(text)
		case text[n] >= 0x40 && text[n] <= 0x7e: // the final byte (ECMA-48 5.4)
			return n + 1
		}
		return n
	case noControl:
		end := strings.IndexAny(text, "\x1b\a\n")
		switch {
		case end < 0 || text[end] == '\n':
			return 0
		case text[end] == '\a':
			return end + 1
		case strings.HasPrefix(text[end:], "\x1b\\"):
			return end + 2
		}
	}
	return 0
}

// Lookback is a stream's look back as SequenceTail reads it, kept as the
// stream is written chunk by chunk: Tail(text) is SequenceTail of the
// stream's last CleanLookback bytes and text. It keeps what SequenceTail
// decides from rather than the bytes, so that each chunk costs its own
// length: a framed window can hold a great many small chunks, and a copy
// of the look back for each made cleaning it cost their number times the
// look back.
type Lookback struct {
	n     int  // bytes in the look back: the stream's, at most CleanLookback
	whole bool // the look back begins at the stream's start
	// How many bytes back from the end the look back's last ESC is, its
	// last byte that cannot be a CSI's body, and its last control byte;
	// 0: none in the look back. A byte is one of these exactly when the
	// rune it is part of is (runes of two or more bytes are neither), so
	// bytes are counted though SequenceTail looks at runes.
	esc, notCSI, control int
	// head is the bytes from that ESC on while the sequence it begins is
	// still open ("" once it ended), or a shorter text that the decoder
	// continues from in the same way (see shortHead); state is the
	// decoder's state at its end.
	head  string
	state byte
}

// NewLookback returns the look back of a stream whose text so far is
// before, which begins the stream when whole.
func NewLookback(before string, whole bool) *Lookback {
	l := &Lookback{whole: whole}
	l.Write(before)
	return l
}

// Tail is SequenceTail of the look back and text: how many bytes at the
// start of text are the rest of a sequence begun before it.
func (l *Lookback) Tail(text string) int {
	if l.esc > 0 {
		if l.head == "" {
			return 0
		}
		return tailFrom(l.head, text)
	}
	return guessTail(text, l.whole || l.n < CleanLookback/2, l.notCSI == 0, l.control == 0)
}

// Write adds text to the stream.
func (l *Lookback) Write(text string) {
	if text == "" {
		return
	}
	if l.n+len(text) > CleanLookback {
		l.whole = false
	}
	l.n = min(l.n+len(text), CleanLookback)
	l.notCSI = l.last(l.notCSI, text, func(c byte) bool { return !isCSIBody(rune(c)) })
	l.control = l.last(l.control, text, func(c byte) bool { return isControl(c) })
	switch i := strings.LastIndexByte(text, ansi.ESC); {
	case i >= 0 && len(text)-i > l.n:
		l.esc, l.head = 0, "" // text is longer than the look back
	case i >= 0:
		l.esc = len(text) - i
		l.head, l.state = "", 0
		if n, state := decodeOpen(text[i:]); n == len(text)-i && state != ansi.NormalState {
			l.head, l.state = shortHead(text[i:], state), state
		}
	case l.esc == 0:
	case l.esc+len(text) > l.n:
		l.esc, l.head = 0, "" // out of the look back
	default:
		l.esc += len(text)
		if l.head == "" {
			break
		}
		// The sequence still open at the look back's end goes on into
		// text, which holds no ESC.
		head := l.head + text
		switch n, state := decodeOpen(head); {
		case n < len(head) || state == ansi.NormalState:
			l.head = "" // it ended in text
		case state != l.state || len(l.head) < 2:
			// A lone ESC's next byte may leave the decoder's state as it
			// was and yet tell what the sequence is: after ESC SP, a P
			// is a final byte; after ESC alone, it begins a DCS.
			l.head, l.state = shortHead(head, state), state
		}
		// Else text left the decoder where it was, and the head has
		// the sequence's first two bytes: it stands for text as well.
	}
}

// last is how many bytes back the look back's last byte for which is
// holds lies once text is written, given it lay back bytes back before
// (0: none in the look back).
func (l *Lookback) last(back int, text string, is func(byte) bool) int {
	for i := len(text) - 1; i >= 0; i-- {
		if is(text[i]) {
			if len(text)-i > l.n {
				return 0 // text is longer than the look back
			}
			return len(text) - i
		}
	}
	if back == 0 || back+len(text) > l.n {
		return 0
	}
	return back + len(text)
}

// decodeOpen decodes head (an ESC and what follows) the way tailFrom does
// and returns how far its sequence reaches and the decoder's state there:
// still within the sequence unless ansi.NormalState.
func decodeOpen(head string) (int, byte) {
	_, _, n, state := ansi.DecodeSequence(head, 0, nil)
	return n, state
}

// shortHead returns a text the decoder continues from as it would from
// head, open in state: where a sequence ends depends on what came before
// only through the decoder's state and the sequence's first two bytes,
// which tell an OSC (BEL ends it) and a DCS (a string follows its final
// byte) from the others. head's first two bytes, then with its last, give
// that state for every kind of sequence; a head that neither does is kept
// whole.
func shortHead(head string, state byte) string {
	if len(head) <= 3 {
		return head
	}
	for _, h := range []string{head[:2], head[:2] + head[len(head)-1:]} {
		if n, s := decodeOpen(h); n == len(h) && s == state {
			return h
		}
	}
	return head
}

// tailFrom decodes, from head's first byte (an ESC) on into text, the one
// sequence head begins, and returns how far into text it reaches.
func tailFrom(head, text string) int {
	// No parser: where a sequence ends does not depend on what one
	// collects, and a parser's buffers, made for every call, are as large
	// as a look back.
	_, _, n, _ := ansi.DecodeSequence(head, 0, nil)
	if n < len(head) {
		return 0 // ended within head: the rest of head is text and controls
	}
	_, _, n, _ = ansi.DecodeSequence(head+text, 0, nil)
	return max(0, n-len(head))
}

// isCSIBody reports whether r is a byte a CSI's parameters (0x30-0x3F)
// and intermediates (0x20-0x2F) are made of (ECMA-48 5.4).
func isCSIBody(r rune) bool { return r >= 0x20 && r <= 0x3f }

// Before is the text of a log just before a window, by stream, for
// SequenceTail: of a combined log, all in Stdout.
type Before struct {
	Stdout, Stderr string
	// Whole: the text begins at the log's start.
	Whole bool
}

// ReadBefore reads the last CleanLookback bytes of the log r before off (a
// window's Offset: of a framed log, a frame boundary), decoding a framed
// log's frames into their streams.
func ReadBefore(r io.ReaderAt, off int64, framed bool) (Before, error) {
	lo := max(0, off-CleanLookback)
	buf := make([]byte, off-lo)
	if err := readAt(r, buf, lo); err != nil {
		return Before{}, err
	}
	if !framed {
		return Before{Stdout: string(buf), Whole: lo == 0}, nil
	}
	if lo > 0 {
		// From the first frame that begins in buf.
		nl := bytes.IndexByte(buf, '\n')
		if nl < 0 {
			return Before{}, nil // one frame is all of it: no text to look at
		}
		lo, buf = lo+int64(nl+1), buf[nl+1:]
	}
	d, err := decodeFrames(buf, decodeOpts{base: lo})
	if err != nil {
		return Before{}, err
	}
	return Before{Stdout: string(d.out), Stderr: string(d.errb), Whole: lo == 0}, nil
}
