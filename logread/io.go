package logread

import (
	"bytes"
	"fmt"
	"io"
)

// readAt fills p from r at off. The caller's size said these bytes exist, so
// a short read means the log shrank or the size was wrong: an error, never a
// silently shorter window.
func readAt(r io.ReaderAt, p []byte, off int64) error {
	if len(p) == 0 {
		return nil
	}
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil // io.ReaderAt may return io.EOF with a full read
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("logread: reading %d bytes at offset %d: %w", len(p), off, err)
}

// Blocks for the searches that look for a frame boundary near an offset
// start small, because the boundary is usually a few bytes away, and grow so
// that a long line costs few calls.
const (
	firstBlock = 4 << 10
	maxBlock   = 256 << 10
)

// nextNL returns the offset of the first '\n' in [from, limit), or -1.
func nextNL(r io.ReaderAt, from, limit int64) (int64, error) {
	buf := make([]byte, firstBlock)
	for from < limit {
		p := buf[:min(int64(len(buf)), limit-from)]
		if err := readAt(r, p, from); err != nil {
			return 0, err
		}
		if i := bytes.IndexByte(p, '\n'); i >= 0 {
			return from + int64(i), nil
		}
		from += int64(len(p))
		if len(buf) < maxBlock {
			buf = make([]byte, len(buf)*4)
		}
	}
	return -1, nil
}

// prevNL returns the offset of the last '\n' in [limit, before), or -1.
func prevNL(r io.ReaderAt, before, limit int64) (int64, error) {
	buf := make([]byte, firstBlock)
	for before > limit {
		n := min(int64(len(buf)), before-limit)
		p := buf[:n]
		if err := readAt(r, p, before-n); err != nil {
			return 0, err
		}
		if i := bytes.LastIndexByte(p, '\n'); i >= 0 {
			return before - n + int64(i), nil
		}
		before -= n
		if len(buf) < maxBlock {
			buf = make([]byte, len(buf)*4)
		}
	}
	return -1, nil
}

// backBuf holds a suffix [base, end) of the log, read backwards in blocks
// that double, so that the last few lines of a large log cost a few KiB of
// reads and the total stays within limit bytes. Growing copies the loaded
// suffix into a buffer twice as large: amortised, each byte is copied about
// once more.
type backBuf struct {
	r     io.ReaderAt
	buf   []byte // log bytes [base, end)
	base  int64
	end   int64
	limit int64 // never more than this many bytes
}

func newBackBuf(r io.ReaderAt, end int64, limit int) *backBuf {
	return &backBuf{r: r, base: end, end: end, limit: min(int64(limit), end)}
}

// more loads an earlier block. It returns false when base is already 0 or
// the limit is reached.
func (b *backBuf) more() (bool, error) {
	have := b.end - b.base
	if have >= b.limit {
		return false, nil
	}
	n := min(b.limit, max(2*have, firstBlock))
	nb := make([]byte, n)
	copy(nb[n-have:], b.buf)
	if err := readAt(b.r, nb[:n-have], b.end-n); err != nil {
		return false, err
	}
	b.buf, b.base = nb, b.end-n
	return true, nil
}

// lastNL returns the offset of the last '\n' in [b.base, before), loading
// earlier blocks as needed, or -1 when the loaded range, grown to the limit,
// has none.
func (b *backBuf) lastNL(before int64) (int64, error) {
	for {
		if before > b.base {
			if i := bytes.LastIndexByte(b.buf[:before-b.base], '\n'); i >= 0 {
				return b.base + int64(i), nil
			}
			before = b.base // the loaded part has none; search only new blocks
		}
		ok, err := b.more()
		if err != nil || !ok {
			return -1, err
		}
	}
}

// byteAt returns the log byte at off, which must be loaded.
func (b *backBuf) byteAt(off int64) byte { return b.buf[off-b.base] }

// slice returns the loaded log bytes [from, to).
func (b *backBuf) slice(from, to int64) []byte { return b.buf[from-b.base : to-b.base] }
