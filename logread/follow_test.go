package logread_test

import (
	"math/rand/v2"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/logframe"
	"github.com/agent-box/agent-box/logread"
)

// A writer that flushes in blocks cuts characters: `printf 'abc\303';
// sleep 2; printf '\251 done\n'` leaves "abc\xc3" in the log for two
// seconds. While the log can grow, a text window never ends inside such a
// character: it ends before it, even when that leaves it empty, and nothing
// is replaced. Once the log is final the character can no longer complete
// and is replaced as before; bytes that no continuation could make valid
// are replaced at once; exact windows are cut exactly.
func TestIncompleteCharacterAtEndOfGrowingLog(t *testing.T) {
	dot := regexp.MustCompile(".")
	half := frames(out, "abc\xc3")
	whole := frames(out, "abc\xc3", out, "\xa9 done\n")
	f0 := flen("abc\xc3")
	tests := []struct {
		name string
		log  []byte
		req  logread.Request
		want logread.Window // Size is filled in
	}{
		// Combined logs.
		{"combined: the window ends before the lead byte", []byte("abc\xc3"), logread.Request{MaxBytes: 100},
			logread.Window{EndOffset: 3, Truncated: true, Content: "abc"}},
		{"combined: only the lead byte left: empty window", []byte("abc\xc3"), logread.Request{MaxBytes: 100, Offset: 3},
			logread.Window{Offset: 3, EndOffset: 3, Truncated: true}},
		{"combined: three of four bytes left: empty window", []byte("\xf0\x9d\x84"), logread.Request{MaxBytes: 100},
			logread.Window{EndOffset: 0, Truncated: true}},
		{"combined: max_bytes smaller than the part written: empty window", []byte("ab\xe2\x82"), logread.Request{MaxBytes: 1, Offset: 2},
			logread.Window{Offset: 2, EndOffset: 2, Truncated: true}},
		{"combined: completed, the character is whole", []byte("abc\xc3\xa9 done\n"), logread.Request{MaxBytes: 100, Offset: 3},
			logread.Window{Offset: 3, EndOffset: 11, Content: "\u00e9 done\n"}},
		{"combined: final log: replaced", []byte("abc\xc3"), logread.Request{MaxBytes: 100, Offset: 3, Final: true},
			logread.Window{Offset: 3, EndOffset: 4, Content: "\uFFFD", Lossy: true}},
		{"combined: final log, max_bytes smaller: replaced", []byte("ab\xe2\x82"), logread.Request{MaxBytes: 1, Offset: 2, Final: true},
			logread.Window{Offset: 2, EndOffset: 4, Content: "\uFFFD\uFFFD", Lossy: true}},
		{"combined: an invalid byte at the end is replaced", []byte("ab\xff"), logread.Request{MaxBytes: 100, Offset: 2},
			logread.Window{Offset: 2, EndOffset: 3, Content: "\uFFFD", Lossy: true}},
		{"combined: a lead byte and a bad continuation are replaced", []byte("ab\xe0\x80"), logread.Request{MaxBytes: 100, Offset: 2},
			logread.Window{Offset: 2, EndOffset: 4, Content: "\uFFFD\uFFFD", Lossy: true}},
		{"combined: a surrogate's prefix is replaced", []byte("ab\xed\xa0"), logread.Request{MaxBytes: 100},
			logread.Window{EndOffset: 4, Content: "ab\uFFFD\uFFFD", Lossy: true}},
		{"combined: exact is cut exactly", []byte("abc\xc3"), logread.Request{MaxBytes: 100, Offset: 3, Exact: true},
			logread.Window{Offset: 3, EndOffset: 4, Bytes: []byte("\xc3")}},
		{"combined: grep: empty window", []byte("abc\xc3"), logread.Request{MaxBytes: 100, Offset: 3, Grep: dot},
			logread.Window{Offset: 3, EndOffset: 3, Truncated: true}},
		{"combined: grep: the unterminated line waits whole", []byte("abc\xc3"), logread.Request{MaxBytes: 100, Grep: dot},
			logread.Window{EndOffset: 0, Truncated: true}},
		{"combined: tail_lines: empty window at the line", []byte("x\n\xc3"), logread.Request{MaxBytes: 100, TailLines: 1},
			logread.Window{Offset: 2, EndOffset: 2, Truncated: true, Skipped: []logread.Gap{{0, 2}}}},

		// Framed logs: windows end at frame boundaries, so the frame holding
		// the character's first byte is held back whole.
		{"framed: the frame with the lead byte: empty window", half, logread.Request{MaxBytes: 1000, Framed: true},
			logread.Window{Truncated: true}},
		{"framed: completed by the next frame", whole, logread.Request{MaxBytes: 1000, Framed: true},
			logread.Window{EndOffset: int64(len(whole)), Content: "abc\u00e9 done\n", Stdout: "abc\u00e9 done\n",
				Chunks: []logread.Chunk{{"stdout", "abc\u00e9 done\n"}}}},
		{"framed: final log: replaced", half, logread.Request{MaxBytes: 1000, Framed: true, Final: true},
			logread.Window{EndOffset: f0, Content: "abc\uFFFD", Stdout: "abc\uFFFD", Lossy: true,
				Chunks: []logread.Chunk{{"stdout", "abc\uFFFD"}}}},
		{"framed: the other stream's later frames wait too", frames(out, "abc\xc3", er, "x\n"), logread.Request{MaxBytes: 1000, Framed: true},
			logread.Window{Truncated: true}},
		{"framed: per stream: a stderr character is held as well", frames(out, "ok\n", er, "\xe2\x82"), logread.Request{MaxBytes: 1000, Framed: true},
			logread.Window{EndOffset: flen("ok\n"), Truncated: true, Content: "ok\n", Stdout: "ok\n",
				Chunks: []logread.Chunk{{"stdout", "ok\n"}}}},
		{"framed: before a partial last line too", append(frames(out, "abc\xc3"), "1 qQ"...), logread.Request{MaxBytes: 1000, Framed: true},
			logread.Window{Truncated: true}},
		{"framed: an invalid byte at the end is replaced", frames(out, "abc\xff"), logread.Request{MaxBytes: 1000, Framed: true},
			logread.Window{EndOffset: f0, Content: "abc\uFFFD", Stdout: "abc\uFFFD", Lossy: true,
				Chunks: []logread.Chunk{{"stdout", "abc\uFFFD"}}}},
		{"framed: exact is cut exactly", half, logread.Request{MaxBytes: 1000, Framed: true, Exact: true},
			logread.Window{EndOffset: f0, StdoutBytes: []byte("abc\xc3")}},
		{"framed: grep: empty window", half, logread.Request{MaxBytes: 1000, Framed: true, Grep: dot},
			logread.Window{Truncated: true}},
		// Not at the end of the log: a window of one frame, cut by
		// max_bytes, cannot end earlier and keeps its frame (the character
		// is not at the end of the log, the window just cannot reach it).
		{"framed: window cut by max_bytes keeps its frame", frames(out, "abc\xc3", er, "x\n"), logread.Request{MaxBytes: 1, Framed: true},
			logread.Window{EndOffset: f0, Truncated: true, Content: "abc\uFFFD", Stdout: "abc\uFFFD", Lossy: true,
				Chunks: []logread.Chunk{{"stdout", "abc\uFFFD"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.want.Size = int64(len(tt.log))
			w := mustRead(t, tt.log, tt.req)
			assert.Equal(t, tt.want, w)
			if tt.req.TailLines == 0 {
				assert.Empty(t, checkWindow(tt.log, tt.req, w))
			}
		})
	}
}

// A client follows a log while a writer appends to it in pieces cut at any
// byte: after every write it reads on from the last end offset until a
// window makes no progress, and once the log is final it reads the rest.
// Every window it gets is lossless and together they are the output, byte
// for byte: combined with any window sizes, framed (two streams, each cut
// anywhere) with windows that reach the end of the log, as tail_log's
// default 64 KiB does for a follower that keeps up.
func TestFollowGrowingLogIsLossless(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	trials := 300
	if raceEnabled {
		// One goroutine: the race detector has nothing to find, and makes
		// each trial's megabyte reads several times slower
		// (docs/architecture/performance.md, "The test suite"). The plain
		// lane runs 300.
		trials = 100
	}
	for trial := range trials {
		{ // combined
			text := randText(rng, rng.IntN(400))
			var log []byte
			f := follower{t: t, req: logread.Request{}, size: sizes(rng, 16)}
			for p := text; len(p) > 0; {
				n := min(len(p), 1+rng.IntN(12))
				log = append(log, p[:n]...)
				p = p[n:]
				f.follow(log, false)
			}
			f.follow(log, true)
			require.Equal(t, string(text), string(f.text), "trial %d", trial)
		}
		{ // framed
			data := [3][]byte{logframe.Stdout: randText(rng, rng.IntN(300)), logframe.Stderr: randText(rng, rng.IntN(100))}
			var log []byte
			f := follower{t: t, req: logread.Request{Framed: true}, size: func() int { return logread.MaxWindow }}
			for len(data[logframe.Stdout])+len(data[logframe.Stderr]) > 0 {
				s := logframe.Stdout
				if len(data[s]) == 0 || (len(data[logframe.Stderr]) > 0 && rng.IntN(3) == 0) {
					s = logframe.Stderr
				}
				n := min(len(data[s]), 1+rng.IntN(12))
				log = logframe.AppendFrames(log, s, data[s][:n])
				f.want[s] = append(f.want[s], data[s][:n]...)
				data[s] = data[s][n:]
				if rng.IntN(4) == 0 {
					// The supervisor's write of a frame line can be seen
					// half done.
					f.follow(log[:len(log)-1-rng.IntN(3)], false)
				}
				f.follow(log, false)
			}
			f.follow(log, true)
			require.Equal(t, string(f.want[logframe.Stdout]), string(f.stream[logframe.Stdout]), "trial %d", trial)
			require.Equal(t, string(f.want[logframe.Stderr]), string(f.stream[logframe.Stderr]), "trial %d", trial)
		}
	}
}

// follower is a tail_log client that resumes at each window's end offset.
type follower struct {
	t      *testing.T
	req    logread.Request
	size   func() int
	off    int64
	text   []byte    // combined: Content
	stream [3][]byte // framed: Stdout, Stderr
	want   [3][]byte
}

// follow reads log from the last end offset until a window makes no
// progress or reaches the end.
func (f *follower) follow(log []byte, final bool) {
	f.t.Helper()
	for {
		req := f.req
		req.Offset, req.MaxBytes, req.Final = f.off, f.size(), final
		w := mustRead(f.t, log, req)
		require.Empty(f.t, checkWindow(log, req, w), "%+v", req)
		require.False(f.t, w.Lossy, "window %+v of %q: %+v", req, log, w)
		f.text = append(f.text, w.Content...)
		f.stream[logframe.Stdout] = append(f.stream[logframe.Stdout], w.Stdout...)
		f.stream[logframe.Stderr] = append(f.stream[logframe.Stderr], w.Stderr...)
		f.off = w.EndOffset
		if w.EndOffset == w.Offset || !w.Truncated {
			if final {
				require.Equal(f.t, int64(len(log)), w.EndOffset, "a final log is read to its end")
			}
			return
		}
	}
}
