package logread_test

import (
	"bytes"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/logframe"
	"github.com/agent-box/agent-box/logread"
)

// pieces of generated text: every UTF-8 length, and newlines often enough
// for many lines.
var pieces = []string{"a", "b", "foo", " ", "\n", "\n", "é", "€", "日本", "𝄞", "🎉", "error: ", "\t"}

func randText(rng *rand.Rand, n int) []byte {
	var b []byte
	for len(b) < n {
		b = append(b, pieces[rng.IntN(len(pieces))]...)
	}
	return b
}

func randBinary(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		switch rng.IntN(4) {
		case 0:
			b[i] = 0x80 + byte(rng.IntN(64)) // continuation bytes, often
		case 1:
			b[i] = 0xC0 + byte(rng.IntN(64)) // lead bytes
		case 2:
			b[i] = '\n'
		default:
			b[i] = byte(rng.IntN(256))
		}
	}
	return b
}

// sizes returns a max_bytes source: mostly tiny windows (that is where the
// cuts are interesting), sometimes large ones.
func sizes(rng *rand.Rand, maxSmall int) func() int {
	return func() int {
		if rng.IntN(8) == 0 {
			return 1 + rng.IntN(4096)
		}
		return 1 + rng.IntN(maxSmall)
	}
}

func TestResumeReassemblesCombined(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 300 {
		text := randText(rng, rng.IntN(3000))
		bin := randBinary(rng, rng.IntN(300))
		for _, log := range [][]byte{text, bin} {
			start := int64(0)
			if trial%3 == 0 {
				start = -int64(rng.IntN(len(log) + 2))
			}
			for _, final := range []bool{false, true} {
				exact, err := drain(log, logread.Request{Offset: start, Exact: true, Final: final}, sizes(rng, 16))
				require.NoError(t, err)
				from := exact.first.Offset
				require.Equal(t, string(log[from:]), string(exact.bytes), "trial %d exact", trial)
				if start < 0 && from > 0 {
					require.Equal(t, []logread.Gap{{0, from}}, exact.first.Skipped)
				}

				txt, err := drain(log, logread.Request{Offset: start, Final: final}, sizes(rng, 16))
				require.NoError(t, err)
				from = txt.first.Offset
				// Only a growing log's incomplete last character is left.
				end := txt.last.EndOffset
				if end != int64(len(log)) {
					require.True(t, heldAtEnd(log, txt.lastReq, end), "trial %d: drain stopped at %d of %d", trial, end, len(log))
				}
				if utf8.Valid(log) {
					require.False(t, txt.lossy, "trial %d", trial)
					require.Equal(t, string(log[from:]), string(txt.text), "trial %d text", trial)
				} else if !txt.lossy {
					require.Equal(t, string(log[from:end]), string(txt.text), "trial %d text", trial)
				}
			}
		}
	}
}

// writes splits data into stream writes of random lengths, cut at any byte
// or (whole) only at character boundaries.
type write struct {
	s logframe.Stream
	p []byte
}

func randWrites(rng *rand.Rand, data []byte, whole bool) []write {
	var ws []write
	for len(data) > 0 {
		n := min(len(data), 1+rng.IntN(40))
		if whole {
			for n < len(data) && !utf8.RuneStart(data[n]) {
				n++
			}
		}
		s := logframe.Stdout
		if rng.IntN(3) == 0 {
			s = logframe.Stderr
		}
		ws = append(ws, write{s, data[:n]})
		data = data[n:]
	}
	return ws
}

func encode(ws []write) (log, stdout, stderr []byte) {
	for _, w := range ws {
		log = logframe.AppendFrames(log, w.s, w.p)
		if w.s == logframe.Stderr {
			stderr = append(stderr, w.p...)
		} else {
			stdout = append(stdout, w.p...)
		}
	}
	return log, stdout, stderr
}

func TestResumeReassemblesFramed(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 300 {
		whole := trial%2 == 0
		ws := randWrites(rng, randText(rng, rng.IntN(2000)), whole)
		if trial%5 == 0 {
			ws = append(ws, randWrites(rng, randBinary(rng, 200), false)...)
		}
		log, stdout, stderr := encode(ws)

		exact, err := drain(log, logread.Request{Framed: true, Exact: true}, sizes(rng, 120))
		require.NoError(t, err)
		require.Equal(t, string(stdout), string(exact.stdout), "trial %d", trial)
		require.Equal(t, string(stderr), string(exact.stderr), "trial %d", trial)

		txt, err := drain(log, logread.Request{Framed: true}, sizes(rng, 120))
		require.NoError(t, err)
		if whole && utf8.Valid(stdout) && utf8.Valid(stderr) {
			// Writes of whole characters never split one: never lossy.
			require.False(t, txt.lossy, "trial %d", trial)
		}
		if !txt.lossy {
			// The drain may stop where a stream is inside a character that
			// the writer may still complete.
			o, e := stdout, stderr
			if end := txt.last.EndOffset; end != int64(len(log)) {
				require.True(t, heldAtEnd(log, txt.lastReq, end), "trial %d: drain stopped at %d of %d", trial, end, len(log))
				o, e = demuxAll(t, log[:end], false)
			}
			require.Equal(t, string(o), string(txt.outText), "trial %d", trial)
			require.Equal(t, string(e), string(txt.errText), "trial %d", trial)
		}

		raw, err := drain(log, logread.Request{Framed: true, Raw: true}, sizes(rng, 120))
		require.NoError(t, err)
		require.Equal(t, string(log), string(raw.text), "trial %d", trial)

		// From a negative offset: the streams of the frames from the
		// aligned start on.
		neg := -int64(rng.IntN(len(log) + 1))
		exact, err = drain(log, logread.Request{Framed: true, Exact: true, Offset: neg}, sizes(rng, 120))
		require.NoError(t, err)
		o, e := demuxAll(t, log[exact.first.Offset:], false)
		require.Equal(t, string(o), string(exact.stdout))
		require.Equal(t, string(e), string(exact.stderr))
	}
}

// Windows of 1 MiB over frames that split characters, as the capture does
// when a read ends mid-character: the window ends before the split, so text
// drains losslessly.
func TestFramedTextLosslessWithLargeWindows(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	data := randText(rng, 4<<20)
	var log []byte
	for p := data; len(p) > 0; {
		n := min(len(p), 1+rng.IntN(logframe.MaxPayload))
		log = logframe.AppendFrames(log, logframe.Stdout, p[:n])
		p = p[n:]
	}
	d, err := drain(log, logread.Request{Framed: true}, func() int { return logread.MaxWindow })
	require.NoError(t, err)
	assert.False(t, d.lossy)
	assert.Equal(t, len(data), len(d.outText))
	assert.True(t, bytes.Equal(data, d.outText))
}

func grepLines(log []byte, re *regexp.Regexp, final bool) []logread.Match {
	var ms []logread.Match
	for a := 0; a < len(log); {
		i := bytes.IndexByte(log[a:], '\n')
		if i < 0 {
			if final && re.Match(log[a:]) {
				ms = append(ms, logread.Match{Offset: int64(a), Line: string(log[a:])})
			}
			break
		}
		if re.Match(log[a : a+i]) {
			ms = append(ms, logread.Match{Offset: int64(a), Line: string(log[a : a+i])})
		}
		a += i + 1
	}
	return ms
}

func TestGrepDrain(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	re := regexp.MustCompile("foo|é|^a")
	for trial := range 300 {
		log := randText(rng, rng.IntN(2000))
		longest := 0
		for _, l := range bytes.Split(log, []byte("\n")) {
			longest = max(longest, len(l)+1)
		}
		for _, final := range []bool{false, true} {
			// Windows that hold every line whole find exactly the lines a
			// whole-file grep finds; the last unterminated line only when final.
			d, err := drain(log, logread.Request{Grep: re, Final: final}, func() int { return longest + rng.IntN(200) })
			require.NoError(t, err)
			want := grepLines(log, re, final || d.last.EndOffset == int64(len(log)))
			require.Equal(t, want, d.matches, "trial %d", trial)

			// Any window sizes: every window's bytes are accounted for.
			req := logread.Request{Grep: re, Final: final}
			d, err = drain(log, req, sizes(rng, 30))
			require.NoError(t, err)
			require.Empty(t, checkGrepDrain(log, req, d), "trial %d", trial)
		}
	}
}

func TestGrepFramedDrain(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	re := regexp.MustCompile("foo|é")
	for trial := range 200 {
		ws := randWrites(rng, randText(rng, rng.IntN(2000)), true)
		log, stdout, stderr := encode(ws)
		// One window for the whole log: the per-stream lines a grep of each
		// stream finds, in log order.
		w := mustRead(t, log, logread.Request{Framed: true, Grep: re, MaxBytes: logread.MaxWindow, Final: true})
		require.Empty(t, checkWindow(log, logread.Request{Framed: true, Grep: re}, w))
		var got [2][]string
		for _, m := range w.Matches {
			i := 0
			if m.Stream == "stderr" {
				i = 1
			}
			got[i] = append(got[i], m.Line)
		}
		for i, s := range [][]byte{stdout, stderr} {
			var want []string
			for _, m := range grepLines(s, re, true) {
				want = append(want, m.Line)
			}
			require.Equal(t, want, got[i], "trial %d stream %d", trial, i)
		}
		for i := 1; i < len(w.Matches); i++ {
			require.LessOrEqual(t, w.Matches[i-1].Offset, w.Matches[i].Offset)
		}
		// Drains in small windows keep the window invariants.
		req := logread.Request{Framed: true, Grep: re}
		d, err := drain(log, req, sizes(rng, 100))
		require.NoError(t, err)
		require.Empty(t, checkGrepDrain(log, req, d), "trial %d", trial)
	}
}

// lastLines is the reference for tail_lines: the suffix of p holding its
// last n lines.
func lastLines(p []byte, n int) []byte {
	lines := strings.SplitAfter(string(p), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return []byte(strings.Join(lines[max(0, len(lines)-n):], ""))
}

func TestTailLinesProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for trial := range 500 {
		log := randText(rng, rng.IntN(3000))
		n := 1 + rng.IntN(30)
		// Unbounded budget: exactly the last n lines.
		w := mustRead(t, log, logread.Request{TailLines: n, MaxBytes: logread.MaxWindow, Final: true})
		require.Equal(t, string(lastLines(log, n)), w.Content, "trial %d", trial)
		require.Empty(t, checkWindow(log, logread.Request{TailLines: n}, w))

		// Bounded budget: complete lines only, as many as fit.
		mb := 1 + rng.IntN(200)
		w = mustRead(t, log, logread.Request{TailLines: n, MaxBytes: mb, Exact: true})
		require.Empty(t, checkWindow(log, logread.Request{TailLines: n, Exact: true}, w))
		require.Equal(t, int64(len(log)), w.EndOffset)
		got := w.Bytes
		lines := bytes.Count(got, []byte("\n"))
		if len(got) > 0 && got[len(got)-1] != '\n' {
			lines++
		}
		require.LessOrEqual(t, lines, n)
		atLine := w.Offset == 0 || log[w.Offset-1] == '\n'
		if !atLine {
			// Not even the last line fits: its last mb bytes.
			require.Equal(t, int64(len(log)-mb), w.Offset, "trial %d", trial)
			require.NotContains(t, string(log[w.Offset:len(log)-1]), "\n")
			continue
		}
		require.LessOrEqual(t, len(got), mb)
		if lines < n && w.Offset > 0 {
			prev := bytes.LastIndexByte(log[:w.Offset-1], '\n') + 1
			require.Greater(t, len(log)-prev, mb, "trial %d: the previous line would have fit", trial)
		}
	}
}

func TestTailLinesFramedProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for trial := range 300 {
		ws := randWrites(rng, randText(rng, rng.IntN(3000)), true)
		log, _, _ := encode(ws)
		var all []byte // the interleaved decoded output
		for _, w := range ws {
			all = append(all, w.p...)
		}
		n := 1 + rng.IntN(30)
		w := mustRead(t, log, logread.Request{Framed: true, TailLines: n, MaxBytes: logread.MaxWindow})
		require.Empty(t, checkWindow(log, logread.Request{Framed: true, TailLines: n}, w))
		require.False(t, w.Lossy, "trial %d: whole-character writes", trial)
		require.Equal(t, string(lastLines(all, n)), w.Content, "trial %d", trial)

		// A small budget: a suffix of the output, of complete lines unless
		// not even the last line fits.
		mb := 1 + rng.IntN(300)
		w = mustRead(t, log, logread.Request{Framed: true, TailLines: n, MaxBytes: mb})
		require.Empty(t, checkWindow(log, logread.Request{Framed: true, TailLines: n}, w))
		require.True(t, bytes.HasSuffix(all, []byte(w.Content)), "trial %d", trial)
		start := len(all) - len(w.Content)
		lines := strings.Count(strings.TrimSuffix(w.Content, "\n"), "\n") + 1
		if w.Content == "" {
			lines = 0
		}
		require.LessOrEqual(t, lines, n, "trial %d", trial)
		if start > 0 && all[start-1] != '\n' {
			// Not even the last line fits: its part in the last frame(s).
			require.Equal(t, 1, lines, "trial %d", trial)
		}
		require.LessOrEqual(t, w.EndOffset-w.Offset, max(int64(mb), int64(len(log))-lastFrameStart(log)), "trial %d", trial)
	}
}

func lastFrameStart(log []byte) int64 {
	return int64(bytes.LastIndexByte(log[:len(log)-1], '\n') + 1)
}
