package logread_test

import (
	"bytes"
	"errors"
	"math"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agent-box/agent-box/logframe"
	"github.com/agent-box/agent-box/logread"
)

var fuzzGrep = regexp.MustCompile(`o|é|^$|\x{FFFD}`)

// windowSizes turns fuzz bytes into a max_bytes sequence: mostly tiny
// windows, where cuts fall inside characters and frames, sometimes large.
func windowSizes(cuts []byte) func() int {
	i := 0
	return func() int {
		if len(cuts) == 0 {
			return 7
		}
		b := cuts[i%len(cuts)]
		i++
		if b < 224 {
			return 1 + int(b%32)
		}
		return min(logread.MaxWindow, int(b-223)*4096)
	}
}

// fuzzOffset maps any int64 onto the interesting offsets of a log of size
// n: negative ones, positive ones, and n+1, which is past the end.
func fuzzOffset(off int64, n int) int64 {
	m := int64(n) + 2
	if off == math.MinInt64 {
		off++
	}
	if off < 0 {
		return -(-off % m)
	}
	return off % m
}

// modes of FuzzWindow, one bit each.
const (
	mExact = 1 << iota
	mFinal
	mFramed
	mGrep
	mTail
	mRaw
	mContext // grep: context lines, and lines cut
)

func FuzzWindow(f *testing.F) {
	for name, b := range fixtures(f) {
		modes := []uint8{0, mExact, mFinal, mGrep, mTail, mGrep | mFinal, mTail | mExact, mGrep | mContext, mGrep | mContext | mFinal}
		if strings.HasPrefix(name, "framed") {
			modes = append(modes, mFramed, mFramed|mExact, mFramed|mFinal, mFramed|mGrep, mFramed|mTail, mFramed|mRaw, mFramed|mRaw|mTail, mFramed|mGrep|mContext)
		}
		for _, m := range modes {
			f.Add(b, []byte{3, 0, 200, 1, 17, 250}, int64(0), m)
			f.Add(b, []byte{1, 2}, int64(-17), m)
		}
	}
	f.Add([]byte("ab\u20accd\n"), []byte{0, 1, 2}, int64(-3), uint8(0))
	f.Add([]byte("\xe2\x82"), []byte{0}, int64(1), uint8(mGrep))
	// A growing log's unterminated last line waits, whole (Raw is ignored
	// for a combined log).
	f.Add([]byte("00"), []byte("0"), int64(-60), uint8(mGrep|mRaw|mExact))
	f.Fuzz(func(t *testing.T, log []byte, cuts []byte, off int64, mode uint8) {
		req := fuzzRequest(log, cuts, off, mode)
		size := int64(len(log))
		if mode&mTail != 0 {
			req.Offset, req.Grep, req.Context = 0, nil, 0 // grep and tail_lines do not combine
			req.TailLines = 1 + len(cuts)%40
			req.MaxBytes = windowSizes(cuts)()
			w, err := logread.Read(bytes.NewReader(log), size, req)
			if err != nil {
				if !req.Framed || !errors.Is(err, logframe.ErrMalformed) {
					t.Fatalf("tail %+v: %v", req, err)
				}
				return
			}
			if msg := checkWindow(log, req, w); msg != "" {
				t.Fatalf("tail %+v: %s", req, msg)
			}
			return
		}

		d, err := drain(log, req, windowSizes(cuts))
		switch {
		case req.Offset > size:
			if !errors.Is(err, logread.ErrBadOffset) {
				t.Fatalf("offset %d of %d: %v, want ErrBadOffset", req.Offset, size, err)
			}
			return
		case req.Framed && req.Offset > 0 && req.Offset < size && log[req.Offset-1] != '\n':
			if !errors.Is(err, logread.ErrBadRequest) {
				t.Fatalf("offset %d not a boundary: %v, want ErrBadRequest", req.Offset, err)
			}
			return
		case err != nil && req.Framed && errors.Is(err, logframe.ErrMalformed):
			return
		case err != nil:
			t.Fatal(err)
		}
		if req.Grep != nil {
			if msg := checkGrepDrain(log, req, d); msg != "" {
				t.Fatalf("grep drain %+v: %s", req, msg)
			}
			return
		}
		if req.Framed {
			return // decoded reassembly is FuzzFramedWindow's
		}
		// A text drain of a growing log stops before an incomplete last
		// character, which the writer may still complete.
		end := d.last.EndOffset
		if end != size && !heldAtEnd(log, d.lastReq, end) {
			t.Fatalf("drain stopped at %d of %d", end, size)
		}
		from := d.first.Offset
		if req.Exact && !bytes.Equal(d.bytes, log[from:]) {
			t.Fatalf("exact drain from %d: %q, want %q", from, d.bytes, log[from:])
		}
		if !req.Exact && !d.lossy && !bytes.Equal(d.text, log[from:end]) {
			t.Fatalf("text drain from %d: %q, want %q", from, d.text, log[from:end])
		}
	})
}

// fuzzRequest is FuzzWindow's request for its arguments.
func fuzzRequest(log, cuts []byte, off int64, mode uint8) logread.Request {
	req := logread.Request{
		Exact:  mode&mExact != 0,
		Final:  mode&mFinal != 0,
		Framed: mode&mFramed != 0,
		Raw:    mode&mRaw != 0,
		Offset: fuzzOffset(off, len(log)),
	}
	if mode&mGrep != 0 {
		req.Grep = fuzzGrep
		if mode&mContext != 0 {
			req.Context, req.LineMax = 1+len(cuts)%3, 1+len(log)%9
		}
	}
	return req
}

// fuzzWrites turns data into stream writes, one per split byte: its low six
// bits the length, bit 6 a longer write, bit 7 stderr; 255 a write longer
// than MaxPayload, which the encoder splits into several frames.
func fuzzWrites(data, splits []byte) []write {
	var ws []write
	for _, b := range splits {
		if len(data) == 0 {
			break
		}
		n := 1 + int(b&63)
		switch {
		case b == 255:
			n = logframe.MaxPayload + 100
		case b&64 != 0:
			n *= 97
		}
		n = min(n, len(data))
		s := logframe.Stdout
		if b&128 != 0 {
			s = logframe.Stderr
		}
		ws = append(ws, write{s, data[:n]})
		data = data[n:]
	}
	if len(data) > 0 {
		ws = append(ws, write{logframe.Stdout, data})
	}
	return ws
}

// seedWrites recovers data and splits from a framed fixture, so that the
// fuzzer starts from real logs.
func seedWrites(f *testing.F, log []byte) (data, splits []byte) {
	d := logframe.NewDemuxer(0)
	err := d.Feed(log, func(fr logframe.Frame) error {
		data = append(data, fr.Payload...)
		b := byte(len(fr.Payload)-1) & 63
		if fr.Stream == logframe.Stderr {
			b |= 128
		}
		splits = append(splits, b)
		return nil
	})
	if err != nil {
		f.Fatal(err)
	}
	return data, splits
}

// modes of FuzzFramedWindow.
const (
	fCut = 1 << iota
	fExact
	fFinal
	fNegative
	fGrep
	fTail
	fContext // with fGrep: context lines, and lines cut
)

func FuzzFramedWindow(f *testing.F) {
	fx := fixtures(f)
	for _, name := range []string{"framed.log", "framed-partial.log"} {
		data, splits := seedWrites(f, fx[name])
		for _, m := range []uint8{0, fExact, fCut | fExact, fCut | fFinal, fNegative, fGrep, fTail, fCut | fGrep | fFinal, fGrep | fContext, fCut | fGrep | fContext} {
			f.Add(data, splits, []byte{5, 40, 1, 230}, uint16(9), m)
		}
	}
	f.Add(fx["utf8.txt"], []byte{2, 130, 5, 1, 200}, []byte{1, 0, 3}, uint16(0), uint8(0))
	f.Add(fx["binary.bin"], []byte{70, 3, 255}, []byte{9}, uint16(3), uint8(fCut|fExact))
	f.Fuzz(func(t *testing.T, data, splits, cuts []byte, trunc uint16, mode uint8) {
		ws := fuzzWrites(data, splits)
		log, _, _ := encode(ws)
		if mode&fCut != 0 {
			log = log[:len(log)-int(trunc)%(len(log)+1)]
		}
		req := logread.Request{Framed: true, Exact: mode&fExact != 0, Final: mode&fFinal != 0}
		if mode&fNegative != 0 {
			req.Offset = -int64(trunc) % (int64(len(log)) + 1)
		}
		size := int64(len(log))
		stdout, stderr, all := reference(t, log, req.Final)

		if mode&fTail != 0 {
			req.Offset = 0
			req.TailLines = 1 + len(cuts)%40
			req.MaxBytes = windowSizes(cuts)()
			w, err := logread.Read(bytes.NewReader(log), size, req)
			if err != nil {
				t.Fatal(err)
			}
			if msg := checkWindow(log, req, w); msg != "" {
				t.Fatalf("tail %+v: %s", req, msg)
			}
			if req.MaxBytes >= len(log) && !req.Exact && !w.Lossy {
				// A character split around the other stream's frames is
				// moved whole into one chunk, so Content equals the raw
				// interleaved output only where that is valid text; the
				// moves keep its length.
				want := lastLines(all, req.TailLines)
				if utf8.Valid(want) && w.Content != string(want) || len(w.Content) != len(want) {
					t.Fatalf("tail %d: %q, want %q", req.TailLines, w.Content, want)
				}
			}
			return
		}
		if mode&fGrep != 0 {
			req.Grep = fuzzGrep
			if mode&fContext != 0 {
				req.Context, req.LineMax = 1+int(trunc)%3, 1+len(data)%9
			}
		}
		d, err := drain(log, req, windowSizes(cuts))
		if err != nil {
			t.Fatal(err)
		}
		// A drain stops before the end only at a growing log's incomplete
		// last line, or, in text, where a stream is inside a character that
		// the writer may still complete.
		e := d.last.EndOffset
		if e != size && bytes.IndexByte(log[e:], '\n') >= 0 && !heldAtEnd(log, d.lastReq, e) {
			t.Fatalf("drain stopped at %d of %d with complete frames left", e, size)
		}
		if req.Grep != nil {
			if msg := checkGrepDrain(log, req, d); msg != "" {
				t.Fatalf("grep drain %+v: %s", req, msg)
			}
			return
		}
		if from := d.first.Offset; from > 0 || e < size {
			stdout, stderr, _ = reference(t, log[from:e], req.Final && e == size)
		}
		if req.Exact {
			if !bytes.Equal(d.stdout, stdout) || !bytes.Equal(d.stderr, stderr) {
				t.Fatalf("exact drain:\nstdout %q\nwant   %q\nstderr %q\nwant   %q", d.stdout, stdout, d.stderr, stderr)
			}
		} else if !d.lossy {
			if !bytes.Equal(d.outText, stdout) || !bytes.Equal(d.errText, stderr) {
				t.Fatalf("text drain:\nstdout %q\nwant   %q\nstderr %q\nwant   %q", d.outText, stdout, d.errText, stderr)
			}
		}
	})
}

// reference decodes a framed log with logframe's Demuxer: the streams, and
// the interleaved output.
func reference(tb testing.TB, log []byte, final bool) (stdout, stderr, all []byte) {
	tb.Helper()
	stdout, stderr = demuxAll(tb, log, final)
	d := logframe.NewDemuxer(0)
	_ = d.Feed(log, func(f logframe.Frame) error {
		all = append(all, f.Payload...)
		return nil
	})
	if final && d.Pending() > 0 {
		if _, p, err := logframe.ParseLine(nil, log[len(log)-d.Pending():]); err == nil {
			all = append(all, p...)
		}
	}
	return stdout, stderr, all
}
