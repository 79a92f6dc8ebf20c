package logread_test

import (
	"bytes"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/logframe"
	"github.com/agent-box/agent-box/logread"
)

// A grep request scans on from its offset through windows of max_bytes
// until its matches fill max_bytes, the log ends, or a window makes no
// progress; while the log can grow, the unterminated last line is never
// consumed, since its writer is still writing it.
func TestGrepScanCombined(t *testing.T) {
	errRe := regexp.MustCompile("ERROR")
	foo := regexp.MustCompile("foo")
	fail := regexp.MustCompile("FAIL")
	okFail := strings.Repeat("ok\n", 100) + "FAIL x\n"
	tests := []struct {
		name string
		log  string
		req  logread.Request
		want logread.Window // Size is filled in
	}{
		// `echo start; printf 'ERR'; sleep; printf 'OR here\n'`
		{"growing: the partial last line is held: an empty window", "start\nERR", logread.Request{MaxBytes: 100, Offset: 6, Grep: errRe},
			logread.Window{Offset: 6, EndOffset: 6, Truncated: true}},
		{"growing: the window ends before the partial last line", "start\nERR", logread.Request{MaxBytes: 100, Grep: errRe},
			logread.Window{EndOffset: 6, Truncated: true, Skipped: []logread.Gap{{0, 6}}}},
		{"growing: completed, the line is matched whole", "start\nERROR here\n", logread.Request{MaxBytes: 100, Offset: 6, Grep: errRe},
			logread.Window{Offset: 6, EndOffset: 17, Matches: []logread.Match{{Offset: 6, Line: "ERROR here"}}}},
		{"final: the partial last line is matched", "start\nERR", logread.Request{MaxBytes: 100, Offset: 6, Grep: regexp.MustCompile("ERR"), Final: true},
			logread.Window{Offset: 6, EndOffset: 9, Matches: []logread.Match{{Offset: 6, Line: "ERR"}}}},
		// A line longer than max_bytes is matched in parts as long as a
		// window's end cuts it before the end of the log.
		{"a long line not at the end progresses, in parts", "0123456789\nfoo\n", logread.Request{MaxBytes: 4, Grep: regexp.MustCompile("5")},
			logread.Window{EndOffset: 15, Matches: []logread.Match{{Offset: 4, Line: "4567", Part: true}}, Skipped: []logread.Gap{{0, 4}, {8, 7}}}},
		{"growing: a long last line: its parts, then its last part waits", "x\n0123456789", logread.Request{MaxBytes: 4, Grep: regexp.MustCompile("9")},
			logread.Window{EndOffset: 10, Truncated: true, Skipped: []logread.Gap{{0, 10}}}},
		{"final: a long last line: all its parts", "x\n0123456789", logread.Request{MaxBytes: 4, Grep: regexp.MustCompile("9"), Final: true},
			logread.Window{EndOffset: 12, Matches: []logread.Match{{Offset: 10, Line: "89", Part: true}}, Skipped: []logread.Gap{{0, 10}}}},
		{"multi-window: a match past the first window", okFail, logread.Request{MaxBytes: 16, Grep: fail},
			logread.Window{EndOffset: 307, Matches: []logread.Match{{Offset: 300, Line: "FAIL x"}}, Skipped: []logread.Gap{{0, 300}}}},
		// Each match counts with its newline: foo1 and foo2 fill 10 bytes.
		{"the matches fill max_bytes: end at the first match not returned", "foo1\nbar\nfoo2\nfoo3\n", logread.Request{MaxBytes: 10, Grep: foo},
			logread.Window{EndOffset: 14, Truncated: true, Matches: []logread.Match{{Offset: 0, Line: "foo1"}, {Offset: 9, Line: "foo2"}},
				Skipped: []logread.Gap{{5, 4}}}},
		{"resuming there returns it", "foo1\nbar\nfoo2\nfoo3\n", logread.Request{MaxBytes: 10, Grep: foo, Offset: 14},
			logread.Window{Offset: 14, EndOffset: 19, Matches: []logread.Match{{Offset: 14, Line: "foo3"}}}},
		{"empty matching lines count their newline", "\n\n\n\n", logread.Request{MaxBytes: 3, Grep: regexp.MustCompile("^$")},
			logread.Window{EndOffset: 3, Truncated: true, Matches: []logread.Match{{Offset: 0}, {Offset: 1}, {Offset: 2}}}},
		// Negative offsets: back to the start of the line they fall in, and
		// on to the end of the log.
		{"negative offset: the line it falls in, whole", "zzz\nfoobar\n", logread.Request{MaxBytes: 100, Grep: foo, Offset: -4},
			logread.Window{Offset: 4, EndOffset: 11, Matches: []logread.Match{{Offset: 4, Line: "foobar"}}, Skipped: []logread.Gap{{0, 4}}}},
		{"negative offset: scans to the end", okFail, logread.Request{MaxBytes: 16, Grep: fail, Offset: -200},
			logread.Window{Offset: 105, EndOffset: 307, Matches: []logread.Match{{Offset: 300, Line: "FAIL x"}}, Skipped: []logread.Gap{{0, 300}}}},
		{"negative offset in the partial last line of a growing log", "x\nERR", logread.Request{MaxBytes: 100, Grep: errRe, Offset: -2},
			logread.Window{Offset: 2, EndOffset: 2, Truncated: true, Skipped: []logread.Gap{{0, 2}}}},
		{"negative offset in a line longer than max_bytes: a character boundary", "0123456789\n", logread.Request{MaxBytes: 2, Grep: regexp.MustCompile("9"), Offset: -3},
			logread.Window{Offset: 8, EndOffset: 11, Matches: []logread.Match{{Offset: 8, Line: "89", Part: true}}, Skipped: []logread.Gap{{0, 8}, {10, 1}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.want.Size = int64(len(tt.log))
			w := mustRead(t, []byte(tt.log), tt.req)
			assert.Equal(t, tt.want, w)
			assert.Empty(t, checkWindow([]byte(tt.log), tt.req, w))
		})
	}
}

func TestGrepScanFramed(t *testing.T) {
	errRe := regexp.MustCompile("ERROR|warn")
	started := frames(out, "start\n", out, "ERR")
	s0 := flen("start\n")
	cut := frames(out, "ERR", er, "warn\n")
	whole := frames(out, "ERR", er, "warn\n", out, "OR here\n")
	c0, c1, c2 := flen("ERR"), flen("warn\n"), flen("OR here\n")
	var many []byte
	for range 50 {
		many = append(many, frames(out, "ok\n")...)
	}
	m0 := int64(len(many))
	many = append(many, frames(er, "FAIL x\n")...)
	capped := frames(out, "x\n", out, "foo1\n", out, "foo2\nfoo3\n")
	k0, k1 := flen("x\n"), flen("foo1\n")
	// 12 invalid bytes are 36 bytes of text.
	lossy := "f" + strings.Repeat("\xff", 12) + "\n"
	split := frames(out, lossy, er, "ba", out, "f\xff\n", er, "r\n")
	l0, l1 := flen(lossy), flen("ba")
	tests := []struct {
		name string
		log  []byte
		req  logread.Request
		want logread.Window
	}{
		{"growing: a stream's partial last line is held: an empty window", started, logread.Request{MaxBytes: 1000, Framed: true, Grep: errRe, Offset: s0},
			logread.Window{Offset: s0, EndOffset: s0, Truncated: true}},
		{"growing: the window ends before its frame", started, logread.Request{MaxBytes: 1000, Framed: true, Grep: regexp.MustCompile("start")},
			logread.Window{EndOffset: s0, Truncated: true, Matches: []logread.Match{{Offset: 0, Stream: "stdout", Line: "start"}}}},
		{"growing: the other stream's lines after it wait too", cut, logread.Request{MaxBytes: 1000, Framed: true, Grep: errRe},
			logread.Window{Truncated: true}},
		{"final: both are matched", cut, logread.Request{MaxBytes: 1000, Framed: true, Grep: regexp.MustCompile("ERR|warn"), Final: true},
			logread.Window{EndOffset: c0 + c1, Matches: []logread.Match{{Offset: 0, Stream: "stdout", Line: "ERR"}, {Offset: c0, Stream: "stderr", Line: "warn"}}}},
		{"growing: completed, the line is matched whole", whole, logread.Request{MaxBytes: 1000, Framed: true, Grep: errRe},
			logread.Window{EndOffset: c0 + c1 + c2, Matches: []logread.Match{{Offset: 0, Stream: "stdout", Line: "ERROR here"}, {Offset: c0, Stream: "stderr", Line: "warn"}}}},
		{"a window cut by max_bytes with no line end matches parts", whole, logread.Request{MaxBytes: int(c0), Framed: true, Grep: regexp.MustCompile("ERR")},
			logread.Window{EndOffset: c0 + c1 + c2, Matches: []logread.Match{{Offset: 0, Stream: "stdout", Line: "ERR", Part: true}}, Skipped: []logread.Gap{{c0, c1 + c2}}}},
		{"multi-window: a match past the first window", many, logread.Request{MaxBytes: 30, Framed: true, Grep: regexp.MustCompile("FAIL")},
			logread.Window{EndOffset: int64(len(many)), Matches: []logread.Match{{Offset: m0, Stream: "stderr", Line: "FAIL x"}}, Skipped: []logread.Gap{{0, m0}}}},
		// foo2 would fit, foo3 in the same frame not: the request ends
		// before their frame, so that resuming there repeats neither.
		{"the matches fill max_bytes: end before the frame", capped, logread.Request{MaxBytes: 10, Framed: true, Grep: regexp.MustCompile("foo")},
			logread.Window{EndOffset: k0 + k1, Truncated: true, Matches: []logread.Match{{Offset: k0, Stream: "stdout", Line: "foo1"}}, Skipped: []logread.Gap{{0, k0}}}},
		{"resuming there returns both", capped, logread.Request{MaxBytes: 10, Framed: true, Grep: regexp.MustCompile("foo"), Offset: k0 + k1},
			logread.Window{Offset: k0 + k1, EndOffset: int64(len(capped)), Matches: []logread.Match{{Offset: k0 + k1, Stream: "stdout", Line: "foo2"},
				{Offset: k0 + k1, Stream: "stdout", Line: "foo3"}}}},
		// The second stdout match does not fit; its frame is inside
		// stderr's line "bar", so the request ends where that line starts.
		{"the matches fill max_bytes: end where no line of either stream is cut", split, logread.Request{MaxBytes: len(split), Framed: true, Grep: regexp.MustCompile("f|bar")},
			logread.Window{EndOffset: l0, Truncated: true, Lossy: true, Matches: []logread.Match{{Offset: 0, Stream: "stdout", Line: "f" + strings.Repeat("\uFFFD", 12)}}}},
		{"resuming there matches the other stream's line whole", split, logread.Request{MaxBytes: len(split), Framed: true, Grep: regexp.MustCompile("f|bar"), Offset: l0},
			logread.Window{Offset: l0, EndOffset: int64(len(split)), Lossy: true, Matches: []logread.Match{{Offset: l0, Stream: "stderr", Line: "bar"},
				{Offset: l0 + l1, Stream: "stdout", Line: "f\uFFFD"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.want.Size = int64(len(tt.log))
			w := mustRead(t, tt.log, tt.req)
			assert.Equal(t, tt.want, w)
			assert.Empty(t, checkWindow(tt.log, tt.req, w))
		})
	}
}

// grepPatterns are the random patterns of the grep properties: literals,
// anchors, multi-byte characters, U+FFFD (which invalid bytes match), and
// patterns that match every line, empty ones included.
var grepPatterns = []string{"foo", "é", "^a", "o$", "^$", ".", "b|€", `\x{FFFD}`, "^(foo| )", "日本|🎉", "error: ", "a.*b", "", "[^a]", `\t`}

// valid is p as logread's text: each byte that does not start a valid
// sequence replaced by U+FFFD.
func valid(p []byte) string {
	var b strings.Builder
	for _, r := range string(p) {
		b.WriteRune(r)
	}
	return b.String()
}

// refGrep is grep -n over the whole log: every matching line with its
// offset, the unterminated last line only when final.
func refGrep(log []byte, re *regexp.Regexp, final bool) []logread.Match {
	var ms []logread.Match
	for a := 0; a < len(log); {
		e, next := len(log), len(log)
		if i := bytes.IndexByte(log[a:], '\n'); i >= 0 {
			e, next = a+i, a+i+1
		} else if !final {
			break
		}
		if re.Match(log[a:e]) {
			ms = append(ms, logread.Match{Offset: int64(a), Line: valid(log[a:e])})
		}
		a = next
	}
	return ms
}

func longestLine(log []byte) int {
	n := 0
	for _, l := range bytes.Split(log, []byte("\n")) {
		n = max(n, len(l)+1)
	}
	return n
}

// grepClient calls tail_log with grep from each answer's end offset.
type grepClient struct {
	t       *testing.T
	req     logread.Request
	size    func() int
	off     int64
	minSize int
	first   int64 // the first answer's Offset
	calls   int
	matches []logread.Match
	gaps    []logread.Gap
}

// follow reads on from the last end offset until an answer makes no
// progress or reaches the end of log.
func (c *grepClient) follow(log []byte, final bool) {
	c.t.Helper()
	for {
		req := c.req
		req.MaxBytes, req.Final = c.size(), final
		if c.calls > 0 {
			req.Offset = c.off
		}
		w := mustRead(c.t, log, req)
		require.Empty(c.t, checkWindow(log, req, w), "request %+v on %q", req, log)
		if c.calls == 0 {
			c.first = w.Offset
		} else {
			require.Equal(c.t, c.off, w.Offset)
		}
		c.calls++
		c.minSize = min(c.minSize, req.MaxBytes)
		c.matches = append(c.matches, w.Matches...)
		c.gaps = append(c.gaps, w.Skipped...)
		c.off = w.EndOffset
		if w.EndOffset == w.Offset || !w.Truncated {
			if final {
				require.Equal(c.t, int64(len(log)), w.EndOffset, "a final log is read to its end")
			}
			return
		}
	}
}

// tiles checks that everything the client got accounts for every byte it
// read past: matches and gaps, in order, without overlap.
func (c *grepClient) tiles(log []byte) {
	c.t.Helper()
	w := logread.Window{Offset: c.first, EndOffset: c.off, Matches: c.matches, Skipped: c.gaps}
	require.Empty(c.t, checkTiling(log, c.req, w))
}

func newGrepClient(t *testing.T, req logread.Request, size func() int) *grepClient {
	return &grepClient{t: t, req: req, size: size, minSize: logread.MaxWindow}
}

// A client that follows a growing log with grep, calling again from each
// end offset, gets every matching line exactly once, whole, and no line
// twice: whatever the writes (cut anywhere, inside lines and characters),
// the patterns, and max_bytes (which both sizes the windows and bounds the
// matches of one answer, so that answers often end at the bound). With
// windows smaller than some lines, those lines are matched in parts, but
// every line that fits the smallest window is still matched whole, and
// every line not marked a Part is whole.
func TestGrepFollowExactlyOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	for trial := range 400 {
		log := randText(rng, rng.IntN(1500))
		if trial%4 == 3 {
			log = randBinary(rng, rng.IntN(400))
		}
		re := regexp.MustCompile(grepPatterns[rng.IntN(len(grepPatterns))])
		longest := longestLine(log)
		big := func() int { return longest + rng.IntN(40) }
		small := sizes(rng, 24)
		for _, growing := range []bool{false, true} {
			clients := []*grepClient{newGrepClient(t, logread.Request{Grep: re}, big), newGrepClient(t, logread.Request{Grep: re}, small)}
			if growing {
				for n := 0; n < len(log); {
					n = min(len(log), n+1+rng.IntN(24))
					for _, c := range clients {
						c.follow(log[:n], false)
					}
				}
			}
			for _, c := range clients {
				c.follow(log, true)
				c.tiles(log)
			}
			want := refGrep(log, re, true)
			require.Equal(t, want, clients[0].matches, "trial %d growing %v pattern %q log %q", trial, growing, re, log)
			for _, m := range want {
				if len(m.Line) < clients[1].minSize && !strings.ContainsRune(m.Line, '\uFFFD') {
					require.Contains(t, clients[1].matches, m, "trial %d growing %v pattern %q log %q", trial, growing, re, log)
				}
			}
			for _, m := range clients[1].matches {
				if !m.Part && !strings.ContainsRune(m.Line, '\uFFFD') {
					require.Contains(t, want, m, "trial %d growing %v: a line not marked a part is whole", trial, growing)
				}
			}
		}
	}
}

// From a negative offset a grep starts at the start of the line the offset
// falls in (when it is within max_bytes) and, followed on, gets every
// matching line from there exactly once.
func TestGrepNegativeOffset(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	for trial := range 300 {
		log := randText(rng, rng.IntN(1500))
		re := regexp.MustCompile(grepPatterns[rng.IntN(len(grepPatterns))])
		longest := longestLine(log)
		off := -1 - int64(rng.IntN(len(log)+1))
		c := newGrepClient(t, logread.Request{Grep: re, Offset: off}, func() int { return longest + rng.IntN(40) })
		final := trial%2 == 0
		c.follow(log, final)
		c.tiles(log)
		start := max(0, int64(len(log))+off)
		want := int64(bytes.LastIndexByte(log[:start], '\n') + 1)
		require.Equal(t, want, c.first, "trial %d: offset %d of %q", trial, off, log)
		var ref []logread.Match
		for _, m := range refGrep(log, re, final) {
			if m.Offset >= want {
				ref = append(ref, m)
			}
		}
		require.Equal(t, ref, c.matches, "trial %d", trial)
	}
}

// framedLines returns the reference matches of a framed log: each stream's
// matching lines, at the frame that holds the line's first byte, in log
// order. The last frame line counts only when final and decodable.
func framedLines(t *testing.T, log []byte, re *regexp.Regexp, final bool) []logread.Match {
	t.Helper()
	type frame struct {
		off      int64
		from, to int // payload in its stream
	}
	var streams [3][]byte
	var fs [3][]frame
	for off := 0; off < len(log); {
		n := bytes.IndexByte(log[off:], '\n') + 1
		if n == 0 {
			if !final {
				break
			}
			n = len(log) - off
		}
		s, b, err := logframe.ParseLine(nil, log[off:off+n])
		if err == nil {
			fs[s] = append(fs[s], frame{int64(off), len(streams[s]), len(streams[s]) + len(b)})
			streams[s] = append(streams[s], b...)
		} else {
			require.NotEqual(t, byte('\n'), log[off+n-1], "malformed frame at %d", off)
		}
		off += n
	}
	var ms []logread.Match
	for _, s := range []logframe.Stream{logframe.Stdout, logframe.Stderr} {
		for _, m := range refGrep(streams[s], re, final) {
			i := 0
			for fs[s][i].to <= int(m.Offset) {
				i++
			}
			ms = append(ms, logread.Match{Offset: fs[s][i].off, Stream: s.Name(), Line: m.Line})
		}
	}
	slices.SortStableFunc(ms, func(a, b logread.Match) int { return int(a.Offset - b.Offset) })
	return ms
}

// lineWrites splits data into writes of whole lines (the last may be
// unterminated), each to a random stream: every frame boundary is then a
// line boundary of both streams.
func lineWrites(rng *rand.Rand, data []byte) []write {
	lines := bytes.SplitAfter(data, []byte("\n"))
	var ws []write
	for len(lines) > 0 {
		n := min(len(lines), 1+rng.IntN(3))
		s := logframe.Stdout
		if rng.IntN(3) == 0 {
			s = logframe.Stderr
		}
		if p := bytes.Join(lines[:n], nil); len(p) > 0 {
			ws = append(ws, write{s, p})
		}
		lines = lines[n:]
	}
	return ws
}

// With writes of whole lines no window matches parts, so a client that
// keeps calling from each end offset, with any max_bytes, gets exactly the
// lines a grep of each stream finds, once each, whether it reads the final
// log or follows it as it grows (a frame line can be seen half written).
func TestGrepFramedExactlyOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for trial := range 300 {
		data := randText(rng, rng.IntN(1500))
		if trial%4 == 3 {
			data = randBinary(rng, rng.IntN(400))
		}
		log, _, _ := encode(lineWrites(rng, data))
		re := regexp.MustCompile(grepPatterns[rng.IntN(len(grepPatterns))])
		c := newGrepClient(t, logread.Request{Framed: true, Grep: re}, sizes(rng, 120))
		if trial%2 == 1 {
			for n := 0; n < len(log); {
				n = min(len(log), n+1+rng.IntN(40))
				c.follow(log[:n], false)
			}
		}
		c.follow(log, true)
		require.Equal(t, framedLines(t, log, re, true), c.matches, "trial %d pattern %q", trial, re)
	}
}

// Writes cut anywhere, so that a line of one stream continues over the
// other stream's frames: a client following the log with windows that
// reach its end never gets a line whose end its writer has not written yet
// (nor the other stream's lines after its start); it gets each matching
// line whole, once, when it is complete or the log is final.
func TestGrepFramedFollowHoldsPartialLines(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for trial := range 300 {
		ws := randWrites(rng, randText(rng, rng.IntN(1500)), trial%2 == 0)
		re := regexp.MustCompile(grepPatterns[rng.IntN(len(grepPatterns))])
		// Windows larger than the log (and small enough not to take
		// linePool's MiB buffers, which the race detector makes slow).
		c := newGrepClient(t, logread.Request{Framed: true, Grep: re}, func() int { return 64 << 10 })
		var log []byte
		for _, w := range ws {
			log = logframe.AppendFrames(log, w.s, w.p)
			if rng.IntN(4) == 0 {
				c.follow(log[:len(log)-1-rng.IntN(3)], false)
			}
			c.follow(log, false)
		}
		c.follow(log, true)
		require.Equal(t, framedLines(t, log, re, true), c.matches, "trial %d pattern %q", trial, re)
	}
}

// Any writes, any window sizes, growing or final: answers never overlap,
// every gap is whole frames, and every match is at a frame boundary
// outside every gap.
func TestGrepFramedSmallWindows(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	for trial := range 300 {
		ws := randWrites(rng, randText(rng, rng.IntN(1500)), trial%2 == 0)
		log, _, _ := encode(ws)
		re := regexp.MustCompile(grepPatterns[rng.IntN(len(grepPatterns))])
		c := newGrepClient(t, logread.Request{Framed: true, Grep: re}, sizes(rng, 60))
		if trial%2 == 1 {
			for n := 0; n < len(log); {
				n = min(len(log), n+1+rng.IntN(60))
				c.follow(log[:n], false)
			}
		}
		c.follow(log, true)
		last := int64(-1)
		for _, g := range c.gaps {
			require.Greater(t, g.From, last, "trial %d: gaps %v overlap", trial, c.gaps)
			last = g.From + g.Bytes - 1
			for _, m := range c.matches {
				require.False(t, m.Offset >= g.From && m.Offset < g.From+g.Bytes, "trial %d: match %+v in gap %+v", trial, m, g)
			}
		}
		for i := 1; i < len(c.matches); i++ {
			require.LessOrEqual(t, c.matches[i-1].Offset, c.matches[i].Offset, "trial %d", trial)
		}
	}
}
