package logread

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/agent-box/agent-box/logframe"
)

func validate(size int64, req Request) error {
	if size < 0 {
		return fmt.Errorf("%w: negative log size %d", ErrBadRequest, size)
	}
	if err := req.Check(); err != nil {
		return err
	}
	if req.Offset > size {
		return fmt.Errorf("%w: offset %d, log size is %d", ErrBadOffset, req.Offset, size)
	}
	return nil
}

// Check reports what is wrong with req whatever the log: max_bytes,
// tail_lines and context out of range, tail_lines with an offset or with
// grep, context without grep. It is
// the one place these rules are written: runs checks a tail_log call with
// it before it opens anything, and Read checks every request with it.
func (req Request) Check() error {
	if req.MaxBytes < 1 || req.MaxBytes > MaxWindow {
		return fmt.Errorf("%w, got %d", ErrBadMaxBytes, req.MaxBytes)
	}
	if req.TailLines != 0 { // 0: not given
		if err := CheckTailLines(req.TailLines); err != nil {
			return err
		}
	}
	if req.TailLines > 0 && req.Offset != 0 {
		return badRequestf("tail_lines counts back from the end of the log; leave offset out (got %d)", req.Offset)
	}
	if req.TailLines > 0 && req.Grep != nil {
		return badRequestf("tail_lines and grep cannot be combined; grep a window at a negative offset instead")
	}
	if req.Context < 0 || req.Context > MaxContext {
		return badRequestf("context must be between 0 and %d, got %d", MaxContext, req.Context)
	}
	if req.Context > 0 && req.Grep == nil {
		return badRequestf("context gives the lines around grep's matches; give grep too")
	}
	return nil
}

// badRequest is a refused request: it is ErrBadRequest, and says only
// what is wrong with the request, for the caller to show as it is.
type badRequest string

func (e badRequest) Error() string        { return string(e) }
func (e badRequest) Is(target error) bool { return target == ErrBadRequest }

func badRequestf(format string, a ...any) error { return badRequest(fmt.Sprintf(format, a...)) }

// CheckTailLines is the rule for a tail_lines that was given.
func CheckTailLines(n int) error {
	if n < 1 || n > MaxTailLines {
		return badRequestf("tail_lines must be between 1 and %d, got %d", MaxTailLines, n)
	}
	return nil
}

// text reports whether the answer is text (so cuts respect UTF-8) rather
// than exact bytes. Grep answers are always text.
func (req Request) text() bool { return !req.Exact || req.Grep != nil }

// resolveStart turns req.Offset into the window's first byte.
func resolveStart(r io.ReaderAt, size int64, req Request) (int64, error) {
	off := req.Offset
	if off >= 0 {
		if req.Framed && off > 0 && off < size {
			var b [1]byte
			if err := readAt(r, b[:], off-1); err != nil {
				return 0, err
			}
			if b[0] != '\n' {
				return 0, badRequestf("offset %d is not a frame boundary (the byte before it is not a newline); "+
					"resume from a returned end offset, or use a negative offset to count from the end", off)
			}
		}
		return off, nil
	}
	start := max(0, size+off)
	if start == 0 {
		return 0, nil
	}
	if req.Framed {
		return alignFrame(r, start, size)
	}
	if req.Grep != nil {
		// Back to the start of the line the offset falls in, so that the
		// lines holding the last -Offset bytes are matched whole, unless
		// that line started more than a window earlier: then it is matched
		// in parts anyway, from a character boundary.
		limit := max(0, start-int64(req.MaxBytes))
		nl, err := prevNL(r, start, limit)
		switch {
		case err != nil:
			return 0, err
		case nl >= 0:
			return nl + 1, nil
		case limit == 0:
			return 0, nil
		}
	}
	if req.text() {
		var b [utf8.UTFMax - 1]byte
		p := b[:min(int64(len(b)), size-start)]
		if err := readAt(r, p, start); err != nil {
			return 0, err
		}
		start += int64(leadingConts(p))
	}
	return start, nil
}

// alignFrame moves start (0 < start < size) forward to the next frame
// boundary. Every frame line ends within MaxLine bytes of its start, so the
// boundary is at most MaxLine bytes away. If the only line ahead is an
// incomplete last line, the boundary is the start of that line, behind
// start: the log's size is not a boundary there, and a window that ended at
// it could not be resumed once the line is completed.
func alignFrame(r io.ReaderAt, start, size int64) (int64, error) {
	var b [1]byte
	if err := readAt(r, b[:], start-1); err != nil {
		return 0, err
	}
	if b[0] == '\n' {
		return start, nil
	}
	limit := min(size, start-1+logframe.MaxLine)
	nl, err := nextNL(r, start, limit)
	if err != nil {
		return 0, err
	}
	if nl >= 0 {
		return nl + 1, nil
	}
	if limit == size {
		return lastBoundary(r, start, size)
	}
	return 0, fmt.Errorf("logread: no frame boundary within %d bytes after offset %d: %w", logframe.MaxLine, start, logframe.ErrMalformed)
}

// lastBoundary returns the start of the line holding byte before-1, which is
// the incomplete last line of the log (no newline in [before, size)).
func lastBoundary(r io.ReaderAt, before, size int64) (int64, error) {
	limit := max(0, size-logframe.MaxLine)
	nl, err := prevNL(r, before, limit)
	if err != nil {
		return 0, err
	}
	if nl >= 0 {
		return nl + 1, nil
	}
	if limit == 0 {
		return 0, nil
	}
	return 0, fmt.Errorf("logread: last line, before offset %d, is longer than %d bytes: %w", before, logframe.MaxLine, logframe.ErrMalformed)
}

// windowCombined fills w with the window of a combined log at w.Offset.
func windowCombined(r io.ReaderAt, size int64, req Request, w *Window) error {
	start := w.Offset
	end := min(size, start+int64(req.MaxBytes))
	// Room for fitRunes to complete a character without reallocating.
	buf := make([]byte, end-start, end-start+utf8.UTFMax)
	if err := readAt(r, buf, start); err != nil {
		return err
	}
	if req.Exact {
		w.Bytes = buf
		w.EndOffset = end
		return nil
	}
	buf, err := fitRunes(r, buf, start, size, req.Final)
	if err != nil {
		return err
	}
	w.EndOffset = start + int64(len(buf))
	w.Content, w.Lossy = toText(buf)
	return nil
}

// fitRunes cuts a text window buf = log[start:start+len(buf)] so that it
// does not end inside a UTF-8 sequence that more bytes could complete:
//
//   - the window ends before such a sequence, which then starts the next
//     window, unless the log is Final and the sequence is its last bytes
//     (it can no longer complete, and is returned as U+FFFD);
//   - if the sequence is the whole window (MaxBytes smaller than it), the
//     window grows by up to UTFMax-1 bytes to hold the whole character,
//     so that every window makes progress and text still reassembles;
//   - if the sequence is the end of a growing log, it is left for a later
//     call even when that leaves the window empty: the writer is inside the
//     character, which a flush cut, and will finish it. Returning U+FFFD
//     instead would lose the character for good, since the client resumes
//     past it. The empty window makes no progress, which the caller sees
//     (EndOffset == Offset with Truncated): tail_log's wait_ms then waits
//     for the rest of the character instead of returning.
//
// buf must have capacity for UTFMax-1 more bytes.
func fitRunes(r io.ReaderAt, buf []byte, start, size int64, final bool) ([]byte, error) {
	i := incompleteTail(buf)
	if i == len(buf) {
		return buf, nil
	}
	end := start + int64(len(buf))
	switch {
	case end == size && final:
		return buf, nil
	case i > 0 || end == size:
		return buf[:i], nil
	}
	n := min(size-end, int64(utf8.UTFMax-len(buf)))
	more := buf[len(buf) : len(buf)+int(n)]
	if err := readAt(r, more, end); err != nil {
		return nil, err
	}
	buf = buf[:len(buf)+int(n)]
	if !utf8.FullRune(buf) {
		// The log ends inside the character.
		if final {
			return buf, nil
		}
		return buf[:0], nil
	}
	_, k := utf8.DecodeRune(buf)
	return buf[:k], nil
}

// frameWindow reads the frame lines of a window that starts at the frame
// boundary start: every line that ends within max bytes, or, when the first
// line is longer than max, that line alone (frames are at most MaxLine
// bytes, so the window stays bounded and is never empty while complete
// frames remain). partial counts the bytes at the end of buf that are an
// incomplete last line of the log; it is non-zero only when the window
// reaches size.
//
// buf is made in dst's memory when it has room.
func frameWindow(r io.ReaderAt, start, size int64, max int, dst []byte) (buf []byte, partial int, err error) {
	end := min(size, start+int64(max))
	if int64(cap(dst)) >= end-start {
		buf = dst[:end-start]
	} else {
		buf = make([]byte, end-start)
	}
	if err := readAt(r, buf, start); err != nil {
		return nil, 0, err
	}
	if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
		if end == size {
			return buf, len(buf) - (i + 1), nil
		}
		return buf[:i+1], 0, nil
	}
	if end == size {
		return buf, len(buf), nil
	}
	limit := min(size, start+logframe.MaxLine)
	n := len(buf)
	buf = slices.Grow(buf, int(limit-end))[:limit-start]
	if err := readAt(r, buf[n:], end); err != nil {
		return nil, 0, err
	}
	if i := bytes.IndexByte(buf[n:], '\n'); i >= 0 {
		return buf[:n+i+1], 0, nil
	}
	if limit == size {
		return buf, len(buf), nil
	}
	return nil, 0, fmt.Errorf("logread: line at offset %d is longer than %d bytes: %w", start, logframe.MaxLine, logframe.ErrMalformed)
}

// windowRaw fills w with the frame lines as stored.
func windowRaw(r io.ReaderAt, size int64, req Request, w *Window) error {
	buf, partial, err := frameWindow(r, w.Offset, size, req.MaxBytes, nil)
	if err != nil {
		return err
	}
	if !req.Final {
		buf = buf[:len(buf)-partial]
	}
	w.EndOffset = w.Offset + int64(len(buf))
	if req.Exact {
		w.Bytes = buf
	} else {
		w.Content, w.Lossy = toText(buf)
	}
	return nil
}

// linePool holds the buffers that decoded reads read frame lines into:
// decoding copies every payload out, so the lines are garbage once decoded,
// and a drain in 1 MiB windows would otherwise allocate (and zero) a MiB
// per window for nothing. Room for MaxWindow plus one oversized line.
var linePool = sync.Pool{New: func() any {
	b := make([]byte, 0, MaxWindow+logframe.MaxLine)
	return &b
}}

// pooledMin is the smallest window that takes a pooled buffer: a small
// window costs little to allocate, and a pool emptied by the GC would
// otherwise make it allocate a whole pooled MiB.
const pooledMin = 256 << 10

// lineBuf returns memory for a decoded read of max bytes and the function
// that gives it back.
func lineBuf(max int) ([]byte, func()) {
	if max < pooledMin {
		return nil, func() {}
	}
	p := linePool.Get().(*[]byte)
	return *p, func() { linePool.Put(p) }
}

// addGap appends the gap [from, from+n) to gs, merging it with the last gap
// when they touch, so that a run of left-out lines is one gap.
func addGap(gs []Gap, from, n int64) []Gap {
	if n <= 0 {
		return gs
	}
	if k := len(gs) - 1; k >= 0 && gs[k].From+gs[k].Bytes == from {
		gs[k].Bytes += n
		return gs
	}
	return append(gs, Gap{From: from, Bytes: n})
}

// completeEnd is where the log's last complete line ends: size when the
// log is empty or ends with '\n', else the start of its partial last line.
func completeEnd(r io.ReaderAt, size int64) (int64, error) {
	if size == 0 {
		return 0, nil
	}
	var b [1]byte
	if err := readAt(r, b[:], size-1); err != nil {
		return 0, err
	}
	if b[0] == '\n' {
		return size, nil
	}
	return lastBoundary(r, size, size)
}

// reach says how far a framed window's frames go.
type reach int

const (
	reachMid     reach = iota // max_bytes cut the window before the end of the log
	reachGrowing              // to the end of a growing log (its complete frames)
	reachFinal                // to the end of a Final log
)

// framesAt reads the frame lines of a window that starts at start: cut
// before a partial last line unless the log is Final, and how far they
// reach. release gives the buffer back.
func framesAt(r io.ReaderAt, start, size int64, req Request) (buf []byte, to reach, release func(), err error) {
	mem, release := lineBuf(req.MaxBytes)
	buf, partial, err := frameWindow(r, start, size, req.MaxBytes, mem)
	if err != nil {
		release()
		return nil, reachMid, nil, err
	}
	switch {
	case start+int64(len(buf)) < size:
		to = reachMid
	case req.Final:
		to = reachFinal
	default:
		to = reachGrowing
	}
	if !req.Final {
		buf = buf[:len(buf)-partial]
	}
	return buf, to, release, nil
}
