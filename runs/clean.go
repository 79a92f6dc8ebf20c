package runs

import (
	"github.com/agent-box/agent-box/logframe"
	"github.com/agent-box/agent-box/logread"
)

// cleanFor is whether text read from run is cleaned (logread.Clean):
// what the caller asked, else clean, whatever the run: a progress bar
// that redraws with \r (pip, npm, curl) writes one on a pipe too, and a
// model reads its last state, not every one. The log keeps the bytes;
// clean: false (or base64) returns them.
func cleanFor(asked *bool) bool {
	if asked != nil {
		return *asked
	}
	return true
}

// cleanWindow cleans the text of w in place and returns how many bytes of
// text it removed: of Content, or, where the text shown is made of them,
// of a framed window's chunks or a grep's lines. An exact window (base64)
// is never cleaned. before is the log's text before the window: a
// window that begins inside an escape sequence (logread.SequenceTail)
// begins after it, instead of showing the sequence's tail as text.
//
// A framed window's chunks are cleaned one by one, and Content is made of
// them again: a redraw on one stream does not take back the other's text.
// A chunk that begins inside a sequence begun in the stream's chunk
// before it begins after it too.
func cleanWindow(w *logread.Window, before logread.Before) int {
	var removed int
	if w.Chunks != nil {
		removed = cleanChunks(w.Chunks, before)
		w.Content = joinChunks(w.Chunks)
	} else {
		w.Content, removed = cleanAfter(before.Stdout, w.Content, before.Whole)
	}
	w.Stdout, _ = cleanAfter(before.Stdout, w.Stdout, before.Whole)
	w.Stderr, _ = cleanAfter(before.Stderr, w.Stderr, before.Whole)
	for i := range w.Matches {
		// A match is a whole line, which a sequence rarely spans (a
		// CSI ends at a line end).
		var n int
		w.Matches[i].Line, n = logread.Clean(w.Matches[i].Line)
		removed += n
	}
	return removed
}

// cleanAfter is logread.Clean of text after before: what text begins with
// of a sequence begun in before is removed first.
func cleanAfter(before, text string, whole bool) (string, int) {
	skip := logread.SequenceTail(before, text, whole)
	clean, n := logread.Clean(text[skip:])
	return clean, skip + n
}

// before reads the log's text before off, for cleanWindow; none when the
// log cannot be read (then a window is cleaned as if it began the log).
func before(run Run, off int64) logread.Before {
	if off == 0 || run.rec == nil {
		return logread.Before{Whole: true}
	}
	r, closeLog, _, err := openLog(run)
	if err != nil {
		return logread.Before{Whole: true}
	}
	defer closeLog()
	b, err := logread.ReadBefore(r, off, run.rec.LogFormat == logframe.FormatName)
	if err != nil {
		return logread.Before{Whole: true}
	}
	return b
}

// clean cleans the output tail in place and returns how many bytes it
// removed from the output (framed: from its chunks, which the text shows).
func (t *Tail) clean(before logread.Before) int {
	var removed int
	if t.OutputChunks != nil {
		removed = cleanChunks(t.OutputChunks, logread.Before{})
		t.Output = joinChunks(t.OutputChunks)
	} else {
		t.Output, removed = cleanAfter(before.Stdout, t.Output, before.Whole)
	}
	t.Stderr, _ = logread.Clean(t.Stderr)
	return removed
}

func cleanChunks(chunks []logread.Chunk, before logread.Before) (removed int) {
	// Each stream's look back, for its next chunk: what SequenceTail
	// decides from, kept chunk by chunk (not the text: a window of many
	// small chunks would copy the look back for each).
	seen := map[string]*logread.Lookback{
		"stdout": logread.NewLookback(before.Stdout, before.Whole),
		"stderr": logread.NewLookback(before.Stderr, before.Whole),
	}
	for i := range chunks {
		c := &chunks[i]
		l := seen[c.Stream]
		if l == nil {
			l = logread.NewLookback("", before.Whole)
			seen[c.Stream] = l
		}
		text := c.Text
		skip := l.Tail(text)
		var n int
		c.Text, n = logread.Clean(text[skip:])
		removed += skip + n
		l.Write(text)
	}
	return removed
}

func joinChunks(chunks []logread.Chunk) string {
	n := 0
	for _, c := range chunks {
		n += len(c.Text)
	}
	b := make([]byte, 0, n)
	for _, c := range chunks {
		b = append(b, c.Text...)
	}
	return string(b)
}
