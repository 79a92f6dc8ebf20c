// Package logread cuts windows out of a run log for tail_log: byte-exact
// resumable windows over combined logs, frame-aligned decoding of framed
// logs, last-N-lines and grep, always saying which bytes were left out.
//
// It reads through io.ReaderAt and a size, so it never loads a whole log
// and can be tested and fuzzed on in-memory logs. A window reads at most
// MaxBytes of log plus a few bytes around it; the exceptions are named below
// and are bounded by logframe.MaxLine. A grep request reads window after
// window, up to GrepScanLimit bytes, holding one window at a time.
//
// # Resuming
//
// A client that calls again with Offset = EndOffset and concatenates the
// answers gets the log back byte for byte: Bytes in Exact mode; Content for
// a combined log that is valid UTF-8; StdoutBytes and StderrBytes for a
// framed log. Truncated is EndOffset < Size. Leaving out bytes is always
// said: Skipped lists every range before or inside the window that the
// answer does not return (a negative offset's prefix, grep's non-matching
// lines, an undecodable cut last frame), while bytes after EndOffset are
// signalled by Truncated alone. The prefix [0, Offset) is a gap when Read
// chose the start (a negative offset, tail_lines), not when the caller gave
// a positive offset.
//
// Every window that starts before the end of the log makes progress,
// except where a writer is still inside the only bytes it could return: an
// incomplete last frame line of a framed log, in text an incomplete last
// character, and for grep an unterminated last line (see below). The window
// is then empty, EndOffset ==
// Offset with Truncated set, until the writer finishes or the caller says
// Final; returning those bytes now would lose them, since the client
// resumes past them. Such a window says there is nothing to return yet,
// not that the client should call again at once: tail_log's wait_ms waits
// for the rest instead of returning it, and the log becoming Final ends
// the wait, so a follower never spins.
//
// # Text and characters
//
// Text (Content, Stdout, Stderr, Chunks, Match.Line) is valid UTF-8: each
// byte that does not start a valid sequence becomes U+FFFD and sets Lossy.
// A combined text window does not end inside a character that more bytes
// could complete; it ends before it, and the character starts the next
// window. When MaxBytes is smaller than the character at the window's
// start, the window grows by up to 3 bytes to hold it whole. When the
// character is the end of a growing log (a writer's flush cut it), the
// window ends before it even if that leaves it empty, and EndOffset is the
// character's first byte. Only at the end of a Final log, where nothing can
// complete it, is an incomplete character returned, as U+FFFD (Lossy); bytes
// that no continuation could make valid are replaced at once, growing log or
// not. A negative offset in text mode moves forward past at most 3
// continuation bytes to a character boundary. Exact windows are cut exactly
// at MaxBytes, so a text and an Exact request at the same offset may end at
// different offsets; both resume exactly.
//
// # Framed logs
//
// Windows start and end at frame boundaries. A positive Offset must be one
// (0, the size, or just after a newline), or ErrBadRequest; a negative
// Offset moves forward to the next boundary, or, when only an incomplete
// last line lies ahead, back to that line's start. A window holds the
// complete frame lines that end within MaxBytes; if the first line alone is
// longer, it holds that line (at most logframe.MaxLine bytes). An
// incomplete last line is left for a later call unless Final; with Final it
// is decoded if it parses, and otherwise reported as a Gap. A malformed
// complete line is an error wrapping logframe.ErrMalformed with its offset.
// Raw returns the lines as stored (Raw is ignored for combined logs).
//
// Stdout and Stderr decode each stream's bytes as one text, so a character
// split across two frames of a stream decodes whole when both are in the
// window. In text mode a window ends at the last frame boundary where
// neither stream is inside a character, so that splits across frames do not
// become splits across windows. If no such boundary follows the window's
// start, a window that reaches the end of a growing log is empty: a stream
// ends inside a character that its writer is still writing, and the frames
// after it, of either stream, wait with it until it completes, the log is
// Final, or more than MaxBytes of frames follow it. A window that MaxBytes
// cuts before the end keeps its frames instead and replaces the split
// character (Lossy), so that it makes progress. Chunks merge adjacent
// frames of one stream; a character split around frames of the other
// stream is moved whole into the chunk holding its last byte. Exact fills
// only StdoutBytes and StderrBytes, not the text fields or Chunks.
//
// # tail_lines
//
// TailLines returns the last N lines, reading backwards from the end in
// growing blocks and never more than MaxBytes of log: lines are
// '\n'-separated (a last line without newline counts), in a framed log of
// the interleaved decoded output. If N lines do not fit, the complete lines
// that fit are returned; fewer than N lines with Offset > 0 says so. If not
// even the last line fits, the answer is its last MaxBytes bytes (from a
// character boundary), a framed log's last frame whole. Offset is the first
// returned line's start (framed: the frame holding it; the payload before the
// line in that frame ends an earlier line and is not returned). EndOffset is
// the size, or the last frame boundary; a combined text answer of a growing
// log ends before an incomplete last character, even if that leaves no
// text. Offset must be 0, and TailLines cannot be combined with Grep.
//
// # grep
//
// Grep returns the matching lines, each with its offset, and Content empty;
// Skipped lists the maximal runs of bytes that hold no part of a returned
// match. It scans on past one window: from Offset it cuts window after
// window, each as described below with MaxBytes as its size, accumulating
// their matches and gaps (adjacent gaps merged), until the first of:
//
//   - the next match would take the matches past MaxBytes of text, each
//     line counted with its newline (the first match of a request is
//     returned whatever its size, so that a request progresses); EndOffset
//     is then where the first match not returned starts (framed: see below),
//     so that a client calling again from EndOffset gets every matching
//     line exactly once, and Skipped ends before it;
//   - GrepScanLimit bytes scanned: no window starts that far past Offset;
//   - the end of the log;
//   - a window that makes no progress (a growing log's unterminated last
//     line, below).
//
// Truncated is EndOffset < Size, as always: a request that stopped for any
// reason but the end of the log is resumed from EndOffset. Only one window
// of log bytes is held at a time; the matches' text is copied out of it.
//
// A combined window ends after its last complete line, so that a line cut
// by the window's end is matched whole by the next window. While the log can
// grow, a window that reaches its end ends before its unterminated last
// line, even if that leaves it empty (EndOffset is then the line's first
// byte): the writer is still writing the line, and matching what is there
// would consume it for good (tail_log's wait_ms waits for the rest). Once
// the log is Final the line is matched as it is. A window that MaxBytes
// cuts before the end of the log with no newline in it holds part of a line
// longer than MaxBytes: the parts of such a line are matched separately,
// each cut at a character boundary, so that every window progresses; the
// part that reaches the end of a growing log waits as above. A negative
// Offset moves back to the start of the line it falls in, so that the
// lines holding the last -Offset bytes are matched whole, unless that start
// is more than MaxBytes back; then it moves forward to a character
// boundary, as in text.
//
// In a framed log, lines are lines of each stream, a match's Offset is the
// frame where its line starts, and gaps are whole frames: a frame holding
// part of a matching line counts as returned. A window ends at the last
// frame boundary where both streams end with a newline (a line boundary).
// If the window reaches the end of a growing log, it ends there even if
// that leaves it empty: a stream's unterminated last line waits, and with
// it the frames of either stream after the frame where it starts, until it
// is complete or the log is Final. A window that MaxBytes cuts with no line
// boundary in it keeps its frames, matches its lines' parts, and ends where
// neither stream is inside a character, as in text. When the matches are
// full, the request ends at the last line boundary at or before the frame
// where the first match not returned starts, and the matches from there on
// are left for the next call, so that no line of either stream is split;
// only before the first line boundary after Offset, where such an end would
// not progress, do the matches go past MaxBytes. A negative Offset aligns
// to a frame boundary as above, so the first line of each stream may be a
// part. Raw frame lines are lines as stored, in windows of whole frame
// lines; an incomplete last line waits unless Final.
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

	// Final says the log can no longer grow: a partial UTF-8 sequence (or a
	// partial frame line) at its very end is returned rather than held back.
	Final bool
}

// Chunk is a run of decoded framed output from one stream.
type Chunk struct {
	Stream string `json:"stream"` // "stdout" or "stderr"
	Text   string `json:"text"`
}

// Match is one grep hit.
type Match struct {
	Offset int64  `json:"offset"`           // log offset of the line's first byte (framed: of the frame holding it)
	Stream string `json:"stream,omitempty"` // framed logs only
	Line   string `json:"line"`             // without its newline
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
