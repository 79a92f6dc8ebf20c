// Package capture puts a child's output on disk: as one combined byte
// stream, or as logframe frames that keep stdout and stderr apart.
//
// The writers never fail towards the copier: a write error (ENOSPC, EFBIG,
// EIO) or the size cap stops writing for good but every later Write still
// reports success, so the copier keeps draining the child's pipes and the
// child is never blocked on a full pipe. The log is then a prefix of the
// output (cut on a write boundary, which in framed mode is a frame boundary)
// and Status says how many bytes were dropped and why.
//
// Caveats:
//   - RLIMIT_FSIZE: the kernel sends SIGXFSZ to a process that writes past
//     its file size limit, and only fails the write with EFBIG if the signal
//     does not kill it (setrlimit(2), write(2)). The Go runtime catches
//     SIGXFSZ and does nothing, so in a Go supervisor the write fails with
//     EFBIG and is handled like ENOSPC; a program that calls
//     signal.Reset(syscall.SIGXFSZ) restores the default action and dies at
//     the limit instead. This package never changes signal dispositions.
//   - Nothing is fsynced: a log is a record of output, not durable state,
//     and its readers already accept a log cut at any byte.
//   - Secrets are masked per stream in framed mode and over the one
//     combined stream in combined mode, holding back at most the longest
//     secret's length until the next write or Close; see Redactor. A secret
//     spelled by interleaving stdout and stderr is not masked in a framed
//     log, whose streams are redacted apart.
//   - A terminal's log (Options.Terminal) masks every form the line
//     discipline can give a secret, and so also what only looks like one
//     (another case, other counts of blanks or line ends). Not covered: a
//     "\r" that ONOCR drops inside a secret (only at column 0, which
//     within a secret only backspaces reach), and input the terminal
//     echoes with ECHOCTL (a control byte shown as ^X).
//   - Dropped and the cap count bytes after redaction (a masked secret
//     counts as len(Mask)); Dropped counts payload, not frame overhead.
package capture

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"

	"github.com/agent-box/agent-box/logframe"
)

// Mode is how output is stored.
type Mode string

const (
	Combined Mode = "combined" // raw bytes of both streams, in arrival order
	Framed   Mode = "framed"   // logframe frames, splittable into stdout and stderr
)

// ErrCapped is Status.Err when writing stopped at Options.MaxBytes.
var ErrCapped = errors.New("log size cap reached")

// Mask replaces every occurrence of a secret in output and records.
const Mask = "[redacted]"

// Options configure a Log.
type Options struct {
	MaxBytes int64    // stop writing once the log would exceed this; 0 = no cap
	Secrets  [][]byte // masked in everything written, chunk-safely
	// Terminal: the output is read from a terminal's master, and secrets
	// are masked in every form its output processing can give them
	// (NewTerminalRedactor).
	Terminal bool
}

// Status is the state of a Log's file.
type Status struct {
	Bytes   int64 // bytes written to the file
	Dropped int64 // output bytes drained but not written (after an error or the cap)
	Capped  bool
	Err     error // first write error, or ErrCapped; nil while complete
}

// logFile is the part of *os.File a Log uses; tests replace it to fail
// writes on demand.
type logFile interface {
	Write(p []byte) (int, error)
	Truncate(size int64) error
	Close() error
}

// openFile opens a new log file. O_EXCL and O_NOFOLLOW make sure the log is
// a file this call created, never an existing file or a symlink planted in
// the run directory (open(2)).
var openFile = func(path string) (logFile, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// framedBatch bounds how much payload one write(2) carries in framed mode,
// so that a huge Write does not allocate its whole encoding at once. It is a
// multiple of MaxPayload, so batches split a Write into the same frames as
// AppendFrames on the whole of it.
const framedBatch = 32 * logframe.MaxPayload

// Log is an open run log. Its Stdout and Stderr writers share one lock, so
// frames or chunks never interleave mid-write.
//
// Every Write is in the file (or counted as dropped) when it returns:
// combined mode writes the caller's bytes without copying them, framed mode
// encodes them into one reused buffer and writes that. Handing the write(2)
// to a goroutine, to overlap it with encoding the next Write, was tried and
// lost in test/bench/ (head -c 1G /dev/zero through the supervisor): more
// supervisor CPU and lower throughput, the hand-off per Write costing more
// than the overlap saved.
type Log struct {
	// mu serialises writes: one write(2) at a time, so chunks and frames
	// never interleave and a failed write can be cut off by truncation.
	mu      sync.Mutex
	f       logFile
	framed  bool
	max     int64
	red     [2]*Redactor // by stream; nil without secrets; see Create
	size    int64        // bytes in the file
	stopped bool         // a write failed or the cap was reached
	closed  bool
	rbuf    []byte // redacted output of the current Write, reused
	fbuf    []byte // frames of the current Write, reused
	w       [2]writer

	// stMu guards st apart from mu, so Status does not wait for a slow
	// write(2) to finish.
	stMu sync.Mutex
	st   Status
}

type writer struct {
	l *Log
	s logframe.Stream
}

func (w *writer) Write(p []byte) (int, error) {
	w.l.write(w.s, p)
	return len(p), nil
}

// Create creates the log file at path (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600)
// and returns a Log writing it in mode.
func Create(path string, mode Mode, opts Options) (*Log, error) {
	if mode != Combined && mode != Framed {
		return nil, fmt.Errorf("capture: unknown mode %q", mode)
	}
	if opts.MaxBytes < 0 {
		return nil, fmt.Errorf("capture: negative MaxBytes %d", opts.MaxBytes)
	}
	f, err := openFile(path)
	if err != nil {
		return nil, fmt.Errorf("capture: create log: %w", err)
	}
	l := &Log{f: f, framed: mode == Framed, max: opts.MaxBytes}
	if hasSecret(opts.Secrets) {
		// Framed mode keeps the streams apart, and so must redaction: a
		// secret split across two writes of stdout is found even if stderr
		// wrote in between. A combined log is one byte stream, so it gets
		// one Redactor over exactly the bytes the file shows; per-stream
		// Redactors there would emit stdout's "sec" before stderr's "ret"
		// in some orders (when "sec" is followed by the start of another
		// secret), and put "secret" in the file.
		redactor := NewRedactor
		if opts.Terminal {
			redactor = NewTerminalRedactor
		}
		r := redactor(opts.Secrets)
		l.red = [2]*Redactor{r, r}
		if l.framed {
			l.red[1] = redactor(opts.Secrets)
		}
	}
	l.w = [2]writer{{l, logframe.Stdout}, {l, logframe.Stderr}}
	return l, nil
}

func hasSecret(secrets [][]byte) bool {
	for _, s := range secrets {
		if len(s) > 0 {
			return true
		}
	}
	return false
}

// Stdout returns the writer for the child's stdout. Write always returns
// len(p), nil.
func (l *Log) Stdout() io.Writer { return &l.w[0] }

// Stderr returns the writer for the child's stderr.
func (l *Log) Stderr() io.Writer { return &l.w[1] }

// Status returns the current status; safe to call concurrently with writes.
func (l *Log) Status() Status {
	l.stMu.Lock()
	defer l.stMu.Unlock()
	return l.st
}

// Close flushes output held back by the redactor and closes the file. Its
// error is about closing only; write errors are in Status. Writes after
// Close are counted as dropped.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("capture: close log: %w", os.ErrClosed)
	}
	for i, r := range l.red {
		if r == nil || (i == 1 && r == l.red[0]) {
			continue
		}
		tail := r.Flush(l.rbuf[:0])
		l.rbuf = tail[:0]
		if l.stopped {
			l.drop(len(tail))
		} else {
			l.put(l.w[i].s, tail)
		}
	}
	l.closed = true
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("capture: close log: %w", err)
	}
	return nil
}

func (l *Log) write(s logframe.Stream, p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped || l.closed {
		// Not worth redacting: these bytes go nowhere.
		l.drop(len(p))
		return
	}
	data := p
	if r := l.red[s-1]; r != nil {
		l.rbuf = r.Write(l.rbuf[:0], p)
		data = l.rbuf
	}
	l.put(s, data)
}

// put stores data, already redacted, of stream s.
func (l *Log) put(s logframe.Stream, data []byte) {
	if len(data) == 0 {
		return
	}
	if !l.framed {
		n := len(data)
		if l.max > 0 && l.size+int64(n) > l.max {
			n = int(l.max - l.size)
		}
		if n > 0 && !l.writeFile(data[:n]) {
			l.drop(len(data))
			return
		}
		if n < len(data) {
			l.stop(ErrCapped, true)
			l.drop(len(data) - n)
		}
		return
	}
	for len(data) > 0 {
		chunk := data[:min(len(data), framedBatch)]
		if l.max > 0 {
			if room := l.max - l.size; int64(logframe.EncodedLen(len(chunk))) > room {
				// Only whole frames are written, but the cap keeps the
				// output's first bytes in framed mode as in combined: the
				// frame that overflows is cut to the payload that fits.
				fit := framedFit(room, len(chunk))
				if fit > 0 {
					l.fbuf = logframe.AppendFrames(l.fbuf[:0], s, chunk[:fit])
					if !l.writeFile(l.fbuf) {
						l.drop(len(data))
						return
					}
				}
				l.stop(ErrCapped, true)
				l.drop(len(data) - fit)
				return
			}
		}
		l.fbuf = logframe.AppendFrames(l.fbuf[:0], s, chunk)
		if !l.writeFile(l.fbuf) {
			l.drop(len(data))
			return
		}
		data = data[len(chunk):]
	}
}

// framedFit is how many bytes of a chunk of n bytes fit, as frames, in
// room bytes of log: the full frames (MaxLine each, MaxPayload of payload)
// and the largest frame that fits the rest, whose line is FrameLen(k) =
// 3 + 4*ceil(k/3) bytes, so k = (rest-3)/4*3 (a frame needs at least one
// byte of payload, so rest below FrameLen(1) = 7 holds none).
func framedFit(room int64, n int) int {
	if room <= 0 {
		return 0
	}
	full := room / logframe.MaxLine
	fit := full * logframe.MaxPayload
	if rest := room - full*logframe.MaxLine; rest >= int64(logframe.FrameLen(1)) {
		fit += min((rest-3)/4*3, logframe.MaxPayload)
	}
	return int(min(fit, int64(n)))
}

// writeFile writes b with one write call. On failure it truncates the file
// back to its size before the call, so the log ends on a write (in framed
// mode, frame) boundary, and stops the Log.
func (l *Log) writeFile(b []byte) bool {
	pre := l.size
	n, err := l.f.Write(b)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	if err == nil {
		l.size += int64(n)
		l.stMu.Lock()
		l.st.Bytes = l.size
		l.stMu.Unlock()
		return true
	}
	err = fmt.Errorf("capture: write log: %w", err)
	// os.File.Write retries short writes, so n > 0 means part of b is in
	// the file; truncate even when n is 0, since it is cheap and leaves no
	// doubt about where the log ends.
	if terr := l.f.Truncate(pre); terr != nil {
		err = errors.Join(err, fmt.Errorf("capture: truncate log back to %d bytes, it may end mid-write: %w", pre, terr))
	}
	l.stop(err, false)
	return false
}

// Stop ends writing for good, as a write error would: later output is
// drained and counted as dropped. The supervisor uses it when the disk is
// full, to keep what room is left for the run record. A closed log has
// all it will ever have, so Stop leaves it, and its status, as they are.
func (l *Log) Stop(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stopped && !l.closed {
		l.stop(err, false)
	}
}

func (l *Log) stop(err error, capped bool) {
	l.stopped = true
	l.stMu.Lock()
	l.st.Err, l.st.Capped = err, capped
	l.stMu.Unlock()
}

func (l *Log) drop(n int) {
	if n == 0 {
		return
	}
	l.stMu.Lock()
	l.st.Dropped += int64(n)
	l.stMu.Unlock()
}
