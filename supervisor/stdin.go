package supervisor

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// peerPID is the pid of the process at the other end of a unix socket.
func peerPID(c net.Conn) (int, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return 0, errors.New("not a unix socket")
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, cerr
	}
	return int(cred.Pid), nil
}

// MaxWrite bounds the data of one process_write request.
const MaxWrite = 1 << 20

// StdinWriteTimeout bounds one process_write request in the supervisor:
// waiting for an earlier request to the same run, then writing. A write
// returns as soon as all its data is in the pipe, which is at once for a
// child that reads its stdin (or for up to 64 KiB, the pipe's size); only
// a child that stops reading makes it wait.
//
// Why block at all, rather than return a partial count as soon as the pipe
// is full: a child that reads at its own pace (a REPL busy for a moment, a
// compiler reading a large input) would then make most large writes come
// back short and every agent loop on them. Why 10 s: long enough for such
// pauses, short enough that the tool call answers well within the request
// timeouts of MCP clients. A write that still cannot finish fails with a
// WriteError saying exactly how many bytes went in, so the agent resends
// only the rest.
const StdinWriteTimeout = 10 * time.Second

// MaxStdinWriteTimeout caps the timeout a request may ask for.
const MaxStdinWriteTimeout = time.Minute

// replySlack is the time the supervisor's reply may take beyond the write
// deadline; the client waits that much longer than the write may last.
const replySlack = 5 * time.Second

// WriteRequest is one request on the stdin socket; one per connection.
type WriteRequest struct {
	Data  []byte `json:"data"` // base64 in JSON
	Close bool   `json:"close"`
	// TimeoutMS is how long the supervisor may take (StdinWriteTimeout if
	// 0 or beyond MaxStdinWriteTimeout).
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// Resize, for a pty run, sets the terminal's size instead of writing.
	Resize *Size `json:"resize,omitempty"`
}

// Size is a terminal's size in characters.
type Size struct {
	Cols int `json:"cols"`
	Rows int `json:"rows"`
}

// WriteReply answers a WriteRequest. Written is exact even when Error is
// set: the first Written bytes of the data are in the child's stdin, the
// rest is not, and stdin was closed only if Closed.
type WriteReply struct {
	Written int    `json:"written"`
	Closed  bool   `json:"closed"`
	Error   string `json:"error,omitempty"`
	// Reason classifies Error: one of the reason* constants, or empty.
	Reason string `json:"reason,omitempty"`
	// Resized answers a Resize; a supervisor from before Resize does not
	// know the field and answers an empty write.
	Resized bool `json:"resized,omitempty"`
}

// Values of WriteReply.Reason.
const (
	reasonClosed  = "closed"      // stdin closed by an earlier request
	reasonTimeout = "timeout"     // the child is not reading its stdin
	reasonBroken  = "broken_pipe" // EPIPE: the child closed its stdin or exited
)

// Errors callers of WriteStdin branch on.
var (
	ErrStdinClosed      = errors.New("stdin of this run was closed")
	ErrStdinUnreachable = errors.New("the run's supervisor is not listening (run exited or supervisor lost)")
	// ErrStdinTimeout: the child did not read its stdin fast enough.
	ErrStdinTimeout = errors.New("the write to stdin timed out")
	// ErrStdinBroken: nobody reads the pipe any more (EPIPE).
	ErrStdinBroken = errors.New("the process closed its stdin or exited")
	// ErrStdinNoReply: the request was sent but no reply came back, so
	// how much of the data was written is not known.
	ErrStdinNoReply = errors.New("no reply from the run's supervisor")
)

// WriteError is a write the supervisor answered with a failure. Written of
// Total bytes (the first ones) are in the child's stdin, the rest is not;
// Err says why and wraps one of the sentinels above when one applies.
type WriteError struct {
	Written, Total int
	CloseAsked     bool // close was asked for; it was not done
	Err            error
}

func (e *WriteError) Error() string {
	var s string
	switch {
	case e.Total == 0:
		s = e.Err.Error()
	case e.Written == 0:
		s = fmt.Sprintf("wrote none of the %d bytes to stdin: %v", e.Total, e.Err)
	default:
		s = fmt.Sprintf("wrote %d of %d bytes to stdin before %v; the remaining %d bytes were not written",
			e.Written, e.Total, e.Err, e.Total-e.Written)
	}
	if e.CloseAsked {
		s += "; stdin was not closed"
	}
	return s
}

func (e *WriteError) Unwrap() error { return e.Err }

// reasonError is the supervisor's text for a failure, wrapping the
// sentinel its reason stands for.
type reasonError struct {
	text     string
	sentinel error
}

func (e *reasonError) Error() string { return e.text }
func (e *reasonError) Unwrap() error { return e.sentinel }

type stdinServer struct {
	ln net.Listener
	// sem (capacity 1) serializes requests; unlike a mutex, waiting for
	// it counts against the request's deadline.
	sem chan struct{}
	w   *os.File // nil once closed; guarded by sem
	// ended: the supervisor closed w because the leader exited, not a
	// process_write with close; guarded by sem.
	ended bool
	term  *terminal // the run's terminal; nil for a run on pipes

	pipe     *os.File      // w, also after it is set to nil: for its deadline
	closing  atomic.Bool   // Close has begun: a write in progress gives up
	accepted chan struct{} // closed when accept returns: no handler starts after
	handlers sync.WaitGroup
}

// closeWait bounds how long Close waits for the requests it accepted to be
// answered: a client that sends its request slowly must not hold the
// supervisor (its write then reads as no reply, which says it is not known
// whether the data went in).
const closeWait = 2 * time.Second

func serveStdin(runDir string, w *os.File, term *terminal) (*stdinServer, error) {
	path := filepath.Join(runDir, StdinSocket)
	os.Remove(path)
	ln, err := listenUnix(path)
	if err != nil {
		return nil, err
	}
	s := &stdinServer{ln: ln, w: w, pipe: w, sem: make(chan struct{}, 1), accepted: make(chan struct{}), term: term}
	go acceptOn(s.ln, &s.handlers, s.accepted, s.handle)
	return s, nil
}

func (s *stdinServer) handle(c net.Conn) {
	defer s.handlers.Done()
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	var req WriteRequest
	var reply WriteReply
	if err := json.NewDecoder(io.LimitReader(c, 2*MaxWrite)).Decode(&req); err != nil {
		reply.Error = fmt.Sprintf("bad request: %v", err)
	} else if req.Resize != nil {
		reply = s.resize(*req.Resize)
	} else {
		timeout := requestTimeout(req.TimeoutMS)
		deadline := time.Now().Add(timeout)
		c.SetDeadline(deadline.Add(replySlack))
		reply = s.write(req, deadline, timeout)
	}
	json.NewEncoder(c).Encode(reply)
}

func requestTimeout(ms int64) time.Duration {
	d := time.Duration(ms) * time.Millisecond
	if d <= 0 || d > MaxStdinWriteTimeout {
		return StdinWriteTimeout
	}
	return d
}

// write serves req, all of it before deadline, which is timeout after the
// request came in.
func (s *stdinServer) write(req WriteRequest, deadline time.Time, timeout time.Duration) WriteReply {
	wait := time.NewTimer(time.Until(deadline))
	defer wait.Stop()
	select {
	case s.sem <- struct{}{}:
	case <-wait.C:
		return WriteReply{Reason: reasonTimeout, Error: fmt.Sprintf(
			"timed out after %s waiting for an earlier write to the same stdin to finish (the process is not reading its stdin)", timeout)}
	}
	defer func() { <-s.sem }()
	if s.w == nil && s.ended {
		// A request accepted just before Close: it must not read as a
		// close by an earlier process_write.
		return WriteReply{Reason: reasonBroken, Error: "the run's leader exited; its stdin is closed"}
	}
	if s.w == nil {
		return WriteReply{Closed: true, Reason: reasonClosed, Error: ErrStdinClosed.Error()}
	}
	var reply WriteReply
	if len(req.Data) > 0 {
		// A child that does not read its stdin would block this write
		// forever once the pipe is full; bound it (see StdinWriteTimeout).
		// On any error, n is still exactly what the pipe took.
		s.w.SetWriteDeadline(deadline)
		if s.closing.Load() {
			s.w.SetWriteDeadline(time.Now()) // see Close
		}
		n, err := s.w.Write(req.Data)
		reply.Written = n
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded) && s.closing.Load():
			reply.Reason = reasonBroken
			reply.Error = "the run's leader exited during the write, which was cut short"
		case errors.Is(err, os.ErrDeadlineExceeded):
			reply.Reason = reasonTimeout
			reply.Error = fmt.Sprintf("the write timed out after %s (the process is not reading its stdin)", timeout)
		case errors.Is(err, syscall.EPIPE):
			reply.Reason = reasonBroken
			reply.Error = "the process closed its stdin or exited (broken pipe)"
		default:
			reply.Error = fmt.Sprintf("the write failed: %v", err)
		}
		if err != nil {
			return reply
		}
	}
	if req.Close && s.term != nil {
		// A terminal has no end of its own: ^D is its reader's EOF.
		s.w.SetWriteDeadline(deadline)
		if _, err := s.w.Write(s.term.eof()); err != nil {
			reply.Error = fmt.Sprintf("sending EOF (^D) to the terminal failed: %v", err)
			return reply
		}
	}
	if req.Close {
		s.closeInput()
		s.w = nil
		reply.Closed = true
	}
	return reply
}

// resize sets the terminal's size, between writes.
func (s *stdinServer) resize(size Size) WriteReply {
	if s.term == nil {
		return WriteReply{Error: "the run has no terminal (it was not started with pty: true)"}
	}
	select {
	case s.sem <- struct{}{}:
	case <-time.After(StdinWriteTimeout):
		return WriteReply{Reason: reasonTimeout, Error: "timed out waiting for a write to the terminal to finish"}
	}
	defer func() { <-s.sem }()
	if s.w == nil && s.ended {
		return WriteReply{Reason: reasonBroken, Error: "the run's leader exited; its terminal is gone"}
	}
	if err := s.term.resize(size.Cols, size.Rows); err != nil {
		return WriteReply{Error: err.Error()}
	}
	return WriteReply{Resized: true}
}

// closeInput closes the pipe to the child's stdin. A terminal's input is
// left open, to be closed by the supervisor once the output is drained:
// closing it at a close request hung the terminal up now and then (one
// close in ten in TestPtyCloseSendsEOF, the reader killed by SIGHUP after
// it had read the ^D), and the ^D is the end of input a terminal has.
func (s *stdinServer) closeInput() {
	if s.term == nil {
		s.w.Close()
	}
}

// Close stops listening, answers the requests already accepted, and closes
// the child's stdin. A write in progress is cut short (a descendant may
// hold the pipe without reading it: the supervisor must not wait for that
// write's deadline, up to a minute, with the run's own deadline to keep).
// A nil server (a run without a stdin pipe, or whose socket failed) has
// nothing to close; a second Close does nothing.
func (s *stdinServer) Close() {
	if s == nil || s.closing.Swap(true) {
		return
	}
	s.pipe.SetWriteDeadline(time.Now())
	s.ln.Close()
	<-s.accepted
	s.sem <- struct{}{}
	if s.w != nil {
		s.closeInput()
		s.w = nil
		s.ended = true
	}
	<-s.sem
	// The requests accepted before the listener closed: each now finds
	// stdin ended and says so, instead of a reset connection.
	done := make(chan struct{})
	go func() { s.handlers.Wait(); close(done) }()
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// stdinActor is the stdin socket's part in the run's course (supervise).
// The socket is served from before the start report until the record says
// the leader's exit (said): a process_write that finds no socket must find
// the exit in the record, and until then a write still reaches a
// descendant that holds stdin, as it would have while the leader lived.
// A terminal's input, which the server leaves open (closeInput), is
// closed once the output has ended (drained). srv and ptyIn may be nil.
func stdinActor(srv *stdinServer, ptyIn *os.File, said, drained <-chan struct{}) func() error {
	return func() error {
		<-said
		srv.Close()
		<-drained
		if ptyIn != nil {
			ptyIn.Close()
		}
		return nil
	}
}

// ErrStdinImpostor means the socket is not the run's supervisor's.
var ErrStdinImpostor = errors.New("the stdin socket does not belong to the run's supervisor; nothing was written")

// WriteStdin sends data (and optionally closes stdin) to the supervisor of
// the run in runDir, which must be process supervisorPID: the socket is not
// followed if it is a symlink, and the peer is checked with SO_PEERCRED
// before any byte is sent. timeout bounds the supervisor's side (0 means
// StdinWriteTimeout).
//
// When the supervisor answered with a failure the error is a *WriteError
// and the reply's Written is exact. Errors before the request was sent
// mean nothing was written; ErrStdinNoReply means it is not known.
func WriteStdin(runDir string, supervisorPID int, data []byte, closeIt bool, timeout time.Duration) (WriteReply, error) {
	if len(data) > MaxWrite {
		return WriteReply{}, fmt.Errorf("data is %d bytes, at most %d per call; nothing was written", len(data), MaxWrite)
	}
	timeout = requestTimeout(timeout.Milliseconds())
	c, err := dialSupervisor(runDir, StdinSocket, supervisorPID)
	if err != nil {
		return WriteReply{}, err
	}
	defer c.Close()
	// Wait longer than the supervisor may take (a supervisor from before
	// TimeoutMS takes StdinWriteTimeout), so that a reply is never given
	// up on while the supervisor may still be writing.
	c.SetDeadline(time.Now().Add(max(timeout, StdinWriteTimeout) + 2*replySlack))
	req, err := json.Marshal(WriteRequest{Data: data, Close: closeIt, TimeoutMS: timeout.Milliseconds()})
	if err != nil {
		return WriteReply{}, err
	}
	req = append(req, '\n')
	if n, err := c.Write(req); err != nil {
		// The supervisor acts only on a whole JSON object; without its
		// closing brace it writes nothing.
		if n < len(req)-1 {
			// It stopped listening (its run ended) with the request queued.
			return WriteReply{}, fmt.Errorf("%w: sending the request: %v; nothing was written", ErrStdinUnreachable, err)
		}
		// Only the newline is missing: a reply may still come.
	}
	var reply WriteReply
	line, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil {
		return WriteReply{}, fmt.Errorf("%w (%v): it is not known how many of the %d bytes were written to stdin; check the process's output before resending",
			ErrStdinNoReply, err, len(data))
	}
	if err := json.Unmarshal(line, &reply); err != nil {
		return WriteReply{}, fmt.Errorf("%w (bad reply: %v): it is not known how many of the %d bytes were written to stdin; check the process's output before resending",
			ErrStdinNoReply, err, len(data))
	}
	if reply.Error == "" {
		return reply, nil
	}
	var sentinel error
	switch {
	case reply.Reason == reasonClosed,
		reply.Reason == "" && reply.Closed && reply.Written == 0: // a supervisor before Reason
		sentinel = ErrStdinClosed
	case reply.Reason == reasonTimeout:
		sentinel = ErrStdinTimeout
	case reply.Reason == reasonBroken:
		sentinel = ErrStdinBroken
	}
	var why error = &reasonError{text: reply.Error, sentinel: sentinel}
	if sentinel == nil {
		why = errors.New(reply.Error)
	}
	return reply, &WriteError{Written: reply.Written, Total: len(data), CloseAsked: closeIt && !reply.Closed, Err: why}
}

// dialSupervisor connects to socket (StdinSocket, ControlSocket) of the
// run in runDir, which must be served by process supervisorPID: the socket
// is not followed if it is a symlink, and the peer is checked with
// SO_PEERCRED (anything in the run dir may have been planted by the run's
// own command).
func dialSupervisor(runDir, socket string, supervisorPID int) (net.Conn, error) {
	path := filepath.Join(runDir, socket)
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStdinUnreachable, err)
	}
	if fi.Mode().Type() != os.ModeSocket {
		return nil, fmt.Errorf("%w (%s is not a socket)", ErrStdinImpostor, path)
	}
	c, err := dialUnix(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStdinUnreachable, err)
	}
	if pid, err := peerPID(c); err != nil || pid != supervisorPID {
		c.Close()
		return nil, fmt.Errorf("%w (peer pid %d, supervisor pid %d)", ErrStdinImpostor, pid, supervisorPID)
	}
	return c, nil
}

// Resize asks the supervisor of the pty run in runDir (process
// supervisorPID) to set its terminal's size.
func Resize(runDir string, supervisorPID int, size Size) error {
	c, err := dialSupervisor(runDir, StdinSocket, supervisorPID)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(StdinWriteTimeout + 2*replySlack))
	if err := json.NewEncoder(c).Encode(WriteRequest{Resize: &size}); err != nil {
		return fmt.Errorf("%w: sending the request: %v", ErrStdinUnreachable, err)
	}
	var reply WriteReply
	line, err := bufio.NewReader(c).ReadBytes('\n')
	if err == nil {
		err = json.Unmarshal(line, &reply)
	}
	switch {
	case err != nil:
		return fmt.Errorf("%w: %v", ErrStdinNoReply, err)
	case reply.Error != "":
		return errors.New(reply.Error)
	case !reply.Resized:
		return errors.New("the run's supervisor does not know how to resize a terminal")
	}
	return nil
}
