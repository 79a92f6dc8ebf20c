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

	// Context. held are the lines since the last one returned, at most
	// req.Context, which a match would return before it (combined logs;
	// framed logs hold theirs per window: framedCtx); after counts the
	// lines still to return after the last match, per stream.
	held  []heldLine
	after [3]int
	// owing, per stream, that the lines after count down a match before
	// the request's Offset: they are marked Continues.
	owing [3]bool
	// cont, per stream, that the window starts inside a line (the part
	// before was in an earlier window); cutEnd that a combined window's
	// last line goes on past it. Such lines are Parts.
	cont   [3]bool
	cutEnd bool
	// prevEnd is where the last returned line of a combined log ends;
	// joined, per stream of a framed log, that the last line was returned.
	prevEnd int64
	joined  [3]bool
}

// heldLine is a line of a combined log that may yet be returned as the
// context before a match: where it is, and, once its window is gone, its
// text.
type heldLine struct {
	off, span int64 // log offset, and bytes with its newline
	a, e      int   // its bytes in the current window's buffer, until kept
	kept      bool
	part      bool
	m         Match
	cost      int
	lossy     bool
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

// addLine appends a returned line of a combined log that spans span log
// bytes, saying whether it starts a group.
func (g *grepScan) addLine(m Match, c int, lossy bool, span int64) {
	m.Group = g.req.Context > 0 && m.Offset != g.prevEnd
	g.prevEnd = m.Offset + span
	g.add(m, c, lossy)
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

// line is the Match of the line p (without its newline) at off, cut to
// req.LineMax bytes of text at a character boundary, and what it costs.
func (g *grepScan) line(p []byte, newline bool, off int64) (m Match, c int, lossy bool) {
	limit := g.req.LineMax
	if limit <= 0 || len(p) <= limit {
		text, lossy := textLine(p)
		if limit <= 0 || len(text) <= limit {
			return Match{Offset: off, Line: text}, cost(text, newline), lossy
		}
	}
	// Only what is kept is copied: the line may be a megabyte. The cut
	// goes back to the start of the character it falls in (a character
	// longer than limit leaves nothing), not into it, which would read as
	// invalid bytes.
	k := min(len(p), limit)
	for i := k; i >= max(0, k-utf8.UTFMax+1); i-- {
		if i == len(p) || utf8.RuneStart(p[i]) {
			k = i
			break
		}
	}
	text, lossy := textLine(p[:k])
	if len(text) > limit { // invalid bytes grew into U+FFFD
		text = text[:runeStartBefore(text, limit)]
	}
	return Match{Offset: off, Line: text, Bytes: len(p)}, cost(text, newline), lossy
}

// runeStartBefore is the last character boundary of s at or before i.
func runeStartBefore(s string, i int) int {
	for i > 0 && i < len(s) && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

// grepText fills w with the matching lines of a combined log, or of a
// framed log's raw frame lines, window after window from w.Offset.
func grepText(r io.ReaderAt, size int64, req Request, w *Window) error {
	g := grepScan{req: req, w: w, start: w.Offset, prevEnd: -1}
	defer g.finish()
	// One buffer for every window, with room for fitRunes to complete a
	// character: the matches are copied out of it.
	mem := make([]byte, 0, req.MaxBytes+utf8.UTFMax)
	owed, err := owedContext(r, w.Offset, req, mem)
	if err != nil {
		return err
	}
	g.after[0], g.owing[0] = owed, owed > 0
	if g.cont[0], err = midLine(r, w.Offset); err != nil {
		return err
	}
	for pos := w.Offset; g.scanning(pos, size); {
		buf, err := textWindow(r, pos, size, req, mem)
		if err != nil {
			return err
		}
		if len(buf) == 0 {
			break // nothing complete yet: the writer is inside the last line
		}
		mem = buf[:0]
		g.cutEnd = buf[len(buf)-1] != '\n' && !(req.Final && pos+int64(len(buf)) == size)
		for a := 0; a < len(buf); {
			e, next := len(buf), len(buf)
			if i := bytes.IndexByte(buf[a:], '\n'); i >= 0 {
				e, next = a+i, a+i+1
			}
			if g.textLine(buf, a, e, next, pos) {
				return nil
			}
			a = next
		}
		g.keep(buf)
		g.cont[0] = buf[len(buf)-1] != '\n'
		pos += int64(len(buf))
		w.EndOffset = pos
	}
	if len(g.held) > 0 && (!req.Final || w.EndOffset < size) {
		// A match may yet follow the held lines: the next call, from the
		// first of them, returns them before it.
		g.cutAt(g.held[0].off)
		return nil
	}
	g.release(len(g.held))
	return nil
}

// midLine reports whether off is inside a line of a combined log: the part
// of the line before it was in an earlier answer.
func midLine(r io.ReaderAt, off int64) (bool, error) {
	if off == 0 {
		return false, nil
	}
	var b [1]byte
	err := readAt(r, b[:], off-1)
	return err == nil && b[0] != '\n', err
}

// owedContext is how many lines from off on are the context after a match
// before off: an answer that ended after a match (at the end of a growing
// log, or at GrepScanLimit) owes them. It reads back the req.Context lines
// before off, each at most MaxBytes, for the nearest match.
func owedContext(r io.ReaderAt, off int64, req Request, mem []byte) (int, error) {
	if req.Context == 0 || off == 0 {
		return 0, nil
	}
	var b [1]byte
	if err := readAt(r, b[:], off-1); err != nil || b[0] != '\n' {
		return 0, err // not a line start: a line's part, or an offset given
	}
	end := off - 1 // the newline ending the line before off
	for k := 1; k <= req.Context && end >= 0; k++ {
		nl, err := prevNL(r, end, max(0, end-int64(req.MaxBytes)))
		if err != nil {
			return 0, err
		}
		if nl < 0 && end > int64(req.MaxBytes) {
			return 0, nil // longer than a window: it was matched in parts
		}
		line := mem[:end-(nl+1)]
		if err := readAt(r, line, nl+1); err != nil {
			return 0, err
		}
		if req.Grep.Match(line) {
			return req.Context - k + 1, nil
		}
		end = nl
	}
	return 0, nil
}

// owedFramed is, per stream, how many lines from off (a frame boundary) on
// are the context after a match before off, as owedContext is for a
// combined log, and whether off is inside a line (mid). It decodes the
// frames before off, from a block that doubles up to MaxBytes, until each
// stream's last Context lines are known whole (a stream with no frame in
// MaxBytes before off owes none, and is taken to be at a line start).
func owedFramed(r io.ReaderAt, off int64, req Request) (owed [3]int, mid [3]bool, err error) {
	if off == 0 {
		return owed, mid, nil
	}
	for n := min(int64(firstBlock), int64(req.MaxBytes)); ; n = min(2*n, int64(req.MaxBytes)) {
		from := max(0, off-n)
		if from > 0 {
			var err error
			if from, err = alignFrame(r, from, off); err != nil {
				return owed, mid, err
			}
		}
		buf := make([]byte, off-from)
		if err := readAt(r, buf, from); err != nil {
			return owed, mid, err
		}
		d, err := decodeFrames(buf, decodeOpts{base: from})
		if err != nil {
			return owed, mid, err
		}
		known := true
		for _, s := range []logframe.Stream{logframe.Stdout, logframe.Stderr} {
			b := *d.buf(s)
			k, ok := owedLines(b, from == 0, req)
			owed[s], known = k, known && ok
			mid[s] = len(b) > 0 && b[len(b)-1] != '\n'
		}
		if known || n >= int64(req.MaxBytes) || from == 0 {
			return owed, mid, nil
		}
	}
}

// owedLines is how many lines after b, a stream's output before a call's
// offset, are the context after a match in its last req.Context lines, and
// whether that is known: a line that reaches b's start may have begun
// before it, unless b is the stream's whole output (whole).
func owedLines(b []byte, whole bool, req Request) (int, bool) {
	switch {
	case len(b) == 0:
		return 0, whole || req.Context == 0
	case b[len(b)-1] != '\n':
		return 0, true // not a line start: a line's part
	}
	end := len(b) - 1
	for k := 1; k <= req.Context; k++ {
		nl := bytes.LastIndexByte(b[:end], '\n')
		if nl < 0 && !whole {
			return 0, false
		}
		if req.Grep.Match(b[nl+1 : end]) {
			return req.Context - k + 1, true
		}
		if nl < 0 {
			break
		}
		end = nl
	}
	return 0, true
}

// textLine takes the line buf[a:e] (next past its newline) of the window
// at pos into the answer, its gaps or the held lines, and reports whether
// the answer is full: it then ends before the line (or the lines held
// before it), which are left for the next call.
func (g *grepScan) textLine(buf []byte, a, e, next int, pos int64) (full bool) {
	off, span := pos+int64(a), int64(next-a)
	part := (a == 0 && g.cont[0]) || (next == e && g.cutEnd)
	if !g.req.Grep.Match(buf[a:e]) {
		switch {
		case g.after[0] > 0:
			// After-context completes its group whatever the bound
			// (at most Context lines), so that no call cuts it off.
			g.after[0]--
			m, c, lossy := g.line(buf[a:e], next > e, off)
			m.Context, m.Continues, m.Part = true, g.owing[0], part
			g.addLine(m, c, lossy, span)
		case g.req.Context > 0:
			if len(g.held) == g.req.Context {
				g.release(1)
			}
			g.held = append(g.held, heldLine{off: off, span: span, a: a, e: e, part: part})
		default:
			g.w.Skipped = addGap(g.w.Skipped, off, span)
		}
		return false
	}
	m, c, lossy := g.line(buf[a:e], next > e, off)
	m.Part = part
	need := c
	for i := range g.held {
		g.keepLine(&g.held[i], buf)
		need += g.held[i].cost
	}
	if !g.fits(need) {
		if len(g.held) > 0 {
			off = g.held[0].off
		}
		g.cutAt(off)
		return true
	}
	for _, h := range g.held {
		g.addLine(h.m, h.cost, h.lossy, h.span)
	}
	g.held = g.held[:0]
	g.addLine(m, c, lossy, span)
	g.after[0], g.owing[0] = g.req.Context, false
	return false
}

// keepLine copies the held line h out of the window buf, once.
func (g *grepScan) keepLine(h *heldLine, buf []byte) {
	if h.kept {
		return
	}
	newline := h.span > int64(h.e-h.a)
	h.m, h.cost, h.lossy = g.line(buf[h.a:h.e], newline, h.off)
	h.m.Context, h.m.Part = true, h.part
	h.kept = true
}

// keep copies the held lines out of the window buf before the next
// window reuses it.
func (g *grepScan) keep(buf []byte) {
	for i := range g.held {
		g.keepLine(&g.held[i], buf)
	}
}

// release turns the first n held lines into gaps: no match follows them
// closely enough.
func (g *grepScan) release(n int) {
	for _, h := range g.held[:n] {
		g.w.Skipped = addGap(g.w.Skipped, h.off, h.span)
	}
	g.held = append(g.held[:0], g.held[n:]...)
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
	owed, mid, err := owedFramed(r, w.Offset, req)
	if err != nil {
		return err
	}
	g.after, g.cont = owed, mid
	for i, n := range owed {
		g.owing[i] = n > 0
	}
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
	g.cutEnd = to != reachFinal
	if end, done := g.match(d, pos, to == reachGrowing); done {
		return end, true, nil
	}
	for _, s := range []logframe.Stream{logframe.Stdout, logframe.Stderr} {
		if b := *d.buf(s); len(b) > 0 {
			g.cont[s] = b[len(b)-1] != '\n'
		}
	}
	w := g.w
	w.EndOffset = d.end
	if d.badTail > 0 {
		w.Skipped = addGap(w.Skipped, d.end, int64(d.badTail))
		w.EndOffset = d.end + int64(d.badTail)
	}
	return w.EndOffset, false, nil
}

// frameHit is a returned line of one stream of a framed window.
type frameHit struct {
	m           Match
	cost        int
	lossy       bool
	first, last int // the stream's frames holding the line, as indices into its idx
	// need is what must fit for the line to be taken: a match's cost and
	// that of its context before it, counted from this line on; -1 for
	// after-context, which completes its group whatever the bound.
	need int
	// a, e: the line in its stream's buffer, nl: with a newline; its text
	// is made (fill) only once it is returned.
	a, e int
	nl   bool
}

// fill makes the text of h, a line of the stream buffer b.
func (g *grepScan) fill(h *frameHit, b []byte) {
	m, c, lossy := g.line(b[h.a:h.e], h.nl, h.m.Offset)
	m.Stream, m.Context, m.Group, m.Continues, m.Part = h.m.Stream, h.m.Context, h.m.Group, h.m.Continues, h.m.Part
	h.m, h.cost, h.lossy = m, c, lossy
}

// match finds the matching lines of each stream of the window d at pos,
// each with the frames holding it, and the window's line boundaries, and
// takes the lines into the answer, returning take's end and done. A hit's
// Offset is its first frame's, and all its frames count as returned, not
// skipped. idx, hits and bounds are made here, where they do not escape,
// rather than returned by helpers: the compiler then keeps small ones on
// the stack (returned, they cost allocations per window with matches).
func (g *grepScan) match(d *decoded, pos int64, growing bool) (end int64, done bool) {
	var idx [3][]int // per stream: the indices into d.frames of its frames
	for i, f := range d.frames {
		idx[f.stream] = append(idx[f.stream], i)
	}
	var hits [3][]frameHit
	var held []frameHit   // a stream's lines before a match, with Context
	heldFrom := int64(-1) // the first frame of a growing log's held lines
	for _, s := range []logframe.Stream{logframe.Stdout, logframe.Stderr} {
		if len(held) > 0 && growing {
			heldFrom = held[0].m.Offset
		}
		b, fl, fi := *d.buf(s), idx[s], 0
		held = held[:0]
		for a := 0; a < len(b); {
			e, next := len(b), len(b)
			if i := bytes.IndexByte(b[a:], '\n'); i >= 0 {
				e, next = a+i, a+i+1
			}
			hit := g.req.Grep.Match(b[a:e])
			if !hit && g.req.Context == 0 {
				a = next
				continue
			}
			for d.frames[fl[fi]].end <= a {
				fi++
			}
			fj := fi
			for d.frames[fl[fj]].end < next {
				fj++
			}
			part := (a == 0 && g.cont[s]) || (next == e && g.cutEnd)
			h := frameHit{m: Match{Offset: d.frames[fl[fi]].off, Stream: s.Name(), Part: part}, first: fi, last: fj, a: a, e: e, nl: next > e}
			hits[s], held = g.frameContext(s, b, h, hit, hits[s], held)
			a = next
		}
	}

	if len(held) > 0 && growing && (heldFrom < 0 || held[0].m.Offset < heldFrom) {
		heldFrom = held[0].m.Offset
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
	return g.take(d, hits, idx, bounds, heldFrom)
}

// frameContext decides what becomes of the line h of stream s (buffer b), a match
// when hit: it joins the stream's hits (with the lines held before it, if
// a match), or, with Context, it is held as a possible line before a
// match. The held lines are the window's own: a match's context before it
// does not reach back past its window's start, whose frames are counted
// already (as gaps, or returned).
func (g *grepScan) frameContext(s logframe.Stream, b []byte, h frameHit, hit bool, hits, held []frameHit) ([]frameHit, []frameHit) {
	switch {
	case hit:
		g.fill(&h, b)
		h.need = h.cost
		need := h.cost
		for i := len(held) - 1; i >= 0; i-- {
			g.fill(&held[i], b)
			need += held[i].cost
			held[i].need = need
		}
		h.m.Group = g.req.Context > 0 && len(held) == 0 && !g.joined[s]
		hits = append(append(hits, held...), h)
		held = held[:0]
		g.after[s], g.joined[s], g.owing[s] = g.req.Context, true, false
	case g.after[s] > 0:
		h.m.Context, h.m.Continues, h.need = true, g.owing[s], -1
		h.m.Group = !g.joined[s] // only the first line a call owes
		g.joined[s] = true
		g.fill(&h, b)
		hits = append(hits, h)
		g.after[s]--
	default:
		if len(held) == g.req.Context {
			held = append(held[:0], held[1:]...)
			if len(held) > 0 {
				held[0].m.Group = true // the line before it is not held
			}
		}
		h.m.Context, h.m.Group = true, len(held) == 0 && !g.joined[s]
		held = append(held, h)
		g.joined[s] = false
	}
	return hits, held
}

// take adds the hits of both streams to the answer in log order, and the
// frames that hold none of them to its gaps. When the next hit does not
// fit, it ends the answer at the last of bounds at or before that hit's
// frame, so that no line of either stream is cut, and returns that end and
// done: the matches from there on are for the next call. Before the first
// bound past the request's start no such end makes progress, and the
// lines are taken even past MaxBytes. Otherwise it returns d.end.
func (g *grepScan) take(d *decoded, hits [3][]frameHit, idx [3][]int, bounds []int64, heldFrom int64) (end int64, done bool) {
	covered := make([]bool, len(d.frames))
	ho, he := hits[logframe.Stdout], hits[logframe.Stderr]
	for len(ho) > 0 || len(he) > 0 {
		s := logframe.Stdout
		if len(ho) == 0 || (len(he) > 0 && he[0].m.Offset < ho[0].m.Offset) {
			s = logframe.Stderr
		}
		h := &hits[s][0]
		if h.need >= 0 && !g.fits(h.need) {
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
	if heldFrom >= 0 {
		// A growing log's last lines may come before a match yet to be
		// written: end before them, as a combined log does, unless that
		// would drop what the answer holds past them.
		b := bounds[searchLE(bounds, heldFrom)]
		if n := len(g.w.Matches); n == 0 || g.w.Matches[n-1].Offset < b {
			g.gaps(d, covered, b)
			g.w.EndOffset = b
			return b, true
		}
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
