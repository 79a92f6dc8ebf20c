package logread_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/logread"
)

func TestClean(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		{"plain text is left alone", "hello\n\tworld\n", "hello\n\tworld\n"},
		{"colours go", "\x1b[1;31mFAIL\x1b[0m: x\n", "FAIL: x\n"},
		{"a window title goes (OSC, BEL and ST)", "\x1b]0;title\x07a\x1b]2;t\x1b\\b", "ab"},
		{"charset and keypad modes go", "\x1b(Bx\x1b=y\x1b>", "xy"},
		{"private modes go", "\x1b[?25lhidden cursor\x1b[?25h", "hidden cursor"},
		{"a progress bar collapses to its last state", "  0%\r 50%\r100%\n", "100%\n"},
		{"a shorter redraw keeps the tail unless erased", "downloading\rdone", "doneloading"},
		{"erase to the end of the line", "downloading\r\x1b[Kdone", "done"},
		{"erase the whole line", "downloading\x1b[2Kdone", "done"},
		{"erase to the start leaves blanks", "abcdef\x1b[3D\x1b[1K", "   def"},
		{"backspace overwrites", "abc\b\bXY\n", "aXY\n"},
		{"backspace at the start stays", "\b\bab", "ab"},
		{"CRLF of a terminal is a newline", "one\r\ntwo\r\n", "one\ntwo\n"},
		{"cursor up redraws the lines above", "a 1%\nb 1%\n\x1b[2Aa 9%\nb 9%\n", "a 9%\nb 9%\n"},
		{"erase below after cursor up", "x\ny\nz\n\x1b[2A\x1b[Jdone\n", "x\ndone\n"},
		{"cursor up past the first line stops there", "ab\nc\x1b[5AX", "aX\nc"},
		{"a column past the end of the line stops at its end", "ab\x1b[9Gc", "abc"},
		{"clear screen is ignored: output stays", "one\n\x1b[2Jtwo", "one\ntwo"},
		{"bell and shift codes go", "a\x07b\x0ec\x0f", "abc"},
		{"a wide character is one cell", "日本\r語", "語本"},
		{"a letter and its combining accent are one cell", "e\u0301x\rY", "Yx"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, removed := logread.Clean(tc.in)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, len(tc.in)-len(tc.want), removed)
		})
	}
}

func FuzzClean(f *testing.F) {
	for _, s := range []string{"", "a\rb", "\x1b[31mx\x1b[0m", "a\nb\x1b[Ac", "\x1b]0;t\x07", "\x1b[", "\x1b", "日\b本", "\x9b31m", "x\x1b[2K\x1b[1Ky\n\x1b[J"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, removed := logread.Clean(in)
		if len(got) > len(in) {
			t.Fatalf("Clean grew %q to %q", in, got)
		}
		if removed != len(in)-len(got) {
			t.Fatalf("removed %d, but %d bytes went", removed, len(in)-len(got))
		}
		if !utf8.ValidString(in) {
			return // logread's text is valid UTF-8; the rest only must not grow
		}
		if !utf8.ValidString(got) {
			t.Fatalf("valid UTF-8 %q became invalid %q", in, got)
		}
		if i := strings.IndexFunc(got, func(r rune) bool { return r != '\t' && r != '\n' && (r < 0x20 || r == 0x7f) }); i >= 0 {
			t.Fatalf("a control character is left in %q (from %q)", got, in)
		}
		again, n := logread.Clean(got)
		if again != got || n != 0 {
			t.Fatalf("not idempotent: %q -> %q -> %q", in, got, again)
		}
	})
}

func TestSequenceTail(t *testing.T) {
	long := strings.Repeat("9", logread.CleanLookback)
	for _, c := range []struct {
		before, text string
		whole        bool
		want         int
	}{
		{"", "999m text", true, 0},
		{"a\x1b[", "999mtext", true, 4},
		{"a\x1b[31", "mtext", false, 1},
		{"a\x1b[31m", "text", false, 0},
		{"a\x1b]0;title", "more\atext", false, 5},
		{"a\x1b]0;title", "more\x1b\\text", false, 6},
		{"a\x1b]0;title\x1b", "\\text", false, 1},
		{"a\x1b[31mb", "999m", false, 0},
		{"\x1b", "[", false, 1},
		{"a\x1b[1", "22", false, 2},                                   // runs past text's end
		{long, "99;1mtext", false, 5},                                 // a CSI longer than the look back
		{long, "99;1mtext", true, 0},                                  // ... but the log starts with these digits
		{long[:100], "99;1mtext", false, 0},                           // too little to tell
		{long + "x", "abc\adef", false, 4},                            // a string's base64, ended by BEL
		{long + "x", "abc\x1b\\def", false, 5},                        // by ST
		{long + "x", "abc\ndef\a", false, 0},                          // a long line, then a bell on the next
		{long + "\n", "99m", false, 0},                                // a line end: no CSI, no string
		{strings.Repeat("ab", logread.CleanLookback), "cd", false, 0}, // no terminator: text
	} {
		assert.Equal(t, c.want, logread.SequenceTail(c.before, c.text, c.whole), "%q | %q", trim(c.before), c.text)
	}
}

func trim(s string) string {
	if len(s) > 20 {
		return "..." + s[len(s)-20:]
	}
	return s
}

// Past the tail SequenceTail finds, nothing more is a tail: the window
// begins in the ground state.
func FuzzSequenceTail(f *testing.F) {
	f.Add("a\x1b[", "999mtext")
	f.Add("a\x1b]0;title", "more\atext")
	f.Add("a\x1b]0;t\x1b", "\\x")
	f.Add("\x1bP1;2q", "abc\x1b\\d")
	f.Fuzz(func(t *testing.T, before, text string) {
		if len(before) > logread.CleanLookback {
			before = before[len(before)-logread.CleanLookback:]
		}
		n := logread.SequenceTail(before, text, false)
		if n < 0 || n > len(text) {
			t.Fatalf("logread.SequenceTail(%q, %q) = %d, out of text", before, text, n)
		}
		if n > 0 && n < len(text) && strings.Contains(before, "\x1b") {
			if m := logread.SequenceTail(before+text[:n], text[n:], false); m != 0 {
				t.Fatalf("after the tail %q of %q, %q begins with another tail of %d", text[:n], before, text[n:], m)
			}
		}
	})
}

// A Lookback written chunk by chunk answers what SequenceTail answers of
// the stream's last CleanLookback bytes. The stream is a pad of
// padLen*2 bytes, then s's pieces between "|".
func FuzzLookback(f *testing.F) {
	f.Add(false, byte('x'), uint16(0), "a\x1b]0;ti|tle|more\atext|\x1b]52;c;|QUJD|QUJD|\x1b\\|after")
	f.Add(false, byte('9'), uint16(logread.CleanLookback/2), "9;|1|mtext|99")
	f.Add(true, byte('9'), uint16(logread.CleanLookback/2), "9;|1|mtext")
	f.Add(false, byte('A'), uint16(logread.CleanLookback/2), "AB|CD\a|x|y\x1b|\\z")
	f.Add(false, byte('\x1b'), uint16(3), "[|?|?|1|;|2| |h|x\x1b P|1;2|q|da|ta|\x1b\\")
	f.Add(false, byte('\x1b'), uint16(1), " | |(|B|\x1bX|sos|\x9c|\x1b^|pm|\x18|\x1b_|apc\a|\x1a")
	f.Add(false, byte('y'), uint16(logread.CleanLookback/4), "\x1b]0;t|"+strings.Repeat("t", logread.CleanLookback/2)+"|tt|\a")
	f.Fuzz(func(t *testing.T, whole bool, padByte byte, padLen uint16, s string) {
		stream := strings.Repeat(string([]byte{padByte}), 2*int(padLen))
		l := logread.NewLookback(stream, whole)
		total := len(stream)
		for _, text := range strings.Split(s, "|") {
			stream = stream[max(0, len(stream)-logread.CleanLookback):]
			want := logread.SequenceTail(stream, text, whole && len(stream) == total)
			require.Equal(t, want, l.Tail(text), "%q | %q", trim(stream), text)
			l.Write(text)
			stream += text
			total += len(text)
		}
	})
}
