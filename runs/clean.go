package runs

import "github.com/agent-box/agent-box/logread"

// cleanFor is whether text read from run is cleaned (logread.Clean):
// what the caller asked, else the run's default, which is raw text: the
// bytes as written.
func cleanFor(asked *bool, run Run) bool {
	if asked != nil {
		return *asked
	}
	return false
}

// cleanWindow cleans the text of w in place and returns how many bytes of
// Content it removed. An exact window (base64) is never cleaned.
func cleanWindow(w *logread.Window) int {
	var removed int
	w.Content, removed = logread.Clean(w.Content)
	w.Stdout, _ = logread.Clean(w.Stdout)
	w.Stderr, _ = logread.Clean(w.Stderr)
	for i := range w.Chunks {
		w.Chunks[i].Text, _ = logread.Clean(w.Chunks[i].Text)
	}
	for i := range w.Matches {
		w.Matches[i].Line, _ = logread.Clean(w.Matches[i].Line)
	}
	return removed
}

// clean cleans the output tail in place and returns how many bytes it
// removed from Output.
func (t *Tail) clean() int {
	var removed int
	t.Output, removed = logread.Clean(t.Output)
	t.Stderr, _ = logread.Clean(t.Stderr)
	for i := range t.OutputChunks {
		t.OutputChunks[i].Text, _ = logread.Clean(t.OutputChunks[i].Text)
	}
	return removed
}
