package session

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// maxMessage bounds one message from a box: a tail_log window is at most a
// few MiB of JSON; a longer line is a broken box.
const maxMessage = 64 << 20

// errDropped is a transport's death while a request was in flight: it may
// have reached the box. errNotSent is its death before any of the request
// was written.
var (
	errDropped = errors.New("the connection dropped")
	errNotSent = errors.New("the connection dropped before the request was sent")
)

// conn is one transport: a process whose stdin and stdout are the box's
// agent-box, carrying MCP's stdio framing (one JSON-RPC message a line).
//
// mcp-go's client/transport.Stdio would carry the messages, but connect
// relays them: it needs each message's bytes as the box wrote them (Stdio
// re-marshals notifications), to learn of a transport's death when no
// request is in flight (Stdio's done channel is private), and to kill a
// transport it gave up on at once, with the process group ssh's
// ProxyCommand or docker's client may have started (Stdio's Close waits
// seconds for a graceful exit first).
type conn struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *lastLines

	wmu sync.Mutex // one message at a time on stdin

	mu      sync.Mutex
	pending map[string]chan []byte // by the request's id as sent

	done     chan struct{} // closed when stdout ends: the transport is dead
	exited   chan struct{} // closed once the process is reaped
	note     func(line []byte)
	lastRead atomic.Int64 // when bytes last came from the box (UnixNano): the link lives

	reapMu  sync.Mutex
	reaping bool // the process group may be gone: kill no more
}

// start runs argv as a transport. Messages from the box that are not
// answers (notifications, requests) go to note, in order.
func start(argv []string, stderrMirror io.Writer, note func([]byte)) (*conn, error) {
	if len(argv) == 0 {
		return nil, errors.New("no transport command")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	// A process group of its own: killing the transport reaches what it
	// started (an ssh ProxyCommand), and a Ctrl-C meant for the client's
	// terminal does not.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c := &conn{cmd: cmd, stderr: newLastLines(stderrMirror), pending: map[string]chan []byte{},
		done: make(chan struct{}), exited: make(chan struct{}), note: note}
	cmd.Stderr = c.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	c.stdin = stdin
	c.lastRead.Store(time.Now().UnixNano())
	go c.read(&liveReader{r: stdout, c: c})
	return c, nil
}

// liveReader notes when bytes came from the box: a link slow to carry a
// large answer is alive, though a ping waits behind it.
type liveReader struct {
	r io.Reader
	c *conn
}

func (l *liveReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	if n > 0 {
		l.c.lastRead.Store(time.Now().UnixNano())
	}
	return n, err
}

// read routes the box's messages until its stdout ends, then reaps the
// process (Wait closes stdout, so only after the last read).
func (c *conn) read(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 0, 64<<10), maxMessage)
	for sc.Scan() {
		line := bytes.Clone(sc.Bytes())
		var env struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(line, &env) != nil {
			continue // not JSON-RPC: a box's stray output, which MCP forbids
		}
		if env.Method == "" && len(env.ID) > 0 {
			c.mu.Lock()
			ch := c.pending[string(env.ID)]
			delete(c.pending, string(env.ID))
			c.mu.Unlock()
			if ch != nil {
				ch <- line
			}
			continue
		}
		c.note(line)
	}
	close(c.done)
	// A box that closed stdout is done with us: the whole group goes, while
	// the leader, not yet reaped, keeps the group's id from being reused.
	c.reapMu.Lock()
	c.reaping = true
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	c.reapMu.Unlock()
	_ = c.cmd.Wait()
	close(c.exited)
}

// call sends one request (line, whose id is id) and returns the answer's
// line. It ends with errNotSent or errDropped when the transport dies
// first, and with ctx's error when ctx ends first.
func (c *conn) call(ctx context.Context, id json.RawMessage, line []byte) ([]byte, error) {
	ch := make(chan []byte, 1)
	c.mu.Lock()
	c.pending[string(id)] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, string(id))
		c.mu.Unlock()
	}()
	if err := c.send(line); err != nil {
		return nil, err
	}
	select {
	case ans := <-ch:
		return ans, nil
	case <-c.done:
		select { // an answer read just before the end
		case ans := <-ch:
			return ans, nil
		default:
			return nil, errDropped
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// dead says whether the transport has died (its death may not have been
// published yet).
func (c *conn) dead() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// send writes one message. A write that fails ends the transport: a box
// that no longer reads its stdin is of no use, and its stdout may stay
// open.
func (c *conn) send(line []byte) error {
	select {
	case <-c.done:
		return errNotSent
	default:
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	n, err := c.stdin.Write(append(line[:len(line):len(line)], '\n'))
	if err != nil {
		c.kill()
		if n == 0 {
			return errNotSent
		}
		return errDropped
	}
	return nil
}

// kill ends the transport at once: its whole process group, unless it is
// being reaped (its id could then be another group's).
func (c *conn) kill() {
	c.reapMu.Lock()
	if !c.reaping {
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	}
	c.reapMu.Unlock()
	_ = c.stdin.Close()
}

// closeGrace is how long a transport has to exit after EOF on its stdin
// before it is killed.
const closeGrace = 5 * time.Second

// close ends the transport the polite way: EOF on the box's stdin, which
// makes agent-box finish what is in flight and exit, and ssh with it. A
// transport still there after closeGrace is killed.
func (c *conn) close() {
	_ = c.stdin.Close()
	t := time.NewTimer(closeGrace)
	defer t.Stop()
	select {
	case <-c.exited:
	case <-t.C:
		c.kill()
		<-c.exited
	}
}

// lastLines keeps the last lines a transport wrote on stderr (ssh's words
// for why it failed), and mirrors everything to a writer.
type lastLines struct {
	mu     sync.Mutex
	buf    []byte
	mirror io.Writer
}

const stderrKeep = 4 << 10

func newLastLines(mirror io.Writer) *lastLines { return &lastLines{mirror: mirror} }

func (l *lastLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mirror != nil {
		_, _ = l.mirror.Write(p)
	}
	l.buf = append(l.buf, p...)
	if len(l.buf) > stderrKeep {
		l.buf = append(l.buf[:0], l.buf[len(l.buf)-stderrKeep:]...)
	}
	return len(p), nil
}

// words is what the transport said last: its last few non-empty lines,
// joined, without ssh's warnings about known hosts being added.
func (l *lastLines) words() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var keep []string
	for _, ln := range strings.Split(string(l.buf), "\n") {
		ln = strings.TrimSpace(strings.TrimSuffix(ln, "\r"))
		if ln == "" || strings.HasPrefix(ln, "Warning: Permanently added") {
			continue
		}
		keep = append(keep, ln)
	}
	if len(keep) > 3 {
		keep = keep[len(keep)-3:]
	}
	return strings.Join(keep, " ")
}
