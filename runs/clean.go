package runs

import "github.com/agent-box/agent-box/logread"

// cleanFor is whether text read from run is cleaned (logread.Clean):
// what the caller asked, else the run's default: clean for a pty run,
// whose output is a terminal's (colours, redraws, CRLF), the bytes as
// written for the others.
func cleanFor(asked *bool, run Run) bool {
	if asked != nil {
		return *asked
	}
	return run.Pty
}

// cleanWindow cleans the text of w in place and returns how many bytes of
// text it removed: of Content, or, where the text shown is made of them,
// of a framed window's chunks or a grep's lines. An exact window (base64)
// is never cleaned.
//
// A framed window's chunks are cleaned one by one, and Content is made of
// them again: a redraw on one stream does not take back the other's text.
func cleanWindow(w *logread.Window) int {
	var removed int
	if w.Chunks != nil {
		removed = cleanChunks(w.Chunks)
		w.Content = joinChunks(w.Chunks)
	} else {
		w.Content, removed = logread.Clean(w.Content)
	}
	w.Stdout, _ = logread.Clean(w.Stdout)
	w.Stderr, _ = logread.Clean(w.Stderr)
	for i := range w.Matches {
		var n int
		w.Matches[i].Line, n = logread.Clean(w.Matches[i].Line)
		removed += n
	}
	return removed
}

// clean cleans the output tail in place and returns how many bytes it
// removed from the output (framed: from its chunks, which the text shows).
func (t *Tail) clean() int {
	var removed int
	if t.OutputChunks != nil {
		removed = cleanChunks(t.OutputChunks)
		t.Output = joinChunks(t.OutputChunks)
	} else {
		t.Output, removed = logread.Clean(t.Output)
	}
	t.Stderr, _ = logread.Clean(t.Stderr)
	return removed
}

func cleanChunks(chunks []logread.Chunk) (removed int) {
	for i := range chunks {
		var n int
		chunks[i].Text, n = logread.Clean(chunks[i].Text)
		removed += n
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
