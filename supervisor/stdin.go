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

// StdinSocket is the name of the unix socket, in the run directory, through
// which any agent-box (not only the one that started the run) writes to a
// piped run's stdin. The run directory is 0700, so only the owner connects.
const StdinSocket = "stdin.sock"

// MaxWrite bounds the data of one process_write request.
const MaxWrite = 1 << 20

// WriteRequest is one request on the stdin socket; one per connection.
type WriteRequest struct {
	Data  []byte `json:"data"` // base64 in JSON
	Close bool   `json:"close"`
}

// WriteReply answers a WriteRequest.
type WriteReply struct {
	Written int    `json:"written"`
	Closed  bool   `json:"closed"`
	Error   string `json:"error,omitempty"`
}

// Errors callers of WriteStdin branch on.
var (
	ErrStdinClosed      = errors.New("stdin of this run was closed")
	ErrStdinUnreachable = errors.New("the run's supervisor is not listening (run exited or supervisor lost)")
)

type stdinServer struct {
	ln     net.Listener
	mu     sync.Mutex
	w      *os.File // nil once closed
	closed bool
}

func serveStdin(runDir string, w *os.File) (*stdinServer, error) {
	path := filepath.Join(runDir, StdinSocket)
	os.Remove(path)
	ln, err := listenUnix(path)
	if err != nil {
		return nil, err
	}
	s := &stdinServer{ln: ln, w: w}
	go s.accept()
	return s, nil
}

func (s *stdinServer) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		go s.handle(c)
	}
}

func (s *stdinServer) handle(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	var req WriteRequest
	var reply WriteReply
	if err := json.NewDecoder(io.LimitReader(c, 2*MaxWrite)).Decode(&req); err != nil {
		reply.Error = fmt.Sprintf("bad request: %v", err)
	} else {
		reply = s.write(req)
	}
	json.NewEncoder(c).Encode(reply)
}

func (s *stdinServer) write(req WriteRequest) WriteReply {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil {
		return WriteReply{Closed: true, Error: ErrStdinClosed.Error()}
	}
	var reply WriteReply
	if len(req.Data) > 0 {
		// A child that does not read its stdin would block this write
		// forever once the pipe is full; bound it.
		s.w.SetWriteDeadline(time.Now().Add(10 * time.Second))
		n, err := s.w.Write(req.Data)
		reply.Written = n
		if err != nil {
			reply.Error = fmt.Sprintf("writing to stdin: %v", err)
			return reply
		}
	}
	if req.Close {
		s.w.Close()
		s.w = nil
		reply.Closed = true
	}
	return reply
}

// Close stops listening and closes the child's stdin.
func (s *stdinServer) Close() {
	s.ln.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w != nil {
		s.w.Close()
		s.w = nil
	}
}

// ErrStdinImpostor means the socket is not the run's supervisor's.
var ErrStdinImpostor = errors.New("the stdin socket does not belong to the run's supervisor; nothing was written")

// WriteStdin sends data (and optionally closes stdin) to the supervisor of
// the run in runDir, which must be process supervisorPID: the socket is not
// followed if it is a symlink, and the peer is checked with SO_PEERCRED
// before any byte is sent.
func WriteStdin(runDir string, supervisorPID int, data []byte, closeIt bool) (WriteReply, error) {
	if len(data) > MaxWrite {
		return WriteReply{}, fmt.Errorf("data is %d bytes, at most %d per call", len(data), MaxWrite)
	}
	path := filepath.Join(runDir, StdinSocket)
	fi, err := os.Lstat(path)
	if err != nil {
		return WriteReply{}, fmt.Errorf("%w: %v", ErrStdinUnreachable, err)
	}
	if fi.Mode().Type() != os.ModeSocket {
		return WriteReply{}, fmt.Errorf("%w (%s is not a socket)", ErrStdinImpostor, path)
	}
	c, err := dialUnix(path)
	if err != nil {
		return WriteReply{}, fmt.Errorf("%w: %v", ErrStdinUnreachable, err)
	}
	defer c.Close()
	if pid, err := peerPID(c); err != nil || pid != supervisorPID {
		return WriteReply{}, fmt.Errorf("%w (peer pid %d, supervisor pid %d)", ErrStdinImpostor, pid, supervisorPID)
	}
	c.SetDeadline(time.Now().Add(15 * time.Second))
	if err := json.NewEncoder(c).Encode(WriteRequest{Data: data, Close: closeIt}); err != nil {
		return WriteReply{}, fmt.Errorf("sending to supervisor: %w", err)
	}
	var reply WriteReply
	line, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil {
		return WriteReply{}, fmt.Errorf("reading supervisor reply: %w", err)
	}
	if err := json.Unmarshal(line, &reply); err != nil {
		return WriteReply{}, fmt.Errorf("bad supervisor reply: %w", err)
	}
	if reply.Error != "" {
		if reply.Closed && reply.Written == 0 {
			return reply, ErrStdinClosed
		}
		return reply, errors.New(reply.Error)
	}
	return reply, nil
}
