package logread_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agent-box/agent-box/logframe"
	"github.com/agent-box/agent-box/logread"
)

// checkWindow fails t unless w, the answer to req on log, keeps the
// promises every window makes. It returns a description of the first broken
// one, or "", so that property tests and fuzz targets share it.
func checkWindow(log []byte, req logread.Request, w logread.Window) string {
	size := int64(len(log))
	switch {
	case w.Size != size:
		return fmt.Sprintf("Size %d, want %d", w.Size, size)
	case w.Offset < 0 || w.Offset > w.EndOffset || w.EndOffset > size:
		return fmt.Sprintf("offsets out of order: %d <= %d <= %d", w.Offset, w.EndOffset, size)
	case w.Truncated != (w.EndOffset < size):
		return fmt.Sprintf("Truncated %v with EndOffset %d of %d", w.Truncated, w.EndOffset, size)
	}
	if req.Offset >= 0 && req.TailLines == 0 && w.Offset != req.Offset {
		return fmt.Sprintf("Offset %d, asked for %d", w.Offset, req.Offset)
	}
	texts := []string{w.Content, w.Stdout, w.Stderr}
	for _, c := range w.Chunks {
		texts = append(texts, c.Text)
	}
	for _, m := range w.Matches {
		texts = append(texts, m.Line)
	}
	for _, s := range texts {
		if !utf8.ValidString(s) {
			return fmt.Sprintf("invalid UTF-8 text %q", s)
		}
	}
	var last int64 = -1
	for _, g := range w.Skipped {
		if g.Bytes <= 0 || g.From <= last || g.From+g.Bytes > w.EndOffset {
			return fmt.Sprintf("bad gaps %v for window [%d, %d)", w.Skipped, w.Offset, w.EndOffset)
		}
		last = g.From + g.Bytes // touching gaps must have been merged: From > last
	}
	framed := req.Framed
	decoded := framed && !req.Raw
	if framed {
		for _, off := range append([]int64{w.Offset}, gapStarts(w.Skipped)...) {
			if off > 0 && off < size && log[off-1] != '\n' {
				return fmt.Sprintf("offset %d is not a frame boundary", off)
			}
		}
		if e := w.EndOffset; e > 0 && e < size && log[e-1] != '\n' {
			return fmt.Sprintf("EndOffset %d is not a frame boundary", e)
		}
	}
	// Progress: a window that starts before the end returns something,
	// except while a writer is still inside what is left.
	if req.TailLines == 0 && w.Offset < size && w.EndOffset == w.Offset && !heldAtEnd(log, req, w.Offset) {
		return fmt.Sprintf("no progress at %d", w.Offset)
	}
	if req.Grep != nil {
		if w.Content != "" || w.Bytes != nil {
			return "grep returned content"
		}
		if decoded {
			return ""
		}
		return checkTiling(log, req, w)
	}
	if !decoded {
		got := []byte(w.Content)
		if req.Exact {
			got = w.Bytes
		} else if w.Lossy {
			return ""
		}
		if !bytes.Equal(got, log[w.Offset:w.EndOffset]) {
			return fmt.Sprintf("window [%d, %d) holds %q, log has %q", w.Offset, w.EndOffset, got, log[w.Offset:w.EndOffset])
		}
		return ""
	}
	var joined strings.Builder
	for i, c := range w.Chunks {
		if i > 0 && w.Chunks[i-1].Stream == c.Stream {
			return "adjacent chunks of one stream"
		}
		if c.Text == "" {
			return "empty chunk"
		}
		joined.WriteString(c.Text)
	}
	if joined.String() != w.Content {
		return fmt.Sprintf("chunks %q do not make Content %q", joined.String(), w.Content)
	}
	return ""
}

// heldAtEnd reports whether all that is left of a growing log past off is
// what a writer is still writing, so that a window at off may be empty: an
// incomplete last frame line, or, in text, an incomplete last character
// (framed: complete frames within the window's reach after which one stream
// or the other is inside a character at every frame boundary); for grep, an
// unterminated last line (combined: within the window's reach; framed:
// complete frames within the window's reach after which one stream or the
// other is inside a line at every frame boundary).
func heldAtEnd(log []byte, req logread.Request, off int64) bool {
	if req.Final {
		return false
	}
	rest := log[off:]
	text := !req.Exact || req.Grep != nil
	grep := req.Grep != nil && !(req.Framed && req.Raw) // Raw is ignored for combined logs
	if req.Grep != nil && req.Context > 0 && (!req.Framed || req.Raw) && heldForContext(rest, req) {
		return true
	}
	if !req.Framed {
		if grep && len(rest) <= req.MaxBytes && bytes.IndexByte(rest, '\n') < 0 {
			return true
		}

		return text && len(rest) > 0 && !utf8.FullRune(rest)
	}
	complete := rest[:bytes.LastIndexByte(rest, '\n')+1]
	if len(complete) == 0 {
		return true
	}
	if grep && req.Context > 0 && (len(rest) <= req.MaxBytes || bytes.Count(rest, []byte("\n")) == 1) && heldFramed(complete, req) {
		return true
	}
	if req.Raw || !text {
		return false
	}
	// The window must reach the end of the log, or it is cut by max_bytes
	// and keeps its frames.
	if len(rest) > req.MaxBytes && (bytes.Count(rest, []byte("\n")) > 1 || len(complete) < len(rest)) {
		return false
	}
	inside := endsInside
	if grep {
		inside = insideLine
	}
	var streams [3][]byte
	for p := complete; len(p) > 0; {
		i := bytes.IndexByte(p, '\n')
		s, b, err := logframe.ParseLine(nil, p[:i+1])
		if err != nil {
			return false
		}
		streams[s] = append(streams[s], b...)
		if !inside(streams[logframe.Stdout]) && !inside(streams[logframe.Stderr]) {
			return false // a boundary where neither stream is inside a character (grep: a line)
		}
		p = p[i+1:]
	}
	return true
}

// heldForContext reports whether rest, the end of a growing combined log,
// is at most req.Context complete lines that do not match, and a partial
// last line: the lines a match yet to be written would return before it.
func heldForContext(rest []byte, req logread.Request) bool {
	lines := bytes.SplitAfter(rest, []byte("\n"))
	n := 0
	for _, l := range lines {
		if !bytes.HasSuffix(l, []byte("\n")) {
			break
		}
		n++
		if req.Grep.Match(bytes.TrimSuffix(l, []byte("\n"))) {
			return false
		}
	}
	return n <= req.Context
}

// heldFramed reports whether the complete frames of a growing framed log's
// end hold no complete line that matches up to their last line boundary
// (past it, a stream's unterminated line holds them back anyway): lines a
// match yet to be written would return before it (at most req.Context of
// each stream, but a frame holding one of them may hold earlier lines too,
// and the answer can only end at a frame boundary).
func heldFramed(complete []byte, req logread.Request) bool {
	var streams, upTo [3][]byte
	for p := complete; len(p) > 0; {
		i := bytes.IndexByte(p, '\n')
		s, b, err := logframe.ParseLine(nil, p[:i+1])
		if err != nil {
			return false
		}
		streams[s] = append(streams[s], b...)
		if !insideLine(streams[logframe.Stdout]) && !insideLine(streams[logframe.Stderr]) {
			upTo = streams
		}
		p = p[i+1:]
	}
	for _, b := range upTo {
		for _, l := range bytes.SplitAfter(b, []byte("\n")) {
			if bytes.HasSuffix(l, []byte("\n")) && req.Grep.Match(l[:len(l)-1]) {
				return false
			}
		}
	}
	return true
}

// insideLine reports whether p is inside a line: not empty and not ending
// with a newline.
func insideLine(p []byte) bool { return len(p) > 0 && p[len(p)-1] != '\n' }

// endsInside reports whether p ends with a prefix of a UTF-8 sequence that
// more bytes could complete.
func endsInside(p []byte) bool {
	for i := len(p) - 1; i >= 0 && i >= len(p)-(utf8.UTFMax-1); i-- {
		if p[i] < utf8.RuneSelf {
			return false
		}
		if utf8.RuneStart(p[i]) {
			return !utf8.FullRune(p[i:])
		}
	}
	return false
}

func gapStarts(gs []logread.Gap) []int64 {
	var s []int64
	for _, g := range gs {
		s = append(s, g.From)
	}
	return s
}

// checkTiling checks that a combined (or raw) grep answer accounts for every
// byte of its window: matching lines and gaps tile it exactly. A match is a
// line, or the part of a line up to the next match or gap (a line longer
// than a window is matched in parts); its text is that line's or part's.
// With req.MaxBytes set, it also checks that the matches, each counted with
// its newline, fit in MaxBytes, unless there is only one.
func checkTiling(log []byte, req logread.Request, w logread.Window) string {
	type span struct {
		from, to int64
		m        *logread.Match
	}
	var spans []span
	for _, g := range w.Skipped {
		spans = append(spans, span{g.From, g.From + g.Bytes, nil})
	}
	for i := range w.Matches {
		spans = append(spans, span{w.Matches[i].Offset, -1, &w.Matches[i]})
	}
	slices.SortStableFunc(spans, func(a, b span) int { return int(a.from - b.from) })
	total, matched, through := 0, 0, 0
	for i := range spans {
		s := &spans[i]
		if s.m == nil {
			continue
		}
		s.to = w.EndOffset
		if i+1 < len(spans) {
			s.to = min(s.to, spans[i+1].from)
		}
		if s.to < s.from {
			return fmt.Sprintf("match %+v past the window's end %d or at another's offset", *s.m, w.EndOffset)
		}
		if j := bytes.IndexByte(log[s.from:s.to], '\n'); j >= 0 {
			s.to = s.from + int64(j) + 1
		}
		line := bytes.TrimSuffix(log[s.from:s.to], []byte("\n"))
		if req.Grep.Match(line) == s.m.Context {
			return fmt.Sprintf("match %+v (context %v) on line %q", *s.m, s.m.Context, line)
		}
		if msg := checkLineText(*s.m, line, req.LineMax); msg != "" {
			return msg
		}
		total += len(s.m.Line)
		if s.to > s.from && log[s.to-1] == '\n' {
			total++
		}
		if !s.m.Context {
			// After-context completes its group past the bound.
			matched, through = matched+1, total
		}
	}
	if req.MaxBytes > 0 && matched > 1 && through > req.MaxBytes {
		return fmt.Sprintf("%d matches with %d bytes of text, max_bytes %d", len(w.Matches), through, req.MaxBytes)
	}
	pos := int64(0)
	if req.Offset >= 0 {
		pos = w.Offset
	}
	for _, s := range spans {
		if s.from != pos {
			return fmt.Sprintf("window [%d, %d): bytes at %d unaccounted for (matches %v, gaps %v)", w.Offset, w.EndOffset, pos, w.Matches, w.Skipped)
		}
		pos = s.to
	}
	if pos != w.EndOffset {
		return fmt.Sprintf("window [%d, %d): accounted up to %d only", w.Offset, w.EndOffset, pos)
	}
	return ""
}

// checkLineText checks that m's text is that of its line: whole, or cut
// to lineMax bytes (lineMax > 0) and saying the line's length.
func checkLineText(m logread.Match, line []byte, lineMax int) string {
	text := valid(line)
	if lineMax > 0 && len(text) > lineMax {
		if m.Bytes != len(line) || len(m.Line) > lineMax || !strings.HasPrefix(text, m.Line) || len(m.Line) < lineMax-3 && len(line) >= lineMax {
			return fmt.Sprintf("match %+v is not the text of %q cut to %d bytes", m, line, lineMax)
		}
		return ""
	}
	if m.Line != text || m.Bytes != 0 {
		return fmt.Sprintf("match %+v is not the text of its line %q", m, line)
	}
	return ""
}

// drained is what a client reassembles by resuming at EndOffset.
type drained struct {
	bytes, stdout, stderr  []byte // Exact: Bytes, or StdoutBytes/StderrBytes
	text, outText, errText []byte // text: Content, or Stdout/Stderr
	lossy                  bool
	matches                []logread.Match
	skipped                []logread.Gap
	windows                int
	first                  logread.Window
	last                   logread.Window
	lastReq                logread.Request // the request that got last
}

// drain reads log from req.Offset to its end, window after window, taking
// each window's max_bytes from next. It stops early only where a window may
// legitimately make no progress.
func drain(log []byte, req logread.Request, next func() int) (drained, error) {
	var d drained
	for {
		req.MaxBytes = next()
		w, err := logread.Read(bytes.NewReader(log), int64(len(log)), req)
		if err != nil {
			return d, fmt.Errorf("window %d at %d: %w", d.windows, req.Offset, err)
		}
		if msg := checkWindow(log, req, w); msg != "" {
			return d, fmt.Errorf("window %d, request %+v: %s", d.windows, req, msg)
		}
		if d.windows == 0 {
			d.first = w
		}
		d.last, d.lastReq = w, req
		d.windows++
		d.bytes = append(d.bytes, w.Bytes...)
		d.stdout = append(d.stdout, w.StdoutBytes...)
		d.stderr = append(d.stderr, w.StderrBytes...)
		d.text = append(d.text, w.Content...)
		d.outText = append(d.outText, w.Stdout...)
		d.errText = append(d.errText, w.Stderr...)
		d.lossy = d.lossy || w.Lossy
		d.matches = append(d.matches, w.Matches...)
		d.skipped = append(d.skipped, w.Skipped...)
		if !w.Truncated || w.EndOffset == w.Offset {
			return d, nil
		}
		req.Offset = w.EndOffset
	}
}

// checkGrepDrain checks what a grep drain of log from req.Offset got as a
// whole: combined (or raw), its matches and gaps tile the bytes it read past,
// each match its line or a part of it, no byte twice; framed, its gaps are
// ordered and disjoint, and no match starts in a gap.
func checkGrepDrain(log []byte, req logread.Request, d drained) string {
	if !req.Framed || req.Raw {
		w := logread.Window{Offset: d.first.Offset, EndOffset: d.last.EndOffset, Matches: d.matches, Skipped: d.skipped}
		req.MaxBytes = 0 // the bound is per answer
		return checkTiling(log, req, w)
	}
	last := int64(-1)
	for _, g := range d.skipped {
		if g.From <= last {
			return fmt.Sprintf("gaps %v overlap", d.skipped)
		}
		last = g.From + g.Bytes - 1
		for _, m := range d.matches {
			if m.Offset >= g.From && m.Offset <= last {
				return fmt.Sprintf("match %+v in gap %+v", m, g)
			}
		}
	}
	for i := 1; i < len(d.matches); i++ {
		if d.matches[i].Offset < d.matches[i-1].Offset {
			return fmt.Sprintf("matches out of order: %v", d.matches)
		}
	}
	return ""
}

// demuxAll is the reference decoder: the streams of a framed log's complete
// frames, plus its incomplete last line when final and decodable.
func demuxAll(tb testing.TB, log []byte, final bool) (stdout, stderr []byte) {
	tb.Helper()
	d := logframe.NewDemuxer(0)
	err := d.Feed(log, func(f logframe.Frame) error {
		if f.Stream == logframe.Stderr {
			stderr = append(stderr, f.Payload...)
		} else {
			stdout = append(stdout, f.Payload...)
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("reference demux: %v", err)
	}
	if final && d.Pending() > 0 {
		s, p, err := logframe.ParseLine(nil, log[len(log)-d.Pending():])
		if err == nil && s == logframe.Stderr {
			stderr = append(stderr, p...)
		} else if err == nil {
			stdout = append(stdout, p...)
		}
	}
	return stdout, stderr
}

const fixtureDir = "../testdata/fixtures/logread"

func fixtures(tb testing.TB) map[string][]byte {
	tb.Helper()
	ents, err := os.ReadDir(fixtureDir)
	if err != nil {
		tb.Fatal(err)
	}
	m := map[string][]byte{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(fixtureDir, e.Name()))
		if err != nil {
			tb.Fatal(err)
		}
		m[e.Name()] = b
	}
	return m
}
