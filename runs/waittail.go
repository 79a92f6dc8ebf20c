package runs

import (
	"io"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agent-box/agent-box/logframe"
	"github.com/agent-box/agent-box/logread"
)

// Tail is the end of a run's output as process_wait shows it.
type Tail struct {
	Output string // last lines of the combined / interleaved output
	// OutputChunks is, for framed runs, Output by stream.
	OutputChunks []logread.Chunk
	Stderr       string // framed runs: last lines of stderr
	Lossy        bool
	// Cleaned: the text is logread.Clean's; CleanedBytes it removed
	// from Output.
	Cleaned      bool
	CleanedBytes int
	// Since is where the caller said it had read to (since_offset): the
	// tail begins no earlier.
	Since int64
	// OutputFrom is where Output begins in the log: tail_log from Since
	// up to it returns the output left out (framed: the frame holding its
	// first byte, which may hold output before it too).
	OutputFrom int64
	// StderrFrom is, for framed runs, the frame holding Stderr's first
	// byte.
	StderrFrom int64
	// OutputWhole: Output is all of the output past Since.
	OutputWhole bool
	// OutputCut, StderrCut: the tail's first line was longer than the
	// tail's bound, so only its end is shown.
	OutputCut bool
	StderrCut bool
}

// How much of the output process_wait returns.
const (
	waitTailLines = 20
	waitTailBytes = 8 << 10
	framedWindow  = 64 << 10
)

// outputTail reads the last lines of run's output past since, best
// effort: the answer is about the exit, a damaged log must not hide it.
func outputTail(run Run, since int64) Tail {
	r, closeLog, size, err := openLog(run)
	if err != nil {
		return Tail{}
	}
	defer closeLog()
	since = min(max(since, 0), size)
	if run.rec.LogFormat == logframe.FormatName {
		return framedTail(r, size, since)
	}
	t := Tail{Since: since}
	w, err := logread.Read(r, size, logread.Request{TailLines: waitTailLines, MaxBytes: waitTailBytes, Final: true})
	if err == nil && w.Offset < since {
		// The caller has the start of the tail already.
		w, err = logread.Read(r, size, logread.Request{Offset: since, MaxBytes: waitTailBytes, Final: true})
	}
	if err != nil {
		return t
	}
	t.Output, t.Lossy, t.OutputFrom = w.Content, w.Lossy, w.Offset
	t.OutputCut = w.Offset > since && !endsLine(r, w.Offset-1)
	t.OutputWhole = w.Offset == since
	return t
}

func framedTail(r io.ReaderAt, size, since int64) Tail {
	t := Tail{Since: since}
	w, err := logread.Read(r, size, logread.Request{Offset: -framedWindow, MaxBytes: framedWindow, Framed: true, Final: true})
	if err == nil && w.Offset < since {
		// since is a frame boundary when it is an end_offset of ours; an
		// offset inside a frame is refused, and the tail is read as if
		// none was given.
		if ws, err := logread.Read(r, size, logread.Request{Offset: since, MaxBytes: framedWindow, Framed: true, Final: true}); err == nil {
			w = ws
		} else {
			t.Since = 0
		}
	}
	if err != nil {
		return t
	}
	t.Output, t.OutputCut = lastLines(w.Content, waitTailLines, waitTailBytes)
	t.OutputChunks = lastChunks(w.Chunks, len(t.Output))
	t.Stderr, t.StderrCut = lastLines(w.Stderr, waitTailLines, waitTailBytes)
	t.Lossy, t.OutputFrom, t.StderrFrom = w.Lossy, w.Offset, w.Offset
	t.OutputWhole = w.Offset == t.Since && !t.OutputCut && trimNL(t.Output) == trimNL(w.Content)
	// The window's start is before the tail; the frame holding the tail's
	// first byte is where it begins: tail_lines, for as many lines as the
	// tail has, finds it, when its answer holds the whole tail (a last
	// line too long for it is answered by its last frame alone).
	if t.Output != "" && !t.OutputWhole {
		n := lineCount(t.Output)
		tl, err := logread.Read(r, size, logread.Request{TailLines: n, MaxBytes: framedWindow, Framed: true, Final: true})
		if err == nil && tl.Offset >= t.Since && strings.HasSuffix(trimNL(tl.Content), trimNL(t.Output)) {
			t.OutputFrom = tl.Offset
		}
	}
	// Stderr's lines are found among the window's lines, each with the
	// frame holding its first byte: the n-th last of stderr's is where
	// its tail begins. Not the interleaved tail's offset, which is later
	// whenever stdout wrote after stderr.
	if t.Stderr != "" {
		m, err := logread.Read(r, size, logread.Request{Offset: w.Offset, MaxBytes: framedWindow, Framed: true, Final: true, Grep: anyLine})
		if err == nil {
			var offs []int64
			for _, x := range m.Matches {
				if x.Stream == "stderr" {
					offs = append(offs, x.Offset)
				}
			}
			if n := lineCount(t.Stderr); len(offs) >= n {
				t.StderrFrom = offs[len(offs)-n]
			}
		}
	}
	return t
}

var anyLine = regexp.MustCompile(`^`)

// lastChunks is the end of chunks that holds their last n bytes of text.
func lastChunks(chunks []logread.Chunk, n int) []logread.Chunk {
	var out []logread.Chunk
	for i := len(chunks) - 1; i >= 0 && n > 0; i-- {
		c := chunks[i]
		if len(c.Text) > n {
			c.Text = c.Text[len(c.Text)-n:]
		}
		n -= len(c.Text)
		out = append(out, c)
	}
	slices.Reverse(out)
	return out
}

// lineCount is the number of lines in s, the last one with or without
// its newline.
func lineCount(s string) int { return max(1, strings.Count(trimNL(s), "\n")+1) }

func trimNL(s string) string { return strings.TrimSuffix(s, "\n") }

// endsLine reports whether the log byte at off is a newline.
func endsLine(r io.ReaderAt, off int64) bool {
	var b [1]byte
	n, _ := r.ReadAt(b[:], off)
	return n == 1 && b[0] == '\n'
}

// lastLines returns at most n lines and max bytes from the end of s, cut
// at a line start. When the last line alone is longer than max, its last
// max bytes (from a character boundary) are returned, and cut says so:
// the end of a long line beats an empty tail.
func lastLines(s string, n, max int) (tail string, cut bool) {
	// The newline ending the output, if it has one, is kept; none is
	// added: an output that ends without one (a prompt, printf) reads as
	// the child wrote it (issue 9).
	nl := ""
	if strings.HasSuffix(s, "\n") {
		s, nl = s[:len(s)-1], "\n"
	}
	if s == "" {
		return nl, false
	}
	keep, search := len(s), len(s)
	for lines := 0; lines < n; lines++ {
		j := strings.LastIndexByte(s[:search], '\n')
		if len(s)-(j+1) > max {
			break
		}
		keep = j + 1
		if j < 0 {
			break
		}
		search = j
	}
	if keep == len(s) {
		keep = len(s) - max
		for keep < len(s) && !utf8.RuneStart(s[keep]) {
			keep++
		}
		cut = true
	}
	return s[keep:] + nl, cut
}
