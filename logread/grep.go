package logread

import (
	"bytes"
	"io"
	"unicode/utf8"

	"github.com/agent-box/agent-box/logframe"
)

// grepText fills w with the matching lines of a combined log's window, or of
// a framed log's raw frame lines.
func grepText(r io.ReaderAt, size int64, req Request, w *Window) error {
	start := w.Offset
	var buf []byte
	if req.Framed {
		b, partial, err := frameWindow(r, start, size, req.MaxBytes, nil)
		if err != nil {
			return err
		}
		if !req.Final {
			b = b[:len(b)-partial]
		}
		buf = b
	} else {
		end := min(size, start+int64(req.MaxBytes))
		buf = make([]byte, end-start, end-start+utf8.UTFMax)
		if err := readAt(r, buf, start); err != nil {
			return err
		}
		switch i := bytes.LastIndexByte(buf, '\n'); {
		case end == size && req.Final:
			// the last line is complete: nothing more will be written
		case i >= 0:
			buf = buf[:i+1] // the cut line is matched whole by the next window
		default:
			// One line longer than the window, or the unterminated last line
			// of a growing log: match the part in the window, so that the
			// window is never empty, cut at a character boundary.
			var err error
			if buf, err = fitRunes(r, buf, start, size, req.Final); err != nil {
				return err
			}
		}
	}
	w.EndOffset = start + int64(len(buf))
	total := 0
	for a := 0; a < len(buf); {
		e, next := len(buf), len(buf)
		if i := bytes.IndexByte(buf[a:], '\n'); i >= 0 {
			e, next = a+i, a+i+1
		}
		if !req.Grep.Match(buf[a:e]) {
			w.Skipped = addGap(w.Skipped, start+int64(a), int64(next-a))
			a = next
			continue
		}
		text, lossy := toText(buf[a:e])
		if total+len(text) > req.MaxBytes && len(w.Matches) > 0 {
			// Only replaced bytes can make the text longer than the window;
			// the rest is for the next call.
			w.EndOffset = start + int64(a)
			break
		}
		total += len(text)
		w.Lossy = w.Lossy || lossy
		w.Matches = append(w.Matches, Match{Offset: start + int64(a), Line: text})
		a = next
	}
	return nil
}

// grepFramed fills w with the matching lines of a framed log's window. Lines
// are lines of each stream's decoded output: a stdout line continues across
// stderr frames. The window ends at the last frame boundary where both
// streams end with a newline, so that a line is matched whole in one window;
// with no such boundary after the window's start (a line longer than the
// window, or an unterminated last line of a growing log), the line's parts
// are matched separately, and the window ends where neither stream is inside
// a character, as a text window does (windowFramed).
//
// Gaps are whole frames, because a frame boundary is the only place a framed
// read can resume: a frame holding any part of a matching line counts as
// returned.
func grepFramed(r io.ReaderAt, size int64, req Request, w *Window) error {
	buf, to, release, err := framesAt(r, w.Offset, size, req)
	if err != nil {
		return err
	}
	defer release()
	o := decodeOpts{base: w.Offset, frames: true, growing: to == reachGrowing}
	if to != reachFinal {
		o.hold = holdLines
	}
	d, err := decodeFrames(buf, o)
	if err != nil {
		return err
	}
	w.EndOffset = d.end

	type hit struct {
		m           Match
		first, last int // the stream's frames holding the line, as indices into idx
	}
	var idx [3][]int // per stream: indices into d.frames
	for i, f := range d.frames {
		idx[f.stream] = append(idx[f.stream], i)
	}
	var hits [3][]hit
	for _, s := range []logframe.Stream{logframe.Stdout, logframe.Stderr} {
		b, fl, fi := *d.buf(s), idx[s], 0
		for a := 0; a < len(b); {
			e, next := len(b), len(b)
			if i := bytes.IndexByte(b[a:], '\n'); i >= 0 {
				e, next = a+i, a+i+1
			}
			if req.Grep.Match(b[a:e]) {
				for d.frames[fl[fi]].end <= a {
					fi++
				}
				fj := fi
				for d.frames[fl[fj]].end < next {
					fj++
				}
				text, lossy := toText(b[a:e])
				w.Lossy = w.Lossy || lossy
				m := Match{Offset: d.frames[fl[fi]].off, Stream: s.Name(), Line: text}
				hits[s] = append(hits[s], hit{m, fi, fj})
			}
			a = next
		}
	}

	covered := make([]bool, len(d.frames))
	total, truncated := 0, false
	ho, he := hits[logframe.Stdout], hits[logframe.Stderr]
	for len(ho) > 0 || len(he) > 0 {
		s := logframe.Stdout
		if len(ho) == 0 || (len(he) > 0 && he[0].m.Offset < ho[0].m.Offset) {
			s = logframe.Stderr
		}
		h := &hits[s][0]
		if total+len(h.m.Line) > req.MaxBytes && h.m.Offset > w.Offset {
			// Several frames decode to less than MaxBytes, so only replaced
			// bytes get here; the lines of the first frame, which may be
			// longer than MaxBytes alone, are always returned, or the window
			// would make no progress.
			w.EndOffset, truncated = h.m.Offset, true
			break
		}
		total += len(h.m.Line)
		w.Matches = append(w.Matches, h.m)
		for k := h.first; k <= h.last; k++ {
			covered[idx[s][k]] = true
		}
		hits[s] = hits[s][1:]
		ho, he = hits[logframe.Stdout], hits[logframe.Stderr]
	}
	for i, f := range d.frames {
		if f.off >= w.EndOffset {
			break
		}
		if !covered[i] {
			w.Skipped = addGap(w.Skipped, f.off, int64(f.len))
		}
	}
	if d.badTail > 0 && !truncated {
		w.Skipped = addGap(w.Skipped, d.end, int64(d.badTail))
		w.EndOffset = d.end + int64(d.badTail)
	}
	return nil
}
