package logread

import (
	"bytes"
	"fmt"
	"io"

	"github.com/agent-box/agent-box/logframe"
)

// tailText fills the answer to tail_lines for a combined log, or for a
// framed log's raw frame lines (each frame is one line there).
func tailText(r io.ReaderAt, size int64, req Request) (Window, error) {
	w := Window{Size: size}
	raw := req.Framed
	end := size
	if raw && !req.Final {
		var err error
		if end, err = completeEnd(r, size); err != nil {
			return w, err
		}
	}
	// One byte more than the budget, to see whether the line that starts at
	// the budget's first byte is preceded by a newline. Raw frames may
	// exceed the budget by one whole last frame.
	limit := req.MaxBytes + 1
	if raw {
		limit = max(req.MaxBytes, logframe.MaxLine) + 1
	}
	bb := newBackBuf(r, end, limit)
	start, err := textTailStart(bb, end, req)
	if err != nil {
		return w, err
	}
	if req.text() && !req.Final && !raw {
		// The writer may be inside a character: leave it for a later call,
		// even if that leaves no text.
		end = start + int64(incompleteTail(bb.slice(start, end)))
	}
	w.Offset, w.EndOffset = start, end
	w.Truncated = end < size
	if start > 0 {
		w.Skipped = []Gap{{From: 0, Bytes: start}}
	}
	if p := bb.slice(start, end); req.Exact {
		if len(p) > 0 {
			w.Bytes = p
		}
	} else {
		w.Content, w.Lossy = toText(p)
	}
	return w, nil
}

// textTailStart returns where tailText's answer, which ends at end, starts:
// at the first of the last TailLines lines, or of as many as fit in
// MaxBytes. If not even the last line fits, the answer is that line's last
// MaxBytes bytes, so it starts inside the line, at a character boundary in
// text mode. A raw frame line is never cut: a last frame line that bb
// cannot hold is longer than logframe.MaxLine, an error.
func textTailStart(bb *backBuf, end int64, req Request) (int64, error) {
	if end == 0 {
		return 0, nil
	}
	start, err := textLinesStart(bb, end, req)
	switch {
	case err != nil:
		return 0, err
	case start >= 0:
		return start, nil
	case req.Framed:
		return 0, fmt.Errorf("logread: frame line ending at offset %d is longer than %d bytes: %w", end, logframe.MaxLine, logframe.ErrMalformed)
	}
	start = end - int64(req.MaxBytes)
	if req.text() {
		start += int64(leadingConts(bb.slice(start, min(end, start+3))))
	}
	return start, nil
}

// textLinesStart scans bb backwards from end (> 0) and returns the start of
// the earliest of the last TailLines lines that starts within MaxBytes of
// end, or -1 if even the last line starts further back (bb reads no more
// than the budget, so a line start it cannot see is beyond it). A raw log's
// last frame line counts whatever its length, since frames are returned
// whole.
func textLinesStart(bb *backBuf, end int64, req Request) (int64, error) {
	if _, err := bb.more(); err != nil {
		return -1, err
	}
	minStart := end - int64(req.MaxBytes)
	start, found, search := int64(-1), 0, end
	if bb.byteAt(end-1) == '\n' {
		search = end - 1 // it ends the last line; it does not start one
	}
	for found < req.TailLines {
		nl, err := bb.lastNL(search)
		if err != nil {
			return -1, err
		}
		var ls int64
		switch {
		case nl >= 0:
			ls = nl + 1
		case bb.base == 0:
			ls = 0
		default:
			ls = -1 // beyond what the budget lets us read
		}
		if ls < 0 || (ls < minStart && !(req.Framed && found == 0)) {
			break
		}
		found++
		start = ls
		if ls == 0 {
			break
		}
		search = nl
	}
	return start, nil
}

// tailFramed fills the answer to tail_lines for a framed log: the last lines
// of the interleaved decoded output. Offset is the frame holding the first
// returned line's first byte; the part of that frame's payload before it
// ends an earlier line and is not returned.
func tailFramed(r io.ReaderAt, size int64, req Request) (Window, error) {
	w := Window{Size: size}
	end, bad, err := framedTailEnd(r, size, req.Final)
	if err != nil {
		return w, err
	}
	w.EndOffset = end + bad.Bytes
	w.Truncated = w.EndOffset < size

	bb := newBackBuf(r, end, max(req.MaxBytes, logframe.MaxLine)+1)
	startOff, startSkip, err := framedTailStart(bb, end, req.TailLines, req.MaxBytes)
	if err != nil {
		return w, err
	}
	w.Offset = startOff
	if startOff > 0 {
		w.Skipped = []Gap{{From: 0, Bytes: startOff}}
	}
	if bad.Bytes > 0 {
		w.Skipped = addGap(w.Skipped, bad.From, bad.Bytes)
	}
	if startOff == end {
		return w, nil
	}
	d, err := decodeFrames(bb.slice(startOff, end), decodeOpts{base: startOff, skip: startSkip})
	if err != nil {
		return w, err
	}
	d.fill(&w, req.Exact)
	return w, nil
}

// framedTailEnd returns where tailFramed's frames end: after the log's last
// complete frame line, or, in a Final log, after its incomplete last line if
// that parses (a crash can cut a line at a base64 quantum). A Final log's
// last line that does not parse is returned as bad, a gap to report rather
// than a reason to fail; a growing log's is left for its writer to finish.
func framedTailEnd(r io.ReaderAt, size int64, final bool) (end int64, bad Gap, err error) {
	end, err = completeEnd(r, size)
	if err != nil || end == size || !final {
		return end, Gap{}, err
	}
	line := make([]byte, size-end)
	if err := readAt(r, line, end); err != nil {
		return 0, Gap{}, err
	}
	if _, _, err := logframe.ParseLine(nil, line); err != nil {
		return end, Gap{From: end, Bytes: size - end}, nil
	}
	return size, Gap{}, nil
}

// framedTailStart scans the frames before end backwards, decoding each, and
// returns where the last n lines of the interleaved output start: the frame
// holding the first line's first byte (off) and the payload bytes of that
// frame before it (skip), which end an earlier line. It reads no frame
// that starts more than budget bytes before end but the last one, so when
// the n lines do not fit it returns those that do, and when not even the
// last line does, the last frame: a line longer than the budget is
// returned as its end. off is 0 when the log holds fewer lines.
func framedTailStart(bb *backBuf, end int64, n, budget int) (off int64, skip int, err error) {
	minStart := end - int64(budget)
	var scratch []byte
	found, seenLast := 0, false
	off = end          // the line start found so far
	first := int64(-1) // the earliest frame read
	lineEnd := end
	for lineEnd > 0 && found < n {
		nl, err := bb.lastNL(lineEnd - 1)
		if err != nil {
			return 0, 0, err
		}
		ls := nl + 1
		if nl < 0 && bb.base > 0 {
			if first < 0 {
				return 0, 0, fmt.Errorf("logread: frame line ending at offset %d is longer than %d bytes: %w", lineEnd, logframe.MaxLine, logframe.ErrMalformed)
			}
			break
		}
		if ls < minStart && first >= 0 {
			break // the last frame is always read, even if longer than the budget
		}
		_, p, err := logframe.ParseLine(scratch[:0], bb.slice(ls, lineEnd))
		if err != nil {
			return 0, 0, fmt.Errorf("logread: frame at offset %d: %w", ls, err)
		}
		scratch, first = p, ls
		hi := len(p)
		if !seenLast {
			seenLast = true
			if p[hi-1] == '\n' {
				hi-- // it ends the last line; it does not start one
			}
		}
		if k, i := newlinesBack(p[:hi], n-found); k > 0 {
			found += k
			off, skip = ls, i
			if i == len(p) {
				off, skip = lineEnd, 0 // the line starts with the next frame
			}
		}
		lineEnd = ls
	}
	switch {
	case found == n:
	case lineEnd == 0:
		off, skip = 0, 0 // the log holds fewer lines
	case found == 0 && first >= 0:
		off, skip = first, 0 // a line longer than the budget: its end
	}
	return off, skip, nil
}

// newlinesBack counts the newlines of p from its end, at most want, and
// returns how many (k) and where the line after the earliest of them
// starts (i): each starts one of the lines tail_lines returns.
func newlinesBack(p []byte, want int) (k, i int) {
	for k < want {
		j := bytes.LastIndexByte(p, '\n')
		if j < 0 {
			break
		}
		k++
		i, p = j+1, p[:j]
	}
	return k, i
}
