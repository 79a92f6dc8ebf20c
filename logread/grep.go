package logread

import (
	"bytes"
	"io"
	"slices"
	"unicode/utf8"

	"github.com/agent-box/agent-box/logframe"
)

// GrepScanLimit bounds the log bytes one grep request scans: it starts no
// window GrepScanLimit bytes or more past its first byte, so that a request
// on a huge log answers in bounded time; it is then Truncated, and a call
// from its EndOffset scans on.
const GrepScanLimit = 64 << 20

// grepScan accumulates the matches of a grep request's windows.
type grepScan struct {
	req   Request
	w     *Window
	start int64 // the request's first byte (w.Offset)
	total int   // what the matches count against MaxBytes
	lossy []bool
}

// cost is what a matching line counts against MaxBytes: its text and its
// newline, so that the matches of one answer, however short, are bounded.
func cost(text string, newline bool) int {
	if newline {
		return len(text) + 1
	}
	return len(text)
}

// add appends a match.
func (g *grepScan) add(m Match, c int, lossy bool) {
	g.w.Matches = append(g.w.Matches, m)
	g.lossy = append(g.lossy, lossy)
	g.total += c
}

// fits reports whether a match of cost c may join the answer: the matches
// stay within MaxBytes, or there are none yet (the answer must progress).
func (g *grepScan) fits(c int) bool {
	return g.total+c <= g.req.MaxBytes || len(g.w.Matches) == 0
}

// cutAt ends the answer at end, a line start: the matches from end on are
// left for the next call.
func (g *grepScan) cutAt(end int64) {
	k := len(g.w.Matches)
	for k > 0 && g.w.Matches[k-1].Offset >= end {
		k--
	}
	g.w.Matches, g.lossy = g.w.Matches[:k], g.lossy[:k]
	g.w.EndOffset = end
}

func (g *grepScan) finish() {
	g.w.Lossy = slices.Contains(g.lossy, true)
}

// scanning reports whether the scan goes on with a window at pos.
func (g *grepScan) scanning(pos, size int64) bool {
	return pos < size && pos-g.start < GrepScanLimit
}

// textLine copies a matching line out of the window's buffer, which the
// next window reuses, as valid UTF-8 text.
func textLine(p []byte) (string, bool) {
	if utf8.Valid(p) {
		return string(p), false
	}
	return toText(p) // a new buffer
}

// grepText fills w with the matching lines of a combined log, or of a
// framed log's raw frame lines, window after window from w.Offset.
func grepText(r io.ReaderAt, size int64, req Request, w *Window) error {
	g := grepScan{req: req, w: w, start: w.Offset}
	defer g.finish()
	// One buffer for every window, with room for fitRunes to complete a
	// character: the matches are copied out of it.
	mem := make([]byte, 0, req.MaxBytes+utf8.UTFMax)
	for pos := w.Offset; g.scanning(pos, size); {
		buf, err := textWindow(r, pos, size, req, mem)
		if err != nil {
			return err
		}
		if len(buf) == 0 {
			return nil // nothing complete yet: the writer is inside the last line
		}
		mem = buf[:0]
		for a := 0; a < len(buf); {
			e, next := len(buf), len(buf)
			if i := bytes.IndexByte(buf[a:], '\n'); i >= 0 {
				e, next = a+i, a+i+1
			}
			if !req.Grep.Match(buf[a:e]) {
				w.Skipped = addGap(w.Skipped, pos+int64(a), int64(next-a))
				a = next
				continue
			}
			text, lossy := textLine(buf[a:e])
			c := cost(text, next > e)
			if !g.fits(c) {
				g.cutAt(pos + int64(a))
				return nil
			}
			g.add(Match{Offset: pos + int64(a), Line: text}, c, lossy)
			a = next
		}
		pos += int64(len(buf))
		w.EndOffset = pos
	}
	return nil
}

// textWindow reads the window of a grep at pos: complete lines, so that a
// line cut by the window's end is matched whole by the next window.
//
// While the log can grow, its unterminated last line is being written:
// when the window reaches the end of the log, it ends before that line,
// even if that leaves it empty, since matching the part written so far
// would consume the line for good. A window cut by MaxBytes with no line
// end in it holds part of a line longer than the window: it is matched in
// parts, cut at a character boundary, so that the scan progresses.
// Frame lines (raw) are whole lines of at most logframe.MaxLine bytes.
func textWindow(r io.ReaderAt, pos, size int64, req Request, mem []byte) ([]byte, error) {
	if req.Framed {
		buf, partial, err := frameWindow(r, pos, size, req.MaxBytes, mem)
		if err != nil || req.Final {
			return buf, err
		}
		return buf[:len(buf)-partial], nil
	}
	end := min(size, pos+int64(req.MaxBytes))
	buf := mem[:end-pos]
	if err := readAt(r, buf, pos); err != nil {
		return nil, err
	}
	switch i := bytes.LastIndexByte(buf, '\n'); {
	case end == size && req.Final:
		return buf, nil // the last line is complete: nothing more will be written
	case i >= 0:
		return buf[:i+1], nil
	case end == size:
		return buf[:0], nil // the unterminated last line of a growing log
	}
	return fitRunes(r, buf, pos, size, req.Final)
}

// grepFramed fills w with the matching lines of a framed log, window after
// window from w.Offset. Lines are lines of each stream's decoded output: a
// stdout line continues across stderr frames.
//
// A window ends at the last frame boundary where both streams end with a
// newline (a line boundary), so that a line is matched whole in one window.
// When the window reaches the end of a growing log, it ends there even if
// that leaves it empty: a stream's unterminated last line is still being
// written, and the frames after its start, of either stream, wait with it.
// A window cut by MaxBytes with no line boundary keeps its frames, and the
// lines' parts are matched separately; it ends where neither stream is
// inside a character, as a text window does (windowFramed).
//
// Gaps are whole frames, because a frame boundary is the only place a framed
// read can resume: a frame holding any part of a matching line counts as
// returned.
func grepFramed(r io.ReaderAt, size int64, req Request, w *Window) error {
	g := grepScan{req: req, w: w, start: w.Offset}
	defer g.finish()
	for pos := w.Offset; g.scanning(pos, size); {
		end, done, err := g.framedWindow(r, pos, size)
		if err != nil || done || end == pos {
			return err
		}
		pos = end
	}
	return nil
}

// framedWindow greps the window at pos, a frame boundary, and returns where
// it ends, and done when the matches are full.
func (g *grepScan) framedWindow(r io.ReaderAt, pos, size int64) (end int64, done bool, err error) {
	buf, to, release, err := framesAt(r, pos, size, g.req)
	if err != nil {
		return 0, false, err
	}
	defer release()
	o := decodeOpts{base: pos, frames: true, growing: to == reachGrowing}
	if to != reachFinal {
		o.hold = holdLines
	}
	d, err := decodeFrames(buf, o)
	if err != nil {
		return 0, false, err
	}
	if end, done := g.match(d, pos); done {
		return end, true, nil
	}
	w := g.w
	w.EndOffset = d.end
	if d.badTail > 0 {
		w.Skipped = addGap(w.Skipped, d.end, int64(d.badTail))
		w.EndOffset = d.end + int64(d.badTail)
	}
	return w.EndOffset, false, nil
}

// frameHit is a matching line of one stream of a framed window.
type frameHit struct {
	m           Match
	cost        int
	lossy       bool
	first, last int // the stream's frames holding the line, as indices into its idx
}

// match finds the matching lines of each stream of the window d at pos,
// each with the frames holding it, and the window's line boundaries, and
// takes the lines into the answer, returning take's end and done. A hit's
// Offset is its first frame's, and all its frames count as returned, not
// skipped. idx, hits and bounds are made here, where they do not escape,
// rather than returned by helpers: the compiler then keeps small ones on
// the stack (returned, they cost allocations per window with matches).
func (g *grepScan) match(d *decoded, pos int64) (end int64, done bool) {
	var idx [3][]int // per stream: the indices into d.frames of its frames
	for i, f := range d.frames {
		idx[f.stream] = append(idx[f.stream], i)
	}
	re := g.req.Grep
	var hits [3][]frameHit
	for _, s := range []logframe.Stream{logframe.Stdout, logframe.Stderr} {
		b, fl, fi := *d.buf(s), idx[s], 0
		for a := 0; a < len(b); {
			e, next := len(b), len(b)
			if i := bytes.IndexByte(b[a:], '\n'); i >= 0 {
				e, next = a+i, a+i+1
			}
			if re.Match(b[a:e]) {
				for d.frames[fl[fi]].end <= a {
					fi++
				}
				fj := fi
				for d.frames[fl[fj]].end < next {
					fj++
				}
				text, lossy := textLine(b[a:e])
				m := Match{Offset: d.frames[fl[fi]].off, Stream: s.Name(), Line: text}
				hits[s] = append(hits[s], frameHit{m, cost(text, next > e), lossy, fi, fj})
			}
			a = next
		}
	}

	// The line boundaries of the window: its start, and each frame end
	// where both streams (as decoded from the start) end with a newline.
	bounds := []int64{pos}
	atLine := [3]bool{true, true, true}
	for _, f := range d.frames {
		b := *d.buf(f.stream)
		atLine[f.stream] = f.end == 0 || b[f.end-1] == '\n'
		if atLine[logframe.Stdout] && atLine[logframe.Stderr] {
			bounds = append(bounds, f.off+int64(f.len))
		}
	}
	return g.take(d, hits, idx, bounds)
}

// take adds the hits of both streams to the answer in log order, and the
// frames that hold none of them to its gaps. When the next hit does not
// fit, it ends the answer at the last of bounds at or before that hit's
// frame, so that no line of either stream is cut, and returns that end and
// done: the matches from there on are for the next call. Before the first
// bound past the request's start no such end makes progress, and the
// lines are taken even past MaxBytes. Otherwise it returns d.end.
func (g *grepScan) take(d *decoded, hits [3][]frameHit, idx [3][]int, bounds []int64) (end int64, done bool) {
	covered := make([]bool, len(d.frames))
	ho, he := hits[logframe.Stdout], hits[logframe.Stderr]
	for len(ho) > 0 || len(he) > 0 {
		s := logframe.Stdout
		if len(ho) == 0 || (len(he) > 0 && he[0].m.Offset < ho[0].m.Offset) {
			s = logframe.Stderr
		}
		h := &hits[s][0]
		if !g.fits(h.cost) {
			if b := bounds[searchLE(bounds, h.m.Offset)]; b > g.start {
				g.cutAt(b)
				g.gaps(d, covered, b)
				return b, true
			}
		}
		g.add(h.m, h.cost, h.lossy)
		for k := h.first; k <= h.last; k++ {
			covered[idx[s][k]] = true
		}
		hits[s] = hits[s][1:]
		ho, he = hits[logframe.Stdout], hits[logframe.Stderr]
	}
	g.gaps(d, covered, d.end)
	return d.end, false
}

// gaps adds the frames of d before end that hold no part of a returned
// match to w.Skipped.
func (g *grepScan) gaps(d *decoded, covered []bool, end int64) {
	for i, f := range d.frames {
		if f.off >= end {
			break
		}
		if !covered[i] {
			g.w.Skipped = addGap(g.w.Skipped, f.off, int64(f.len))
		}
	}
}

// searchLE returns the index of the last element of the sorted s that is at
// most v; s[0] <= v.
func searchLE(s []int64, v int64) int {
	i, found := slices.BinarySearch(s, v)
	if found {
		return i
	}
	return i - 1
}
