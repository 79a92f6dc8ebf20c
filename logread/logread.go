// Package logread cuts windows out of a run log for tail_log: byte-exact
// resumable windows over combined logs, frame-aligned decoding of framed
// logs, last-N-lines and grep, always saying which bytes were left out.
//
// It reads through io.ReaderAt and a size, so it never loads a whole log
// and can be tested and fuzzed on in-memory logs. A client that calls
// again with Offset = EndOffset gets the log back byte for byte, and every
// window that starts before the end progresses, except while a writer is
// still inside the only bytes it could return (then the window is empty
// until the log grows or is Final). The whole contract (resuming, text and
// characters, framed logs, tail_lines, grep) is in
// docs/architecture/logread.md.
package logread

import (
	"errors"
	"io"
	"regexp"
)

// MaxWindow is the largest max_bytes a caller may ask for.
const MaxWindow = 1 << 20

// MaxTailLines bounds Request.TailLines.
const MaxTailLines = 10000

// MaxContext bounds Request.Context: a model reads every context line.
const MaxContext = 20

var (
	ErrBadOffset   = errors.New("offset is past the end of the log")
	ErrBadMaxBytes = errors.New("max_bytes must be between 1 and 1048576")
	ErrBadRequest  = errors.New("invalid log request")
)

// Request describes one window.
type Request struct {
	// Offset is a byte offset into the log file; negative counts from the
	// end (-N = the last N bytes). An offset past the end is ErrBadOffset.
	Offset   int64
	MaxBytes int // log bytes to cover at most, 1..MaxWindow

	Framed bool // the log holds logframe frames
	Raw    bool // framed only: return the frames as stored, not decoded
	Exact  bool // fill Window.Bytes / StdoutBytes / StderrBytes with exact bytes instead of text

	// TailLines > 0 returns the last N lines before the end of the log
	// (Offset must then be 0 and is ignored); at most MaxTailLines.
	TailLines int
	// Grep, when set, returns only the matching lines, scanning on from
	// Offset through windows of MaxBytes (see the package comment).
	Grep *regexp.Regexp
	// Context, with Grep, returns up to this many lines before and after
	// each match, like grep -C; at most MaxContext.
	Context int
	// LineMax > 0 cuts each returned grep line to at most LineMax bytes of
	// text (Match.Bytes then says its length in the log).
	LineMax int

	// Final says the log can no longer grow: a partial UTF-8 sequence (or a
	// partial frame line) at its very end is returned rather than held back.
	Final bool
}

// Chunk is a run of decoded framed output from one stream.
type Chunk struct {
	Stream string `json:"stream"` // "stdout" or "stderr"
	Text   string `json:"text"`
}

// Match is one grep hit, or with Context a line around one.
type Match struct {
	Offset  int64  `json:"offset"`                                                                                   // log offset of the line's first byte (framed: of the frame holding it)
	Stream  string `json:"stream,omitempty"`                                                                         // framed logs only
	Line    string `json:"line"`                                                                                     // without its newline
	Context bool   `json:"context,omitempty" jsonschema:"a line around a match"`                                     // not a match
	Bytes   int    `json:"line_bytes,omitempty" jsonschema:"line was cut: its length in the log (part: the part's)"` // LineMax
	// Continues: with Context, a line after a match before the request's
	// Offset, which this answer does not hold (a call that resumes a grep
	// from its end offset owes it; from any other offset, it is context
	// without its match).
	Continues bool `json:"continues,omitempty" jsonschema:"context after a match before offset, not in this answer"`
	// Part: the line is longer than a window and this is one of the parts
	// it was matched in, from Offset; Bytes, when set, is the part's length.
	Part bool `json:"part,omitempty" jsonschema:"the line is longer than a window: this is a part of it, from offset"`
	// Group: with Context, the line before this one (in its stream) is
	// not in the answer, so that grep would print "--" before it.
	Group bool `json:"-"`
}

// Gap is a range of log bytes the answer left out, and where to fetch it.
type Gap struct {
	From  int64 `json:"from"`  // first byte left out; fetch with offset=From
	Bytes int64 `json:"bytes"` // how many
}

// Window is the answer. Invariant: a client that calls again with
// Offset = EndOffset and concatenates the exact bytes of every window gets
// the log byte for byte (framed: the decoded streams byte for byte).
type Window struct {
	Offset    int64 // where the window starts (after negative-offset alignment)
	EndOffset int64 // resume here; a frame boundary in framed logs
	Size      int64 // log size the window was cut from
	Truncated bool  // more bytes exist past EndOffset now

	Content string // valid UTF-8 text: combined bytes, raw frames, or the interleaved decoded streams
	Lossy   bool   // invalid UTF-8 was replaced with U+FFFD in Content/Stdout/Stderr/Chunks

	Bytes       []byte // Exact: the window's bytes (combined, or raw frames)
	StdoutBytes []byte // Exact & framed decoded
	StderrBytes []byte

	Stdout string  // framed decoded: stdout text of the window
	Stderr string  // framed decoded: stderr text
	Chunks []Chunk // framed decoded: both, interleaved in log order

	Matches []Match // Grep
	Skipped []Gap   // ranges before or inside [Offset, EndOffset) not returned
}

// Read cuts one window out of the log r of the given size.
func Read(r io.ReaderAt, size int64, req Request) (Window, error) {
	if err := validate(size, req); err != nil {
		return Window{}, err
	}
	if req.TailLines > 0 {
		if req.Framed && !req.Raw {
			return tailFramed(r, size, req)
		}
		return tailText(r, size, req)
	}
	start, err := resolveStart(r, size, req)
	if err != nil {
		return Window{}, err
	}
	w := Window{Offset: start, EndOffset: start, Size: size}
	// A positive offset is where the caller asked to start, usually a
	// resume: the bytes before it were not asked for, so they are no gap.
	if req.Offset < 0 && start > 0 {
		w.Skipped = []Gap{{From: 0, Bytes: start}}
	}
	if start < size {
		switch {
		case req.Grep != nil && req.Framed && !req.Raw:
			err = grepFramed(r, size, req, &w)
		case req.Grep != nil:
			err = grepText(r, size, req, &w)
		case req.Framed && !req.Raw:
			err = windowFramed(r, size, req, &w)
		case req.Framed:
			err = windowRaw(r, size, req, &w)
		default:
			err = windowCombined(r, size, req, &w)
		}
		if err != nil {
			return Window{}, err
		}
	}
	w.Truncated = w.EndOffset < size
	return w, nil
}
