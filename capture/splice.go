package capture

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// spliceChunk is how much one splice(2) call may move.
const spliceChunk = 1 << 20

// copyBufSize is the read size of the plain copy loop.
const copyBufSize = 256 << 10

// ReadFrom drains r into the log until EOF. It never stops early: after a
// write error or at the cap it keeps reading and counts the bytes dropped,
// so the child's pipe is always emptied.
//
// When nothing has to look at the bytes (combined mode, no secrets) and r
// is a pipe, the bytes move from the pipe to the file inside the kernel
// with splice(2): no copy through user space and one system call per
// megabyte, which is what lets capture keep up with "cmd > file".
func (w *writer) ReadFrom(r io.Reader) (int64, error) {
	l := w.l
	src, srcOK := r.(*os.File)
	dst, dstOK := l.f.(*os.File)
	if !srcOK || !dstOK || l.framed || l.red[w.s-1] != nil {
		return w.copyFrom(r)
	}
	rc, err := src.SyscallConn()
	if err != nil {
		return w.copyFrom(r)
	}
	dfd := int(dst.Fd())
	var total int64
	for {
		l.mu.Lock()
		if l.stopped || l.closed {
			l.mu.Unlock()
			n, err := w.copyFrom(r)
			return total + n, err
		}
		chunk := int64(spliceChunk)
		if l.max > 0 {
			room := l.max - l.size
			if room <= 0 {
				l.stop(ErrCapped, true)
				l.mu.Unlock()
				continue
			}
			chunk = min(chunk, room)
		}
		pre := l.size
		l.mu.Unlock()

		var n int64
		var serr error
		rerr := rc.Read(func(fd uintptr) bool {
			n, serr = unix.Splice(int(fd), nil, dfd, nil, int(chunk), unix.SPLICE_F_MOVE|unix.SPLICE_F_MORE|unix.SPLICE_F_NONBLOCK)
			return !errors.Is(serr, unix.EAGAIN)
		})
		switch {
		case rerr != nil:
			return total, rerr
		case serr == nil && n == 0:
			return total, nil // EOF: every writer closed the pipe
		case serr == nil:
			total += n
			l.mu.Lock()
			l.size += n
			l.stMu.Lock()
			l.st.Bytes = l.size
			l.stMu.Unlock()
			l.mu.Unlock()
		case errors.Is(serr, unix.EINVAL) && total == 0:
			// A file system that cannot splice: copy instead.
			n, err := w.copyFrom(r)
			return n, err
		case errors.Is(serr, unix.EINTR):
		default:
			l.mu.Lock()
			err := fmt.Errorf("capture: write log: %w", serr)
			if terr := l.f.Truncate(pre); terr != nil {
				err = errors.Join(err, fmt.Errorf("capture: truncate log back to %d bytes, it may end mid-write: %w", pre, terr))
			}
			l.stop(err, false)
			l.mu.Unlock()
		}
	}
}

// copyFrom is ReadFrom through user space: every byte goes through Write
// (redaction, framing, the cap, error handling).
func (w *writer) copyFrom(r io.Reader) (int64, error) {
	buf := make([]byte, copyBufSize)
	var total int64
	for {
		n, err := r.Read(buf)
		if n > 0 {
			w.Write(buf[:n])
			total += int64(n)
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}
