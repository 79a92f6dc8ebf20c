package logread_test

import (
	"bytes"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/logframe"
	"github.com/agent-box/agent-box/logread"
)

// Context returns the lines around each match as grep -C does: overlapping
// contexts merged, each line once, a group's first line marked; each line
// cut to LineMax with its length; an answer that is full ends before the
// lines the next match would return before it.
func TestGrepContextCombined(t *testing.T) {
	fail := regexp.MustCompile("FAIL")
	gotest := "ok a\nok b\nx_test.go:12: want 1\n--- FAIL: TestX\nok c\nok d\nok e\n"
	ctx := func(off int64, line string) logread.Match {
		return logread.Match{Offset: off, Line: line, Context: true}
	}
	long := "FAIL " + strings.Repeat("é", 10) + "\n" // 25 bytes of text
	tests := []struct {
		name string
		log  string
		req  logread.Request
		want logread.Window
	}{
		{"the line above and below", gotest, logread.Request{MaxBytes: 100, Grep: fail, Context: 1, Final: true},
			logread.Window{EndOffset: 62, Matches: []logread.Match{
				{Offset: 10, Line: "x_test.go:12: want 1", Context: true, Group: true}, {Offset: 31, Line: "--- FAIL: TestX"}, ctx(47, "ok c")},
				Skipped: []logread.Gap{{0, 10}, {52, 10}}}},
		{"overlapping contexts merge, a group starts after a gap", "FAIL 1\na\nFAIL 2\nb\nc\nd\nFAIL 3\n", logread.Request{MaxBytes: 100, Grep: fail, Context: 1, Final: true},
			logread.Window{EndOffset: 29, Matches: []logread.Match{
				{Offset: 0, Line: "FAIL 1", Group: true}, ctx(7, "a"), {Offset: 9, Line: "FAIL 2"}, ctx(16, "b"),
				{Offset: 20, Line: "d", Context: true, Group: true}, {Offset: 22, Line: "FAIL 3"}},
				Skipped: []logread.Gap{{18, 2}}}},
		// The second group does not fit: the answer ends where its context
		// begins, so that the next call returns it whole.
		{"full: end before the next match's context", "FAIL 1\na\nb\nc\nFAIL 2\n", logread.Request{MaxBytes: 12, Grep: fail, Context: 1, Final: true},
			logread.Window{EndOffset: 11, Truncated: true, Matches: []logread.Match{{Offset: 0, Line: "FAIL 1", Group: true}, ctx(7, "a")},
				Skipped: []logread.Gap{{9, 2}}}},
		{"resumed there", "FAIL 1\na\nb\nc\nFAIL 2\n", logread.Request{MaxBytes: 12, Grep: fail, Context: 1, Final: true, Offset: 11},
			logread.Window{Offset: 11, EndOffset: 20, Matches: []logread.Match{{Offset: 11, Line: "c", Context: true, Group: true}, {Offset: 13, Line: "FAIL 2"}}}},
		// A growing log's last lines may be the context of a match yet to
		// come: the answer ends before them.
		{"growing: the last lines wait for what follows", "FAIL 1\na\nb\nc\n", logread.Request{MaxBytes: 100, Grep: fail, Context: 1},
			logread.Window{EndOffset: 11, Truncated: true, Matches: []logread.Match{{Offset: 0, Line: "FAIL 1", Group: true}, ctx(7, "a")},
				Skipped: []logread.Gap{{9, 2}}}},
		{"resumed after a match: the lines after it are its context", "FAIL 1\na\nb\nc\n", logread.Request{MaxBytes: 100, Grep: fail, Context: 2, Offset: 7, Final: true},
			logread.Window{Offset: 7, EndOffset: 13, Matches: []logread.Match{{Offset: 7, Line: "a", Context: true, Group: true, Continues: true}, {Offset: 9, Line: "b", Context: true, Continues: true}},
				Skipped: []logread.Gap{{11, 2}}}},
		// From an offset that no grep returned (a plain tail_log's end),
		// the line is context without its match, and says so.
		{"the lines owed continue a match before the offset", "FAIL x\nnext\nFAIL y\nz\n", logread.Request{MaxBytes: 100, Grep: fail, Context: 1, Offset: 7, Final: true},
			logread.Window{Offset: 7, EndOffset: 21, Matches: []logread.Match{{Offset: 7, Line: "next", Context: true, Group: true, Continues: true}, {Offset: 12, Line: "FAIL y"}, ctx(19, "z")}}},
		{"a line cut to LineMax says its length", long + "ok\n", logread.Request{MaxBytes: 100, Grep: fail, Context: 1, LineMax: 10, Final: true},
			logread.Window{EndOffset: 29, Matches: []logread.Match{{Offset: 0, Line: "FAIL éé", Bytes: 25, Group: true}, ctx(26, "ok")}}},
		{"a character longer than LineMax is not cut into", "🎀 FAIL\n", logread.Request{MaxBytes: 100, Grep: fail, LineMax: 3, Final: true},
			logread.Window{EndOffset: 10, Matches: []logread.Match{{Offset: 0, Line: "", Bytes: 9}}}},
		{"cut lines count what is returned", long + long + long, logread.Request{MaxBytes: 26, Grep: fail, LineMax: 9, Final: true},
			logread.Window{EndOffset: 52, Matches: []logread.Match{{Offset: 0, Line: "FAIL éé", Bytes: 25}, {Offset: 26, Line: "FAIL éé", Bytes: 25}},
				Truncated: true}},
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

func TestGrepContextChecked(t *testing.T) {
	for _, req := range []logread.Request{
		{MaxBytes: 10, Grep: regexp.MustCompile("x"), Context: logread.MaxContext + 1},
		{MaxBytes: 10, Grep: regexp.MustCompile("x"), Context: -1},
		{MaxBytes: 10, Context: 1},
	} {
		_, err := logread.Read(bytes.NewReader(nil), 0, req)
		assert.ErrorIs(t, err, logread.ErrBadRequest, "%+v", req)
		assert.Equal(t, err, req.Check())
	}
}

// In a framed log, context is of the match's own stream: the stderr line
// above a stderr match, not the stdout written between them.
func TestGrepContextFramed(t *testing.T) {
	log := frames(er, "x.go:3: bad\n", out, "progress\n", er, "FAIL x\n", out, "done\n", er, "exit 1\n")
	f0, f1, f2, f3 := flen("x.go:3: bad\n"), flen("progress\n"), flen("FAIL x\n"), flen("done\n")
	w := mustRead(t, log, logread.Request{MaxBytes: 1000, Framed: true, Grep: regexp.MustCompile("FAIL"), Context: 1, Final: true})
	assert.Equal(t, []logread.Match{
		{Offset: 0, Stream: "stderr", Line: "x.go:3: bad", Context: true, Group: true},
		{Offset: f0 + f1, Stream: "stderr", Line: "FAIL x"},
		{Offset: f0 + f1 + f2 + f3, Stream: "stderr", Line: "exit 1", Context: true},
	}, w.Matches)
	assert.Equal(t, []logread.Gap{{f0, f1}, {f0 + f1 + f2, f3}}, w.Skipped, "stdout's frames are left out")
}

// refContext is grep -C n over the whole (final) log, each line cut to
// lineMax bytes of text.
func refContext(log []byte, re *regexp.Regexp, n, lineMax int) []logread.Match {
	type line struct {
		a, e int
		hit  bool
	}
	var ls []line
	for a := 0; a < len(log); {
		e, next := len(log), len(log)
		if i := bytes.IndexByte(log[a:], '\n'); i >= 0 {
			e, next = a+i, a+i+1
		}
		ls = append(ls, line{a, e, re.Match(log[a:e])})
		a = next
	}
	var ms []logread.Match
	for i, l := range ls {
		near := false
		for j := max(0, i-n); j <= min(len(ls)-1, i+n); j++ {
			near = near || ls[j].hit
		}
		if !near {
			continue
		}
		m := logread.Match{Offset: int64(l.a), Line: valid(log[l.a:l.e]), Context: !l.hit}
		if lineMax > 0 && len(m.Line) > lineMax {
			m.Line, m.Bytes = cutText(m.Line, lineMax), l.e-l.a
		}
		ms = append(ms, m)
	}
	return ms
}

func cutText(s string, max int) string {
	for max > 0 && !utf8RuneStart(s[max]) {
		max--
	}
	return s[:max]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// A client that follows a growing log with grep and context, from each
// end offset, gets what grep -C gets from the whole log: every line once,
// the lines before a match even when an earlier answer ended among them.
func TestGrepContextFollow(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for trial := range 300 {
		log := randText(rng, rng.IntN(1500))
		re := regexp.MustCompile(grepPatterns[rng.IntN(len(grepPatterns))])
		n, lineMax := 1+rng.IntN(3), []int{0, 4, 9}[rng.IntN(3)]
		longest := longestLine(log)
		c := newGrepClient(t, logread.Request{Grep: re, Context: n, LineMax: lineMax}, func() int { return longest + rng.IntN(40) })
		growing := trial%2 == 0
		for k := 0; growing && k < len(log); {
			k = min(len(log), k+1+rng.IntN(60))
			c.follow(log[:k], false)
		}
		c.follow(log, true)
		c.tiles(log)
		for i := range c.matches {
			c.matches[i].Group, c.matches[i].Continues = false, false
		}
		require.Equal(t, refContext(log, re, n, lineMax), c.matches, "trial %d: -C %d, cut %d, pattern %q, log %q", trial, n, lineMax, re, log)
	}
}

// Following a growing framed log: its last lines wait for a match that may
// follow them, as in a combined log, unless the answer holds more after
// them (another stream's match is never held back for them).
func TestGrepContextFramedFollow(t *testing.T) {
	fail := regexp.MustCompile("FAIL")
	bad := frames(er, "x.go:3: bad\n")
	w := mustRead(t, bad, logread.Request{MaxBytes: 1000, Framed: true, Grep: fail, Context: 1})
	assert.Equal(t, logread.Window{Size: int64(len(bad)), Truncated: true}, w, "held")
	assert.Empty(t, checkWindow(bad, logread.Request{MaxBytes: 1000, Framed: true, Grep: fail, Context: 1}, w))

	both := frames(er, "x.go:3: bad\n", er, "FAIL x\n")
	w = mustRead(t, both, logread.Request{MaxBytes: 1000, Framed: true, Grep: fail, Context: 1})
	assert.Equal(t, []logread.Match{
		{Offset: 0, Stream: "stderr", Line: "x.go:3: bad", Context: true, Group: true},
		{Offset: flen("x.go:3: bad\n"), Stream: "stderr", Line: "FAIL x"},
	}, w.Matches)

	other := frames(out, "building\n", er, "FAIL x\n")
	w = mustRead(t, other, logread.Request{MaxBytes: 1000, Framed: true, Grep: fail, Context: 1})
	assert.Equal(t, int64(len(other)), w.EndOffset, "stderr's match is not held back for stdout's line")
	assert.Equal(t, []logread.Match{{Offset: flen("building\n"), Stream: "stderr", Line: "FAIL x", Group: true}}, w.Matches)
}

// A follower of a framed log that got a match at the end of what was
// written gets the lines after it, which arrive later, as its context on
// the next call, per stream: a stdout line written in between neither
// counts against stderr's context nor is returned as it.
func TestGrepContextFramedResumed(t *testing.T) {
	fail := regexp.MustCompile("FAIL")
	first := frames(er, "FAIL x\n")
	req := logread.Request{MaxBytes: 1000, Framed: true, Grep: fail, Context: 2}
	w := mustRead(t, first, req)
	require.Equal(t, []logread.Match{{Offset: 0, Stream: "stderr", Line: "FAIL x", Group: true}}, w.Matches)
	require.Equal(t, int64(len(first)), w.EndOffset)

	log := append(append([]byte{}, first...), frames(out, "progress\n", er, "stack 1\nstack 2\n", er, "exit 1\n")...)
	f0, f1, f2 := flen("FAIL x\n"), flen("progress\n"), flen("stack 1\nstack 2\n")
	req.Offset, req.Final = w.EndOffset, true
	w = mustRead(t, log, req)
	assert.Equal(t, []logread.Match{
		{Offset: f0 + f1, Stream: "stderr", Line: "stack 1", Context: true, Group: true, Continues: true},
		{Offset: f0 + f1, Stream: "stderr", Line: "stack 2", Context: true, Continues: true},
	}, w.Matches)
	assert.Equal(t, []logread.Gap{{f0, f1}, {f0 + f1 + f2, flen("exit 1\n")}}, w.Skipped)
	assert.Empty(t, checkWindow(log, req, w))

	// Two lines back, the match owes one more; three back, none.
	req.Offset = f0 + f1 + f2
	w = mustRead(t, log, req)
	assert.Empty(t, w.Matches, "the match is 2 lines back: its context is complete")
	req.Context = 3
	w = mustRead(t, log, req)
	assert.Equal(t, []logread.Match{{Offset: f0 + f1 + f2, Stream: "stderr", Line: "exit 1", Context: true, Group: true, Continues: true}}, w.Matches)
}

// A client that follows one stream of a growing framed log, written a line
// at a time, with grep and context, from each end offset, gets what grep -C
// gets from the whole stream: the lines after a match too when a call
// ended at the match.
func TestGrepContextFramedFollow1Stream(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	for trial := range 200 {
		// A line a write: a frame holding a line after a match and one
		// before the next is returned whole or not at all, which this does
		// not test.
		var ws []write
		for _, l := range bytes.SplitAfter(randText(rng, rng.IntN(1500)), []byte("\n")) {
			if len(l) > 0 {
				ws = append(ws, write{er, l})
			}
		}
		re := regexp.MustCompile(grepPatterns[rng.IntN(len(grepPatterns))])
		n := 1 + rng.IntN(3)
		c := newGrepClient(t, logread.Request{Framed: true, Grep: re, Context: n}, func() int { return 64 << 10 })
		var log, stderr []byte
		for _, w := range ws {
			log, stderr = logframe.AppendFrames(log, w.s, w.p), append(stderr, w.p...)
			c.follow(log, false)
		}
		c.follow(log, true)
		type line struct {
			text    string
			context bool
		}
		var got, want []line
		for _, m := range c.matches {
			got = append(got, line{m.Line, m.Context})
		}
		for _, m := range refContext(stderr, re, n, 0) {
			want = append(want, line{m.Line, m.Context})
		}
		require.Equal(t, want, got, "trial %d: -C %d, pattern %q, stderr %q", trial, n, re, stderr)
	}
}
