package logread

import (
	"bytes"
	"fmt"
	"io"
	"unsafe"

	"github.com/agent-box/agent-box/logframe"
)

// hold says at which frame boundaries a decoded window may end.
type hold int

const (
	holdNone  hold = iota
	holdRunes      // where both streams end with a whole UTF-8 sequence
	holdLines      // where both streams end with a newline (or are empty); else as holdRunes, unless growing
)

// chunkRef is a run of adjacent frames of one stream: bytes [start, end) of
// that stream's decoded buffer.
type chunkRef struct {
	stream     logframe.Stream
	start, end int
}

// frameRef is one decoded frame, kept only for grep, which maps lines back
// to the frames holding them.
type frameRef struct {
	off        int64
	len        int
	stream     logframe.Stream
	start, end int // payload range in the stream's buffer
}

type decoded struct {
	out, errb []byte // stdout and stderr payloads, in log order
	chunks    []chunkRef
	frames    []frameRef
	end       int64 // log offset just past the last frame kept
	badTail   int   // bytes of an undecodable last line without newline, left out
}

func (d *decoded) buf(s logframe.Stream) *[]byte {
	if s == logframe.Stderr {
		return &d.errb
	}
	return &d.out
}

type decodeOpts struct {
	base int64 // log offset of buf[0], a frame boundary
	skip int   // payload bytes of the first frame to drop (tail_lines)
	hold hold
	// growing says buf reaches the end of a log that can still grow, so
	// that a stream ending inside a character there is one a writer is
	// still writing: the window then ends before it even if that leaves
	// no frame.
	growing bool
	frames  bool
}

// decodeFrames decodes the frame lines of buf. Every line but the last ends
// with a newline; a last line without one is the log's incomplete last line,
// passed only for a Final log: decoded if it parses (a crash can cut a line
// at a base64 quantum), otherwise left out and counted in badTail, since a
// cut line is damage the reader must report, not a reason to fail.
//
// With a hold mode, the frames after the last boundary that satisfies it
// are dropped again, unless that would leave no frame; holdLines falls back
// to the last boundary where neither stream is inside a character. When the
// frames reach the end of a growing log (o.growing) and a stream ends inside
// a character (holdLines: inside a line), they are dropped back to the last
// boundary where neither is, even if that leaves no frame: the character
// (the line) is still being written.
func decodeFrames(buf []byte, o decodeOpts) (*decoded, error) {
	d := newDecoded(buf, o.base)
	marks := newHoldMarks(o.base)
	off := o.base
	for pos := 0; pos < len(buf); {
		n := bytes.IndexByte(buf[pos:], '\n') + 1
		if n == 0 {
			n = len(buf) - pos
		}
		s, ok, err := d.addFrame(buf[pos:pos+n], off, o)
		if err != nil {
			return nil, err
		}
		if !ok {
			break // the log's cut last line, counted in d.badTail
		}
		off += int64(n)
		pos += n
		if o.hold != holdNone {
			marks.see(d, s, off, o.hold)
		}
	}
	d.end = off
	marks.cut(d, o)
	return d, nil
}

// newDecoded returns an empty decoded window at base, with its stream
// buffers sized from buf's line lengths so that decoding never reallocates:
// a frame line of n bytes carries at most (n-3)/4*3 bytes.
func newDecoded(buf []byte, base int64) *decoded {
	var nOut, nErr int
	for p := buf; len(p) > 0; {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			i = len(p) - 1
		}
		if p[0] == '2' {
			nErr += (i + 1) / 4 * 3
		} else {
			nOut += (i + 1) / 4 * 3
		}
		p = p[i+1:]
	}
	return &decoded{out: make([]byte, 0, nOut), errb: make([]byte, 0, nErr), end: base}
}

// addFrame decodes the frame line at log offset off onto the end of its
// stream's buffer and records its chunk (and, with o.frames, the frame), and
// returns its stream. A line that does not parse is an error, unless it is
// the log's cut last line (no newline): then addFrame counts it in
// d.badTail and returns false, since the caller reports that damage as a
// gap.
func (d *decoded) addFrame(line []byte, off int64, o decodeOpts) (logframe.Stream, bool, error) {
	n := len(line)
	dst := d.buf(logframe.Stdout)
	if line[0] == '2' {
		dst = d.buf(logframe.Stderr)
	}
	p0 := len(*dst)
	s, b, err := logframe.ParseLine(*dst, line)
	if err != nil {
		if line[n-1] != '\n' {
			d.badTail = n
			return s, false, nil
		}
		return s, false, fmt.Errorf("logread: frame at offset %d: %w", off, err)
	}
	*dst = b
	if off == o.base && o.skip > 0 {
		*dst = b[o.skip:] // first frame: p0 == 0
	}
	if k := len(d.chunks) - 1; k >= 0 && d.chunks[k].stream == s {
		d.chunks[k].end = len(*dst)
	} else {
		d.chunks = append(d.chunks, chunkRef{stream: s, start: p0, end: len(*dst)})
	}
	if o.frames {
		d.frames = append(d.frames, frameRef{off: off, len: n, stream: s, start: p0, end: len(*dst)})
	}
	return s, true, nil
}

// holdMarks follows, frame by frame, the last boundaries where a window may
// end under a hold mode: where both streams end with a newline (lineMark)
// and with a whole character (runeMark). At first both are the empty
// window, where every stream ends so.
type holdMarks struct {
	lineMark, runeMark mark
	lines, runes       [3]bool // per stream: whether it ends so, as decoded so far
}

func newHoldMarks(base int64) holdMarks {
	m := mark{end: base}
	all := [3]bool{true, true, true}
	return holdMarks{lineMark: m, runeMark: m, lines: all, runes: all}
}

// see moves the marks to the boundary off, after a frame of stream s, if
// it is one where the hold mode's streams end so.
func (h *holdMarks) see(d *decoded, s logframe.Stream, off int64, mode hold) {
	here := mark{off, len(d.out), len(d.errb), len(d.chunks), d.chunks[len(d.chunks)-1].end, len(d.frames)}
	dst := *d.buf(s)
	h.runes[s] = incompleteTail(dst) == len(dst)
	if h.runes[logframe.Stdout] && h.runes[logframe.Stderr] {
		h.runeMark = here
	}
	if mode == holdLines {
		h.lines[s] = len(dst) == 0 || dst[len(dst)-1] == '\n'
		if h.lines[logframe.Stdout] && h.lines[logframe.Stderr] {
			h.lineMark = here
		}
	}
}

// cut drops d's frames after the mark that o.hold ends the window at,
// unless that would leave no frame and the frames do not reach the end of a
// growing log (see decodeFrames): holdLines falls back to runeMark when no
// line boundary allows a cut.
func (h *holdMarks) cut(d *decoded, o decodeOpts) {
	switch {
	case o.hold == holdLines && h.lineMark.end < d.end && (h.lineMark.end > o.base || o.growing):
		d.restore(h.lineMark)
	case o.hold != holdNone && h.runeMark.end < d.end && (h.runeMark.end > o.base || o.growing):
		d.restore(h.runeMark)
	}
}

// mark is a frame boundary decodeFrames may cut back to: the log offset and
// the decoded lengths there.
type mark struct {
	end                          int64
	nOut, nErr, nChunks, lastEnd int
	nFrames                      int
}

// restore drops the frames decoded after m.
func (d *decoded) restore(m mark) {
	d.end = m.end
	d.out, d.errb = d.out[:m.nOut], d.errb[:m.nErr]
	d.chunks = d.chunks[:m.nChunks]
	if m.nChunks > 0 {
		d.chunks[m.nChunks-1].end = m.lastEnd
	}
	d.frames = d.frames[:m.nFrames]
}

// fill sets the decoded fields of w from d.
//
// Stdout and Stderr are each stream's bytes decoded as one text, so a
// character split across frames of one stream decodes whole. Chunks follow
// the log's interleaving, which can split a character of one stream around
// frames of the other; such a character is moved whole into the chunk that
// holds its last byte, so Content (the chunks' texts concatenated) is as
// lossless as Stdout and Stderr. A character cut by the window's start or
// end is not moved: it is replaced, and Lossy is set.
func (d *decoded) fill(w *Window, exact bool) {
	if exact {
		if len(d.out) > 0 {
			w.StdoutBytes = d.out
		}
		if len(d.errb) > 0 {
			w.StderrBytes = d.errb
		}
		return
	}
	var lossyOut, lossyErr, lossyChunks bool
	w.Stdout, lossyOut = toText(d.out)
	w.Stderr, lossyErr = toText(d.errb)

	prev := [3]int{-1, -1, -1}
	for j := range d.chunks {
		s := d.chunks[j].stream
		if i := prev[s]; i >= 0 {
			c := &d.chunks[i]
			b := *d.buf(s)
			moved := c.end - (c.start + incompleteTail(b[c.start:c.end]))
			c.end -= moved
			d.chunks[j].start -= moved
		}
		prev[s] = j
	}
	if len(d.chunks) == 1 {
		// One stream only: Content is that stream's text, without a copy.
		c := d.chunks[0]
		w.Content, w.Lossy = w.Stdout, lossyOut
		if c.stream == logframe.Stderr {
			w.Content, w.Lossy = w.Stderr, lossyErr
		}
		w.Chunks = []Chunk{{Stream: c.stream.Name(), Text: w.Content}}
		return
	}
	// After the moves, a chunk of a valid stream starts and ends at
	// character boundaries, so it is valid too: only the chunks of a lossy
	// stream need checking, and copying is the only work for the others.
	valid := [3]bool{logframe.Stdout: !lossyOut, logframe.Stderr: !lossyErr}
	content := make([]byte, 0, len(d.out)+len(d.errb))
	type span struct {
		stream     logframe.Stream
		start, end int
	}
	spans := make([]span, 0, len(d.chunks))
	for _, c := range d.chunks {
		if c.start == c.end {
			continue
		}
		a := len(content)
		p := (*d.buf(c.stream))[c.start:c.end]
		if valid[c.stream] {
			content = append(content, p...)
		} else {
			var lossy bool
			content, lossy = appendValid(content, p)
			lossyChunks = lossyChunks || lossy
		}
		if k := len(spans) - 1; k >= 0 && spans[k].stream == c.stream {
			spans[k].end = len(content) // an emptied chunk of the other stream was between
		} else {
			spans = append(spans, span{c.stream, a, len(content)})
		}
	}
	if len(content) > 0 {
		// content is not written again: Content and every Chunk share it.
		w.Content = unsafe.String(unsafe.SliceData(content), len(content))
		w.Chunks = make([]Chunk, len(spans))
		for i, s := range spans {
			w.Chunks[i] = Chunk{Stream: s.stream.Name(), Text: w.Content[s.start:s.end]}
		}
	}
	w.Lossy = lossyOut || lossyErr || lossyChunks
}

// windowFramed fills w with the decoded window of a framed log.
//
// In text mode the window ends at the last frame boundary where neither
// stream is inside a UTF-8 sequence, so that a character split across
// frames is not split across windows. If there is no such boundary after the
// window's start, then: a window that reaches the end of a growing log is
// empty, since the writer is still inside the character; a window cut by
// max_bytes keeps all its frames and the split character is replaced
// (Lossy), so that it makes progress; at the end of a Final log the
// character can no longer complete and is replaced.
func windowFramed(r io.ReaderAt, size int64, req Request, w *Window) error {
	buf, to, release, err := framesAt(r, w.Offset, size, req)
	if err != nil {
		return err
	}
	defer release()
	o := decodeOpts{base: w.Offset, growing: to == reachGrowing}
	if !req.Exact && to != reachFinal {
		o.hold = holdRunes
	}
	d, err := decodeFrames(buf, o)
	if err != nil {
		return err
	}
	w.EndOffset = d.end
	if d.badTail > 0 {
		w.Skipped = addGap(w.Skipped, d.end, int64(d.badTail))
		w.EndOffset = d.end + int64(d.badTail)
	}
	d.fill(w, req.Exact)
	return nil
}
