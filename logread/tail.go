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
	minStart := end - int64(req.MaxBytes)
	start, found, search := int64(-1), 0, end
	if end > 0 {
		if _, err := bb.more(); err != nil {
			return w, err
		}
		if bb.byteAt(end-1) == '\n' {
			search = end - 1 // it ends the last line; it does not start one
		}
	}
	for end > 0 && found < req.TailLines {
		nl, err := bb.lastNL(search)
		if err != nil {
			return w, err
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
		if ls < 0 || (ls < minStart && !(raw && found == 0)) {
			break
		}
		found++
		start = ls
		if ls == 0 {
			break
		}
		search = nl
	}
	switch {
	case end == 0:
		start = 0
	case start >= 0:
	case raw:
		return w, fmt.Errorf("logread: frame line ending at offset %d is longer than %d bytes: %w", end, logframe.MaxLine, logframe.ErrMalformed)
	default:
		// Not even the last line fits: return its end, from a character
		// boundary. Offset then is inside that line.
		start = minStart
		if req.text() {
			start += int64(leadingConts(bb.slice(start, min(end, start+3))))
		}
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

// tailFramed fills the answer to tail_lines for a framed log: the last lines
// of the interleaved decoded output. Offset is the frame holding the first
// returned line's first byte; the part of that frame's payload before it
// ends an earlier line and is not returned.
func tailFramed(r io.ReaderAt, size int64, req Request) (Window, error) {
	w := Window{Size: size}
	var bad Gap // an undecodable incomplete last line of a Final log
	end, err := completeEnd(r, size)
	if err != nil {
		return w, err
	}
	if q := end; q < size && req.Final {
		line := make([]byte, size-q)
		if err := readAt(r, line, q); err != nil {
			return w, err
		}
		if _, _, err := logframe.ParseLine(nil, line); err == nil {
			end = size
		} else {
			bad = Gap{From: q, Bytes: size - q}
		}
	}
	w.EndOffset = end + bad.Bytes
	w.Truncated = w.EndOffset < size

	bb := newBackBuf(r, end, max(req.MaxBytes, logframe.MaxLine)+1)
	minStart := end - int64(req.MaxBytes)
	var scratch []byte
	found, seenLast := 0, false
	startOff, startSkip := end, 0 // the line start found so far
	first := int64(-1)            // the earliest frame read
	lineEnd := end
	for lineEnd > 0 && found < req.TailLines {
		nl, err := bb.lastNL(lineEnd - 1)
		if err != nil {
			return w, err
		}
		ls := nl + 1
		if nl < 0 && bb.base > 0 {
			if first < 0 {
				return w, fmt.Errorf("logread: frame line ending at offset %d is longer than %d bytes: %w", lineEnd, logframe.MaxLine, logframe.ErrMalformed)
			}
			break
		}
		if ls < minStart && first >= 0 {
			break // the last frame is always read, even if longer than the budget
		}
		_, p, err := logframe.ParseLine(scratch[:0], bb.slice(ls, lineEnd))
		if err != nil {
			return w, fmt.Errorf("logread: frame at offset %d: %w", ls, err)
		}
		scratch, first = p, ls
		hi := len(p)
		if !seenLast {
			seenLast = true
			if p[hi-1] == '\n' {
				hi-- // it ends the last line; it does not start one
			}
		}
		for found < req.TailLines {
			i := bytes.LastIndexByte(p[:hi], '\n')
			if i < 0 {
				break
			}
			found++
			if i+1 == len(p) {
				startOff, startSkip = lineEnd, 0
			} else {
				startOff, startSkip = ls, i+1
			}
			hi = i
		}
		lineEnd = ls
	}
	switch {
	case found == req.TailLines:
	case lineEnd == 0:
		startOff, startSkip = 0, 0 // the log holds fewer lines
	case found == 0 && first >= 0:
		startOff, startSkip = first, 0 // a line longer than the budget: its end
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
