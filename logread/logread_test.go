package logread_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/logframe"
	"github.com/agent-box/agent-box/logread"
)

// countingReader records every ReadAt, so tests can check that a window
// reads only what it needs.
type countingReader struct {
	r     io.ReaderAt
	mu    sync.Mutex
	total int64
	max   int
	calls int
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	c.mu.Lock()
	c.total += int64(len(p))
	c.max = max(c.max, len(p))
	c.calls++
	c.mu.Unlock()
	return c.r.ReadAt(p, off)
}

func read(t testing.TB, log []byte, req logread.Request) (logread.Window, error) {
	t.Helper()
	return logread.Read(bytes.NewReader(log), int64(len(log)), req)
}

func mustRead(t testing.TB, log []byte, req logread.Request) logread.Window {
	t.Helper()
	w, err := read(t, log, req)
	require.NoError(t, err)
	return w
}

// frames builds a framed log from alternating stream, payload pairs.
func frames(parts ...any) []byte {
	var log []byte
	for i := 0; i < len(parts); i += 2 {
		log = logframe.AppendFrames(log, parts[i].(logframe.Stream), []byte(parts[i+1].(string)))
	}
	return log
}

const (
	out = logframe.Stdout
	er  = logframe.Stderr
)

// flen is the length of the frame line carrying payload p.
func flen(p string) int64 { return int64(logframe.FrameLen(len(p))) }

func TestValidation(t *testing.T) {
	log := []byte("hello\n")
	re := regexp.MustCompile("x")
	tests := []struct {
		name string
		req  logread.Request
		want error
		msg  string // part of the message that tells the caller what to do
	}{
		{"max_bytes zero", logread.Request{}, logread.ErrBadMaxBytes, "got 0"},
		{"max_bytes negative", logread.Request{MaxBytes: -1}, logread.ErrBadMaxBytes, "got -1"},
		{"max_bytes too large", logread.Request{MaxBytes: logread.MaxWindow + 1}, logread.ErrBadMaxBytes, "got 1048577"},
		{"offset past end", logread.Request{MaxBytes: 10, Offset: 7}, logread.ErrBadOffset, "log size is 6"},
		{"tail negative", logread.Request{MaxBytes: 10, TailLines: -1}, logread.ErrBadRequest, "between 1 and 10000"},
		{"tail too many", logread.Request{MaxBytes: 10, TailLines: logread.MaxTailLines + 1}, logread.ErrBadRequest, "got 10001"},
		{"tail with offset", logread.Request{MaxBytes: 10, TailLines: 1, Offset: -3}, logread.ErrBadRequest, "leave offset out"},
		{"tail with grep", logread.Request{MaxBytes: 10, TailLines: 1, Grep: re}, logread.ErrBadRequest, "cannot be combined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := read(t, log, tt.req)
			require.ErrorIs(t, err, tt.want)
			assert.Contains(t, err.Error(), tt.msg)
		})
	}
	_, err := logread.Read(bytes.NewReader(nil), -1, logread.Request{MaxBytes: 1})
	assert.ErrorIs(t, err, logread.ErrBadRequest)
}

func TestCombinedText(t *testing.T) {
	const euro = "\u20ac" // E2 82 AC
	const clef = "\U0001D11E"
	tests := []struct {
		name string
		log  string
		req  logread.Request
		want logread.Window // Size is filled in
	}{
		{"empty log", "", logread.Request{MaxBytes: 10},
			logread.Window{}},
		{"whole log", "hello\n", logread.Request{MaxBytes: 10},
			logread.Window{EndOffset: 6, Content: "hello\n"}},
		{"cut at max_bytes", "hello world", logread.Request{MaxBytes: 5},
			logread.Window{EndOffset: 5, Truncated: true, Content: "hello"}},
		{"offset equals size", "abc", logread.Request{MaxBytes: 5, Offset: 3},
			logread.Window{Offset: 3, EndOffset: 3}},
		{"resume in the middle", "hello world", logread.Request{MaxBytes: 3, Offset: 6},
			logread.Window{Offset: 6, EndOffset: 9, Truncated: true, Content: "wor"}},
		// € is bytes 2..4: a window ending after byte 2 or 3 ends before it.
		{"rune straddles end by 2", "ab" + euro + "cd", logread.Request{MaxBytes: 3},
			logread.Window{EndOffset: 2, Truncated: true, Content: "ab"}},
		{"rune straddles end by 1", "ab" + euro + "cd", logread.Request{MaxBytes: 4},
			logread.Window{EndOffset: 2, Truncated: true, Content: "ab"}},
		{"rune ends at end", "ab" + euro + "cd", logread.Request{MaxBytes: 5},
			logread.Window{EndOffset: 5, Truncated: true, Content: "ab" + euro}},
		{"max_bytes smaller than rune grows window", "ab" + euro + "cd", logread.Request{MaxBytes: 1, Offset: 2},
			logread.Window{Offset: 2, EndOffset: 5, Truncated: true, Content: euro}},
		{"4-byte rune with max_bytes 2", clef + "x", logread.Request{MaxBytes: 2},
			logread.Window{EndOffset: 4, Truncated: true, Content: clef}},
		{"growing stops at an invalid sequence", "\xe2Ab", logread.Request{MaxBytes: 1},
			logread.Window{EndOffset: 1, Truncated: true, Content: "\uFFFD", Lossy: true}},
		{"incomplete rune at end of growing log is held back", "ab\xe2\x82", logread.Request{MaxBytes: 10},
			logread.Window{EndOffset: 2, Truncated: true, Content: "ab"}},
		{"incomplete rune at end of final log is returned", "ab\xe2\x82", logread.Request{MaxBytes: 10, Final: true},
			logread.Window{EndOffset: 4, Content: "ab\uFFFD\uFFFD", Lossy: true}},
		{"incomplete rune alone at end of growing log: empty window", "ab\xe2\x82", logread.Request{MaxBytes: 10, Offset: 2},
			logread.Window{Offset: 2, EndOffset: 2, Truncated: true}},
		{"incomplete rune alone at end of final log is returned", "ab\xe2\x82", logread.Request{MaxBytes: 10, Offset: 2, Final: true},
			logread.Window{Offset: 2, EndOffset: 4, Content: "\uFFFD\uFFFD", Lossy: true}},
		{"invalid byte replaced", "a\xffb", logread.Request{MaxBytes: 10},
			logread.Window{EndOffset: 3, Content: "a\uFFFDb", Lossy: true}},
		{"lead byte before ASCII is not held back", "a\xe2Ab", logread.Request{MaxBytes: 3},
			logread.Window{EndOffset: 3, Truncated: true, Content: "a\uFFFDA", Lossy: true}},
		{"lead byte at window end is held back", "a\xe2Ab", logread.Request{MaxBytes: 2},
			logread.Window{EndOffset: 1, Truncated: true, Content: "a"}},
		// "héllo": h C3 A9 l l o
		{"negative offset on a lead byte", "h\u00e9llo", logread.Request{MaxBytes: 10, Offset: -5},
			logread.Window{Offset: 1, EndOffset: 6, Content: "\u00e9llo", Skipped: []logread.Gap{{0, 1}}}},
		{"negative offset aligned forward", "h\u00e9llo", logread.Request{MaxBytes: 10, Offset: -4},
			logread.Window{Offset: 3, EndOffset: 6, Content: "llo", Skipped: []logread.Gap{{0, 3}}}},
		{"negative offset past start", "abc", logread.Request{MaxBytes: 2, Offset: -10},
			logread.Window{EndOffset: 2, Truncated: true, Content: "ab"}},
		{"raw is ignored for combined logs", "abc", logread.Request{MaxBytes: 2, Raw: true},
			logread.Window{EndOffset: 2, Truncated: true, Content: "ab"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.want.Size = int64(len(tt.log))
			assert.Equal(t, tt.want, mustRead(t, []byte(tt.log), tt.req))
		})
	}
}

func TestCombinedExact(t *testing.T) {
	tests := []struct {
		name string
		log  string
		req  logread.Request
		want logread.Window
	}{
		{"cut inside a rune", "ab\u20accd", logread.Request{MaxBytes: 3, Exact: true},
			logread.Window{EndOffset: 3, Truncated: true, Bytes: []byte("ab\xe2")}},
		{"negative offset is not aligned", "h\u00e9llo", logread.Request{MaxBytes: 2, Offset: -4, Exact: true},
			logread.Window{Offset: 2, EndOffset: 4, Truncated: true, Bytes: []byte("\xa9l"), Skipped: []logread.Gap{{0, 2}}}},
		{"binary", "\x00\xff\x80", logread.Request{MaxBytes: 8, Exact: true},
			logread.Window{EndOffset: 3, Bytes: []byte("\x00\xff\x80")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.want.Size = int64(len(tt.log))
			assert.Equal(t, tt.want, mustRead(t, []byte(tt.log), tt.req))
		})
	}
}

func TestFramedDecoded(t *testing.T) {
	three := frames(out, "hello\n", er, "oops\n", out, "bye\n")
	f0, f1, f2 := flen("hello\n"), flen("oops\n"), flen("bye\n")
	split := frames(out, "a\xe2\x82", er, "x\n", out, "\xacb\n")
	partial := append(frames(out, "one\n"), "2 SGVs"...) // "Hel", cut at a base64 quantum
	bad := append(frames(out, "one\n"), "2 SGV"...)      // cut inside a quantum
	tests := []struct {
		name string
		log  []byte
		req  logread.Request
		want logread.Window
	}{
		{"interleaved streams", three, logread.Request{MaxBytes: 1000, Framed: true},
			logread.Window{EndOffset: f0 + f1 + f2, Content: "hello\noops\nbye\n", Stdout: "hello\nbye\n", Stderr: "oops\n",
				Chunks: []logread.Chunk{{"stdout", "hello\n"}, {"stderr", "oops\n"}, {"stdout", "bye\n"}}}},
		{"adjacent frames of one stream merge", frames(out, "a", out, "b", er, "c"), logread.Request{MaxBytes: 1000, Framed: true},
			logread.Window{EndOffset: 3 * flen("a"), Content: "abc", Stdout: "ab", Stderr: "c",
				Chunks: []logread.Chunk{{"stdout", "ab"}, {"stderr", "c"}}}},
		{"cut at last complete frame", three, logread.Request{MaxBytes: int(f0 + f1 + 3), Framed: true},
			logread.Window{EndOffset: f0 + f1, Truncated: true, Content: "hello\noops\n", Stdout: "hello\n", Stderr: "oops\n",
				Chunks: []logread.Chunk{{"stdout", "hello\n"}, {"stderr", "oops\n"}}}},
		{"frame longer than max_bytes is returned whole", three, logread.Request{MaxBytes: 3, Framed: true},
			logread.Window{EndOffset: f0, Truncated: true, Content: "hello\n", Stdout: "hello\n",
				Chunks: []logread.Chunk{{"stdout", "hello\n"}}}},
		{"resume at a boundary", three, logread.Request{MaxBytes: 1000, Framed: true, Offset: f0 + f1},
			logread.Window{Offset: f0 + f1, EndOffset: f0 + f1 + f2, Content: "bye\n", Stdout: "bye\n",
				Chunks: []logread.Chunk{{"stdout", "bye\n"}}}},
		{"negative offset aligns to the next frame", three, logread.Request{MaxBytes: 1000, Framed: true, Offset: -(f2 + 3)},
			logread.Window{Offset: f0 + f1, EndOffset: f0 + f1 + f2, Content: "bye\n", Stdout: "bye\n",
				Chunks: []logread.Chunk{{"stdout", "bye\n"}}, Skipped: []logread.Gap{{0, f0 + f1}}}},
		{"negative offset on a boundary stays", three, logread.Request{MaxBytes: 1000, Framed: true, Offset: -(f1 + f2)},
			logread.Window{Offset: f0, EndOffset: f0 + f1 + f2, Content: "oops\nbye\n", Stdout: "bye\n", Stderr: "oops\n",
				Chunks: []logread.Chunk{{"stderr", "oops\n"}, {"stdout", "bye\n"}}, Skipped: []logread.Gap{{0, f0}}}},
		{"rune split across frames of one stream", frames(out, "\xe2\x82", out, "\xac"), logread.Request{MaxBytes: 1000, Framed: true},
			logread.Window{EndOffset: flen("ab") + flen("a"), Content: "\u20ac", Stdout: "\u20ac",
				Chunks: []logread.Chunk{{"stdout", "\u20ac"}}}},
		{"rune split around the other stream moves to its last chunk", split, logread.Request{MaxBytes: 1000, Framed: true},
			logread.Window{EndOffset: int64(len(split)), Content: "ax\n\u20acb\n", Stdout: "a\u20acb\n", Stderr: "x\n",
				Chunks: []logread.Chunk{{"stdout", "a"}, {"stderr", "x\n"}, {"stdout", "\u20acb\n"}}}},
		{"exact fills only the byte fields", split, logread.Request{MaxBytes: 1000, Framed: true, Exact: true},
			logread.Window{EndOffset: int64(len(split)), StdoutBytes: []byte("a\xe2\x82\xacb\n"), StderrBytes: []byte("x\n")}},
		{"partial last line of a growing log is left", partial, logread.Request{MaxBytes: 1000, Framed: true},
			logread.Window{EndOffset: flen("one\n"), Truncated: true, Content: "one\n", Stdout: "one\n",
				Chunks: []logread.Chunk{{"stdout", "one\n"}}}},
		{"only a partial line: empty window", partial, logread.Request{MaxBytes: 1000, Framed: true, Offset: flen("one\n")},
			logread.Window{Offset: flen("one\n"), EndOffset: flen("one\n"), Truncated: true}},
		{"final decodes a partial line that parses", partial, logread.Request{MaxBytes: 1000, Framed: true, Final: true},
			logread.Window{EndOffset: int64(len(partial)), Content: "one\nHel", Stdout: "one\n", Stderr: "Hel",
				Chunks: []logread.Chunk{{"stdout", "one\n"}, {"stderr", "Hel"}}}},
		{"final reports a partial line that does not parse", bad, logread.Request{MaxBytes: 1000, Framed: true, Final: true},
			logread.Window{EndOffset: int64(len(bad)), Content: "one\n", Stdout: "one\n",
				Chunks: []logread.Chunk{{"stdout", "one\n"}}, Skipped: []logread.Gap{{flen("one\n"), 5}}}},
		{"only a partial line: negative offset aligns back to 0", []byte("1 QQ"), logread.Request{MaxBytes: 1000, Framed: true, Offset: -2},
			logread.Window{Truncated: true}},
		{"only a partial line: tail_lines", []byte("1 QQ"), logread.Request{MaxBytes: 1000, Framed: true, TailLines: 1},
			logread.Window{Truncated: true}},
		{"only a partial line: final tail_lines reports it", []byte("1 QQ"), logread.Request{MaxBytes: 1000, Framed: true, TailLines: 1, Final: true},
			logread.Window{EndOffset: 4, Skipped: []logread.Gap{{0, 4}}}},
		{"negative offset inside the partial line aligns back to its start", partial, logread.Request{MaxBytes: 1000, Framed: true, Offset: -2},
			logread.Window{Offset: flen("one\n"), EndOffset: flen("one\n"), Truncated: true, Skipped: []logread.Gap{{0, flen("one\n")}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.want.Size = int64(len(tt.log))
			assert.Equal(t, tt.want, mustRead(t, tt.log, tt.req))
		})
	}
}

// A text window ends where neither stream is inside a character, so a
// character split across frames is not split across windows; Exact ends at
// the last whole frame.
func TestFramedHoldsBackSplitRune(t *testing.T) {
	log := frames(out, "ab", out, "c\xe2", er, "E", out, "\x82\xac")
	f0, f1, f2, f3 := flen("ab"), flen("c\xe2"), flen("E"), flen("\x82\xac")
	req := logread.Request{MaxBytes: int(f0 + f1 + f2), Framed: true}

	w := mustRead(t, log, req)
	assert.Equal(t, f0, w.EndOffset)
	assert.Equal(t, "ab", w.Stdout)
	assert.False(t, w.Lossy)

	req.Offset = w.EndOffset
	req.MaxBytes = int(f1 + f2 + f3)
	w = mustRead(t, log, req)
	assert.Equal(t, int64(len(log)), w.EndOffset)
	assert.Equal(t, "c\u20ac", w.Stdout)
	assert.Equal(t, "cE\u20ac", w.Content)
	assert.False(t, w.Lossy)

	exact := logread.Request{MaxBytes: int(f0 + f1 + f2), Framed: true, Exact: true}
	w = mustRead(t, log, exact)
	assert.Equal(t, f0+f1+f2, w.EndOffset)
	assert.Equal(t, []byte("abc\xe2"), w.StdoutBytes)

	// A window of one frame cannot end earlier: it keeps the frame, lossy.
	w = mustRead(t, log, logread.Request{MaxBytes: 1, Framed: true, Offset: f0})
	assert.Equal(t, f0+f1, w.EndOffset)
	assert.Equal(t, "c\uFFFD", w.Stdout)
	assert.True(t, w.Lossy)
}

func TestFramedErrors(t *testing.T) {
	good := frames(out, "hello\n")
	t.Run("offset not at a boundary", func(t *testing.T) {
		_, err := read(t, good, logread.Request{MaxBytes: 100, Framed: true, Offset: 3})
		require.ErrorIs(t, err, logread.ErrBadRequest)
		assert.Contains(t, err.Error(), "offset 3 is not a frame boundary")
	})
	t.Run("offset at size is not an error", func(t *testing.T) {
		bad := append(frames(out, "x"), "1 QQ"...) // partial, size is not a boundary
		w := mustRead(t, bad, logread.Request{MaxBytes: 100, Framed: true, Offset: int64(len(bad))})
		assert.Equal(t, int64(len(bad)), w.EndOffset)
		assert.False(t, w.Truncated)
	})
	malformed := append(append(frames(out, "hello\n"), "3 QQ==\n"...), frames(out, "x")...)
	for _, req := range []logread.Request{
		{MaxBytes: 100, Framed: true},
		{MaxBytes: 100, Framed: true, TailLines: 5},
		{MaxBytes: 100, Framed: true, Grep: regexp.MustCompile("x")},
	} {
		t.Run(fmt.Sprintf("malformed line tail=%d grep=%v", req.TailLines, req.Grep != nil), func(t *testing.T) {
			_, err := read(t, malformed, req)
			require.ErrorIs(t, err, logframe.ErrMalformed)
			assert.Contains(t, err.Error(), fmt.Sprintf("offset %d", len(good)))
		})
	}
	t.Run("line longer than MaxLine", func(t *testing.T) {
		long := append([]byte("1 "), bytes.Repeat([]byte("QUFB"), logframe.MaxLine/4+1)...)
		long = append(long, "\n1 QQ==\n"...)
		_, err := read(t, long, logread.Request{MaxBytes: 10, Framed: true})
		require.ErrorIs(t, err, logframe.ErrMalformed)
		assert.Contains(t, err.Error(), "offset 0")
		// No boundary within MaxLine of a negative offset's start.
		_, err = read(t, long, logread.Request{MaxBytes: 10, Framed: true, Offset: -int64(len(long) - 1)})
		require.ErrorIs(t, err, logframe.ErrMalformed)
	})
	t.Run("partial last line longer than MaxLine", func(t *testing.T) {
		long := append(frames(out, "x"), "1 "...)
		long = append(long, bytes.Repeat([]byte("A"), logframe.MaxLine)...)
		for _, req := range []logread.Request{
			{MaxBytes: 10, Framed: true, Offset: -5},
			{MaxBytes: 10, Framed: true, TailLines: 1},
			{MaxBytes: 10, Framed: true, Raw: true, TailLines: 1},
		} {
			_, err := read(t, long, req)
			require.ErrorIs(t, err, logframe.ErrMalformed, "%+v", req)
		}
	})
	t.Run("short reader", func(t *testing.T) {
		_, err := logread.Read(bytes.NewReader(good), int64(len(good))+5, logread.Request{MaxBytes: 100, Framed: true})
		require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	})
}

func TestFramedRaw(t *testing.T) {
	log := frames(out, "hello\n", er, "oops\n")
	f0 := flen("hello\n")
	partial := append(append([]byte(nil), log...), "1 QQ"...)
	tests := []struct {
		name string
		log  []byte
		req  logread.Request
		want logread.Window
	}{
		{"lines as stored", log, logread.Request{MaxBytes: 1000, Framed: true, Raw: true},
			logread.Window{EndOffset: int64(len(log)), Content: string(log)}},
		{"cut at a frame boundary", log, logread.Request{MaxBytes: int(f0 + 2), Framed: true, Raw: true},
			logread.Window{EndOffset: f0, Truncated: true, Content: string(log[:f0])}},
		{"long frame whole", log, logread.Request{MaxBytes: 1, Framed: true, Raw: true, Exact: true},
			logread.Window{EndOffset: f0, Truncated: true, Bytes: log[:f0]}},
		{"partial line held back", partial, logread.Request{MaxBytes: 1000, Framed: true, Raw: true},
			logread.Window{EndOffset: int64(len(log)), Truncated: true, Content: string(log)}},
		{"partial line returned when final", partial, logread.Request{MaxBytes: 1000, Framed: true, Raw: true, Final: true},
			logread.Window{EndOffset: int64(len(partial)), Content: string(partial)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.want.Size = int64(len(tt.log))
			assert.Equal(t, tt.want, mustRead(t, tt.log, tt.req))
		})
	}
}

func TestTailLinesCombined(t *testing.T) {
	tests := []struct {
		name string
		log  string
		req  logread.Request
		want logread.Window
	}{
		{"last two", "a\nb\nc\n", logread.Request{MaxBytes: 100, TailLines: 2},
			logread.Window{Offset: 2, EndOffset: 6, Content: "b\nc\n", Skipped: []logread.Gap{{0, 2}}}},
		{"last line without newline counts", "a\nb\nc", logread.Request{MaxBytes: 100, TailLines: 1},
			logread.Window{Offset: 4, EndOffset: 5, Content: "c", Skipped: []logread.Gap{{0, 4}}}},
		{"fewer lines than asked", "a\nb\n", logread.Request{MaxBytes: 100, TailLines: 5},
			logread.Window{EndOffset: 4, Content: "a\nb\n"}},
		{"one empty last line", "x\n\n", logread.Request{MaxBytes: 100, TailLines: 1},
			logread.Window{Offset: 2, EndOffset: 3, Content: "\n", Skipped: []logread.Gap{{0, 2}}}},
		{"empty log", "", logread.Request{MaxBytes: 100, TailLines: 3},
			logread.Window{}},
		// [5,11) is the budget; "bb\n" starts at 5 and fits exactly.
		{"budget fits exactly", "aaaa\nbb\ncc\n", logread.Request{MaxBytes: 6, TailLines: 3},
			logread.Window{Offset: 5, EndOffset: 11, Content: "bb\ncc\n", Skipped: []logread.Gap{{0, 5}}}},
		{"budget cuts a line: complete lines only", "aaaa\nbb\ncc\n", logread.Request{MaxBytes: 5, TailLines: 3},
			logread.Window{Offset: 8, EndOffset: 11, Content: "cc\n", Skipped: []logread.Gap{{0, 8}}}},
		{"last line longer than budget: its end", "abcdefgh", logread.Request{MaxBytes: 3, TailLines: 1},
			logread.Window{Offset: 5, EndOffset: 8, Content: "fgh", Skipped: []logread.Gap{{0, 5}}}},
		{"its end starts at a character", "ab\u20acd", logread.Request{MaxBytes: 3, TailLines: 1},
			logread.Window{Offset: 5, EndOffset: 6, Content: "d", Skipped: []logread.Gap{{0, 5}}}},
		{"incomplete last character of growing log held back", "a\nb\xe2\x82", logread.Request{MaxBytes: 100, TailLines: 1},
			logread.Window{Offset: 2, EndOffset: 3, Truncated: true, Content: "b", Skipped: []logread.Gap{{0, 2}}}},
		{"exact", "a\nb\xe2\x82", logread.Request{MaxBytes: 100, TailLines: 1, Exact: true},
			logread.Window{Offset: 2, EndOffset: 5, Bytes: []byte("b\xe2\x82"), Skipped: []logread.Gap{{0, 2}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.want.Size = int64(len(tt.log))
			assert.Equal(t, tt.want, mustRead(t, []byte(tt.log), tt.req))
		})
	}
}

func TestTailLinesFramed(t *testing.T) {
	log := frames(out, "zero\n", out, "l1\nl2", er, "E\n", out, "l3\n")
	f0, f1, f2 := flen("zero\n"), flen("l1\nl2"), flen("E\n")
	partial := append(append([]byte(nil), log...), "2 SGVs"...)
	tests := []struct {
		name string
		log  []byte
		req  logread.Request
		want logread.Window
	}{
		// The interleaved output is "zero\nl1\nl2E\nl3\n": the last two lines
		// start inside frame 1, after "l1\n".
		{"lines of the interleaved output", log, logread.Request{MaxBytes: 1000, Framed: true, TailLines: 2},
			logread.Window{Offset: f0, EndOffset: int64(len(log)), Content: "l2E\nl3\n", Stdout: "l2l3\n", Stderr: "E\n",
				Chunks: []logread.Chunk{{"stdout", "l2"}, {"stderr", "E\n"}, {"stdout", "l3\n"}}, Skipped: []logread.Gap{{0, f0}}}},
		{"line starting at a frame boundary", log, logread.Request{MaxBytes: 1000, Framed: true, TailLines: 1},
			logread.Window{Offset: f0 + f1 + f2, EndOffset: int64(len(log)), Content: "l3\n", Stdout: "l3\n",
				Chunks: []logread.Chunk{{"stdout", "l3\n"}}, Skipped: []logread.Gap{{0, f0 + f1 + f2}}}},
		{"all lines", log, logread.Request{MaxBytes: 1000, Framed: true, TailLines: 100, Exact: true},
			logread.Window{EndOffset: int64(len(log)), StdoutBytes: []byte("zero\nl1\nl2l3\n"), StderrBytes: []byte("E\n")}},
		{"budget: complete lines of the frames that fit", log, logread.Request{MaxBytes: int(f1 + f2 + flen("l3\n")), Framed: true, TailLines: 100},
			logread.Window{Offset: f0, EndOffset: int64(len(log)), Content: "l2E\nl3\n", Stdout: "l2l3\n", Stderr: "E\n",
				Chunks: []logread.Chunk{{"stdout", "l2"}, {"stderr", "E\n"}, {"stdout", "l3\n"}}, Skipped: []logread.Gap{{0, f0}}}},
		{"last frame longer than budget is read", log, logread.Request{MaxBytes: 2, Framed: true, TailLines: 3},
			logread.Window{Offset: f0 + f1 + f2, EndOffset: int64(len(log)), Content: "l3\n", Stdout: "l3\n",
				Chunks: []logread.Chunk{{"stdout", "l3\n"}}, Skipped: []logread.Gap{{0, f0 + f1 + f2}}}},
		{"partial frame of a growing log is left", partial, logread.Request{MaxBytes: 1000, Framed: true, TailLines: 1},
			logread.Window{Offset: f0 + f1 + f2, EndOffset: int64(len(log)), Truncated: true, Content: "l3\n", Stdout: "l3\n",
				Chunks: []logread.Chunk{{"stdout", "l3\n"}}, Skipped: []logread.Gap{{0, f0 + f1 + f2}}}},
		{"final decodes the partial frame", partial, logread.Request{MaxBytes: 1000, Framed: true, TailLines: 2, Final: true},
			logread.Window{Offset: f0 + f1 + f2, EndOffset: int64(len(partial)), Content: "l3\nHel", Stdout: "l3\n", Stderr: "Hel",
				Chunks: []logread.Chunk{{"stdout", "l3\n"}, {"stderr", "Hel"}}, Skipped: []logread.Gap{{0, f0 + f1 + f2}}}},
		{"raw: last frame lines", log, logread.Request{MaxBytes: 1000, Framed: true, Raw: true, TailLines: 1},
			logread.Window{Offset: int64(len(log)) - flen("l3\n"), EndOffset: int64(len(log)), Content: string(log[int64(len(log))-flen("l3\n"):]),
				Skipped: []logread.Gap{{0, int64(len(log)) - flen("l3\n")}}}},
		{"raw: partial line of growing log is left", partial, logread.Request{MaxBytes: 1000, Framed: true, Raw: true, TailLines: 1},
			logread.Window{Offset: int64(len(log)) - flen("l3\n"), EndOffset: int64(len(log)), Truncated: true, Content: string(log[int64(len(log))-flen("l3\n"):]),
				Skipped: []logread.Gap{{0, int64(len(log)) - flen("l3\n")}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.want.Size = int64(len(tt.log))
			assert.Equal(t, tt.want, mustRead(t, tt.log, tt.req))
		})
	}
}

// tail_lines reads back from the end in blocks: a few lines of a large log
// cost a few KiB of reads, and never more than max_bytes (plus the byte
// that shows whether the budget starts a line).
func TestTailLinesReadsLittle(t *testing.T) {
	line := strings.Repeat("x", 99) + "\n"
	log := []byte(strings.Repeat(line, 80_000)) // 8 MB
	c := &countingReader{r: bytes.NewReader(log)}
	w, err := logread.Read(c, int64(len(log)), logread.Request{MaxBytes: logread.MaxWindow, TailLines: 3})
	require.NoError(t, err)
	assert.Equal(t, strings.Repeat(line, 3), w.Content)
	assert.LessOrEqual(t, c.total, int64(8<<10))

	c = &countingReader{r: bytes.NewReader(log)}
	w, err = logread.Read(c, int64(len(log)), logread.Request{MaxBytes: 100_000, TailLines: logread.MaxTailLines})
	require.NoError(t, err)
	assert.Equal(t, 1000, strings.Count(w.Content, "\n"))
	assert.LessOrEqual(t, c.total, int64(100_001))

	framed := logframe.AppendFrames(nil, out, nil)
	for range 20_000 {
		framed = logframe.AppendFrames(framed, out, []byte(line))
	}
	c = &countingReader{r: bytes.NewReader(framed)}
	w, err = logread.Read(c, int64(len(framed)), logread.Request{MaxBytes: logread.MaxWindow, Framed: true, TailLines: 3})
	require.NoError(t, err)
	assert.Equal(t, strings.Repeat(line, 3), w.Stdout)
	assert.LessOrEqual(t, c.total, int64(8<<10))
}

// A window reads only its bytes: max_bytes plus a few bytes of lookahead.
func TestWindowReadsLittle(t *testing.T) {
	log := []byte(strings.Repeat("\u20ac", 400_000))
	for _, req := range []logread.Request{
		{MaxBytes: 1000, Offset: 1000 * 3},
		{MaxBytes: 1000, Offset: -5000},
		{MaxBytes: 1000, Exact: true},
		{MaxBytes: 2, Offset: 300},
	} {
		c := &countingReader{r: bytes.NewReader(log)}
		_, err := logread.Read(c, int64(len(log)), req)
		require.NoError(t, err)
		assert.LessOrEqual(t, c.total, int64(req.MaxBytes+3), "%+v", req)
	}
}

func TestGrepCombined(t *testing.T) {
	foo := regexp.MustCompile("foo")
	tests := []struct {
		name string
		log  string
		req  logread.Request
		want logread.Window
	}{
		{"matches and gaps", "foo 1\nbar\nfoo 2\nbaz\n", logread.Request{MaxBytes: 100, Grep: foo},
			logread.Window{EndOffset: 20, Matches: []logread.Match{{Offset: 0, Line: "foo 1"}, {Offset: 10, Line: "foo 2"}},
				Skipped: []logread.Gap{{6, 4}, {16, 4}}}},
		{"adjacent non-matching lines are one gap", "a\nb\nfoo\n", logread.Request{MaxBytes: 100, Grep: foo},
			logread.Window{EndOffset: 8, Matches: []logread.Match{{Offset: 4, Line: "foo"}}, Skipped: []logread.Gap{{0, 4}}}},
		{"no match: the whole window is a gap", "a\nb\n", logread.Request{MaxBytes: 100, Grep: foo},
			logread.Window{EndOffset: 4, Skipped: []logread.Gap{{0, 4}}}},
		{"line cut by window end is left for the next window", "foo\nfoobar\n", logread.Request{MaxBytes: 6, Grep: foo},
			logread.Window{EndOffset: 4, Truncated: true, Matches: []logread.Match{{Offset: 0, Line: "foo"}}}},
		{"unterminated last line of growing log is left", "x\nfoo", logread.Request{MaxBytes: 100, Grep: foo},
			logread.Window{EndOffset: 2, Truncated: true, Skipped: []logread.Gap{{0, 2}}}},
		{"unterminated last line of final log is matched", "x\nfoo", logread.Request{MaxBytes: 100, Grep: foo, Final: true},
			logread.Window{EndOffset: 5, Matches: []logread.Match{{Offset: 2, Line: "foo"}}, Skipped: []logread.Gap{{0, 2}}}},
		// The writer is still writing it: nothing to return yet.
		{"unterminated last line alone: an empty window", "x\nfoo", logread.Request{MaxBytes: 100, Grep: foo, Offset: 2},
			logread.Window{Offset: 2, EndOffset: 2, Truncated: true}},
		// "foof", then "oofo" and "o\n", which do not match.
		{"line longer than max_bytes is matched in parts", "foofoofoo\n", logread.Request{MaxBytes: 4, Grep: foo},
			logread.Window{EndOffset: 10, Matches: []logread.Match{{Offset: 0, Line: "foof", Part: true}}, Skipped: []logread.Gap{{4, 6}}}},
		{"long line split before a character", "xfo\u20ac\n", logread.Request{MaxBytes: 5, Grep: regexp.MustCompile("fo")},
			logread.Window{EndOffset: 7, Matches: []logread.Match{{Offset: 0, Line: "xfo", Part: true}}, Skipped: []logread.Gap{{3, 4}}}},
		{"negative offset gap merges with the first gap", "zzz\nbar\nfoo\n", logread.Request{MaxBytes: 100, Grep: foo, Offset: -8},
			logread.Window{Offset: 4, EndOffset: 12, Matches: []logread.Match{{Offset: 8, Line: "foo"}}, Skipped: []logread.Gap{{0, 8}}}},
		{"invalid bytes in a match", "foo\xff\n", logread.Request{MaxBytes: 100, Grep: foo},
			logread.Window{EndOffset: 5, Lossy: true, Matches: []logread.Match{{Offset: 0, Line: "foo\uFFFD"}}}},
		// Each \xff becomes 3 bytes of text: the second match does not fit.
		{"matches bounded by max_bytes of text", "f\xff\xff\nf\xff\n", logread.Request{MaxBytes: 9, Grep: regexp.MustCompile("f")},
			logread.Window{EndOffset: 4, Truncated: true, Lossy: true, Matches: []logread.Match{{Offset: 0, Line: "f\uFFFD\uFFFD"}}}},
		{"anchors match per line", "afoo\nfoo\n", logread.Request{MaxBytes: 100, Grep: regexp.MustCompile("^foo$")},
			logread.Window{EndOffset: 9, Matches: []logread.Match{{Offset: 5, Line: "foo"}}, Skipped: []logread.Gap{{0, 5}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.want.Size = int64(len(tt.log))
			assert.Equal(t, tt.want, mustRead(t, []byte(tt.log), tt.req))
		})
	}
}

func TestGrepFramed(t *testing.T) {
	log := frames(out, "foo\nba", er, "err foo\n", out, "r\n")
	f0, f1, f2 := flen("foo\nba"), flen("err foo\n"), flen("r\n")
	held := frames(out, "a\n", out, "foo", out, "bar\n")
	h0, h1, h2 := flen("a\n"), flen("foo"), flen("bar\n")
	tests := []struct {
		name string
		log  []byte
		req  logread.Request
		want logread.Window
	}{
		{"lines per stream", log, logread.Request{MaxBytes: 1000, Framed: true, Grep: regexp.MustCompile("foo")},
			logread.Window{EndOffset: f0 + f1 + f2, Matches: []logread.Match{
				{Offset: 0, Stream: "stdout", Line: "foo"}, {Offset: f0, Stream: "stderr", Line: "err foo"}},
				Skipped: []logread.Gap{{f0 + f1, f2}}}},
		{"a line continues across the other stream's frames", log, logread.Request{MaxBytes: 1000, Framed: true, Grep: regexp.MustCompile("bar")},
			logread.Window{EndOffset: f0 + f1 + f2, Matches: []logread.Match{{Offset: 0, Stream: "stdout", Line: "bar"}},
				Skipped: []logread.Gap{{f0, f1}}}},
		{"no match", log, logread.Request{MaxBytes: 1000, Framed: true, Grep: regexp.MustCompile("zzz"), Offset: f0},
			logread.Window{Offset: f0, EndOffset: f0 + f1 + f2, Skipped: []logread.Gap{{f0, f1 + f2}}}},
		// The first window ends after "a\n"; the second, cut by max_bytes
		// inside "foobar", matches its part "foo"; the third "bar".
		{"windows end where both streams end a line", held, logread.Request{MaxBytes: int(h0 + h1 + 1), Framed: true, Grep: regexp.MustCompile("a")},
			logread.Window{EndOffset: h0 + h1 + h2, Matches: []logread.Match{{Offset: 0, Stream: "stdout", Line: "a"}, {Offset: h0 + h1, Stream: "stdout", Line: "bar", Part: true}},
				Skipped: []logread.Gap{{h0, h1}}}},
		{"next window holds the whole line", held, logread.Request{MaxBytes: int(h1 + h2), Framed: true, Grep: regexp.MustCompile("foobar"), Offset: h0},
			logread.Window{Offset: h0, EndOffset: h0 + h1 + h2, Matches: []logread.Match{{Offset: h0, Stream: "stdout", Line: "foobar"}}}},
		{"no line end in window: parts are matched", held, logread.Request{MaxBytes: 1, Framed: true, Grep: regexp.MustCompile("foo"), Offset: h0},
			logread.Window{Offset: h0, EndOffset: h0 + h1 + h2, Matches: []logread.Match{{Offset: h0, Stream: "stdout", Line: "foo", Part: true}}, Skipped: []logread.Gap{{h0 + h1, h2}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.want.Size = int64(len(tt.log))
			assert.Equal(t, tt.want, mustRead(t, tt.log, tt.req))
		})
	}
}

func TestGrepRawFrames(t *testing.T) {
	log := frames(out, "hello\n", er, "oops\n")
	f0 := flen("hello\n")
	w := mustRead(t, log, logread.Request{MaxBytes: 1000, Framed: true, Raw: true, Grep: regexp.MustCompile("^2 ")})
	assert.Equal(t, []logread.Match{{Offset: f0, Line: strings.TrimSuffix(string(log[f0:]), "\n")}}, w.Matches)
	assert.Equal(t, []logread.Gap{{0, f0}}, w.Skipped)
}

func TestReadErrorsAreWrapped(t *testing.T) {
	boom := errors.New("disk on fire")
	r := readerFunc(func([]byte, int64) (int, error) { return 0, boom })
	for _, req := range []logread.Request{
		{MaxBytes: 10},
		{MaxBytes: 10, Framed: true},
		{MaxBytes: 10, TailLines: 1},
		{MaxBytes: 10, Framed: true, TailLines: 1},
		{MaxBytes: 10, Grep: regexp.MustCompile("x")},
		{MaxBytes: 10, Offset: -3},
	} {
		_, err := logread.Read(r, 100, req)
		assert.ErrorIs(t, err, boom, "%+v", req)
	}
}

type readerFunc func([]byte, int64) (int, error)

func (f readerFunc) ReadAt(p []byte, off int64) (int, error) { return f(p, off) }

func TestFramedHoldBackAtEndOfGrowingLog(t *testing.T) {
	// The writer has written the first byte of a character: a growing log's
	// window ends before it, a final log's window returns it replaced.
	log := frames(out, "ab", out, "c\xe2")
	f0 := flen("ab")
	w := mustRead(t, log, logread.Request{MaxBytes: 1000, Framed: true})
	assert.Equal(t, logread.Window{Size: int64(len(log)), EndOffset: f0, Truncated: true, Content: "ab", Stdout: "ab",
		Chunks: []logread.Chunk{{"stdout", "ab"}}}, w)

	w = mustRead(t, log, logread.Request{MaxBytes: 1000, Framed: true, Final: true})
	assert.Equal(t, logread.Window{Size: int64(len(log)), EndOffset: int64(len(log)), Content: "abc\uFFFD", Stdout: "abc\uFFFD", Lossy: true,
		Chunks: []logread.Chunk{{"stdout", "abc\uFFFD"}}}, w)
}

func TestGrepFramedTextBound(t *testing.T) {
	// Six invalid bytes become 18 bytes of text: with the second line the
	// matches would exceed max_bytes, so the window ends before its frame.
	first := "f" + strings.Repeat("\xff", 6) + "\n"
	log := frames(out, first, out, "f\xff\n")
	f0 := flen(first)
	w := mustRead(t, log, logread.Request{MaxBytes: len(log), Framed: true, Grep: regexp.MustCompile("f")})
	assert.Equal(t, logread.Window{Size: int64(len(log)), EndOffset: f0, Truncated: true, Lossy: true,
		Matches: []logread.Match{{Offset: 0, Stream: "stdout", Line: "f" + strings.Repeat("\uFFFD", 6)}}}, w)

	// The first frame's lines are returned even if longer than max_bytes.
	w = mustRead(t, log, logread.Request{MaxBytes: 1, Framed: true, Grep: regexp.MustCompile("f")})
	assert.Equal(t, f0, w.EndOffset)
	assert.Len(t, w.Matches, 1)
}

// The fixtures are real-looking logs; each read mode gives what a reader of
// the whole file would expect.
func TestFixtures(t *testing.T) {
	fx := fixtures(t)
	all := logread.Request{MaxBytes: logread.MaxWindow, Final: true}

	utf := fx["utf8.txt"]
	w := mustRead(t, utf, all)
	assert.Equal(t, string(utf), w.Content)
	assert.False(t, w.Lossy)
	w = mustRead(t, utf, logread.Request{MaxBytes: 1000, TailLines: 2})
	assert.Equal(t, "mixed: naïve café — “quotes”\nno newline at end: ü", w.Content)

	bin := fx["binary.bin"]
	w = mustRead(t, bin, all)
	assert.True(t, w.Lossy)
	assert.True(t, utf8Valid(w.Content))
	all.Exact = true
	assert.Equal(t, bin, mustRead(t, bin, all).Bytes)
	all.Exact = false

	framedReq := logread.Request{MaxBytes: logread.MaxWindow, Framed: true}
	wantOut := "building...\nstep 1 € done\nstep 2 日本語\nok\n"
	wantErr := "warning: deprecated\nerror: x\n"
	w = mustRead(t, fx["framed.log"], framedReq)
	assert.Equal(t, wantOut, w.Stdout)
	assert.Equal(t, wantErr, w.Stderr)
	assert.Equal(t, "building...\nwarning: deprecated\nstep 1 error: x\n€ done\nstep 2 日本語\nok\n", w.Content)
	assert.False(t, w.Lossy)
	assert.False(t, w.Truncated)

	p := fx["framed-partial.log"]
	w = mustRead(t, p, framedReq)
	assert.Equal(t, wantErr, w.Stderr)
	assert.True(t, w.Truncated)
	assert.Equal(t, int64(len(fx["framed.log"])), w.EndOffset)
	framedReq.Final = true
	w = mustRead(t, p, framedReq)
	assert.Equal(t, wantErr+"partial frame lost in a ", w.Stderr)
	assert.Equal(t, int64(len(p)), w.EndOffset)
	assert.Empty(t, w.Skipped)
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

func TestFramedWindowReadsLittle(t *testing.T) {
	var log []byte
	for i := range 20_000 {
		log = logframe.AppendFrames(log, logframe.Stream(1+i%2), []byte("some output line\n"))
	}
	fl := flen("some output line\n")
	for _, tt := range []struct {
		req  logread.Request
		most int64
	}{
		{logread.Request{MaxBytes: 1000, Framed: true, Offset: 10 * fl}, 1000 + 1},
		{logread.Request{MaxBytes: 1000, Framed: true, Raw: true}, 1000},
		// One frame longer than the window: the window, then one line.
		{logread.Request{MaxBytes: 5, Framed: true}, 5 + logframe.MaxLine},
	} {
		c := &countingReader{r: bytes.NewReader(log)}
		w, err := logread.Read(c, int64(len(log)), tt.req)
		require.NoError(t, err)
		assert.Greater(t, w.EndOffset, w.Offset)
		assert.LessOrEqual(t, c.total, tt.most, "%+v", tt.req)
	}
}
