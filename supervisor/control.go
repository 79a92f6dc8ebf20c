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

// The control socket takes process_kill's requests. The supervisor carries
// out the whole escalation, the signal, the grace and the SIGKILL, with
// the timer timeout_s uses (escalation): agent-box dies with its SSH
// connection, and a SIGKILL it was still to send after the grace would die
// with it, leaving a run that ignores TERM alive. The supervisor outlives
// every connection, and as the run's subreaper it knows all its processes.

// ControlRequest is one request on the control socket; one per connection.
type ControlRequest struct {
	Kill *KillRequest `json:"kill,omitempty"`
}

// KillRequest asks the supervisor to send Signal to every process of the
// run and, when GraceMS is above 0 and the signal is not SIGKILL, to send
// SIGKILL to those left when the grace ends.
type KillRequest struct {
	Signal  int   `json:"signal"`
	GraceMS int64 `json:"grace_ms,omitempty"`
}

// KillReply is the supervisor's first answer, once the signal is sent.
type KillReply struct {
	// Group is the process group signalled, 0 when the group was not
	// signalled (its leader reaped and no process of the run left in it).
	Group int `json:"group,omitempty"`
	// Outside are the processes of the run outside its group (they made a
	// group or a session of their own), signalled one by one.
	Outside []int `json:"outside,omitempty"`
	// Armed: a SIGKILL follows when the grace ends, and a KillOutcome
	// line follows this one.
	Armed bool   `json:"armed,omitempty"`
	Error string `json:"error,omitempty"`
}

// Signalled reports whether the signal reached any process.
func (r KillReply) Signalled() bool { return r.Group != 0 || len(r.Outside) > 0 }

// KillOutcome is the supervisor's second answer to an armed kill: sent
// when the grace ended, or earlier when the last process of the run was
// reaped.
type KillOutcome struct {
	// Escalated: processes of the run were left at the grace's end and
	// were sent SIGKILL.
	Escalated bool `json:"escalated,omitempty"`
}

// ErrNoControl means no supervisor took the kill request, so it signalled
// nothing: the run's supervisor predates the control socket, has ended, or
// the socket is not its.
var ErrNoControl = errors.New("the run's supervisor takes no kill request")

// ErrKillNoReply means the kill request was sent and not answered: it is
// not known whether the supervisor signalled anything.
var ErrKillNoReply = errors.New("no reply from the run's supervisor to the kill request")

// ErrNoOutcome means the supervisor took a kill request and then said
// nothing more: whether it sent the SIGKILL is not known (it died, or
// ended with its run).
var ErrNoOutcome = errors.New("no word from the run's supervisor after the kill")

// controlReplyWait bounds the wait for the first answer: the escalation
// takes an order between two turns of its loop, whose longest is a walk
// of /proc for the run's processes (signalRun).
const controlReplyWait = 10 * time.Second

// killOrder is a kill request as the handler hands it to the escalation,
// which alone holds the grace and knows whether the leader is reaped.
type killOrder struct {
	sig     unix.Signal
	grace   time.Duration
	reply   chan KillReply   // buffered: the escalation never waits for the handler
	outcome chan KillOutcome // buffered likewise; only for an armed kill
}

type controlServer struct {
	ln       net.Listener
	orders   chan killOrder
	done     chan struct{} // closed once the escalation takes no more orders
	handlers sync.WaitGroup
	accepted chan struct{} // closed when accept returns
	closed   chan struct{} // closed once Close is done
	stopOnce sync.Once
	once     sync.Once
}

// serveControl listens on the run's ControlSocket in runDir.
func serveControl(runDir string) (*controlServer, error) {
	path := filepath.Join(runDir, ControlSocket)
	os.Remove(path)
	ln, err := listenUnix(path)
	if err != nil {
		return nil, err
	}
	s := &controlServer{ln: ln, orders: make(chan killOrder), done: make(chan struct{}), accepted: make(chan struct{}), closed: make(chan struct{})}
	go acceptOn(s.ln, &s.handlers, s.accepted, s.handle)
	return s, nil
}

// execute is the control socket as a service of the run (supervise): it is
// served from before the start report, so that a process_kill right after
// process_start finds it, until interrupt closes it. It does not return
// before that, even if accepting fails: a service that returned would end
// the run's other services with it.
func (s *controlServer) execute() error {
	<-s.closed
	return nil
}

// interrupt closes the socket (Close); supervise does it after the
// escalation stopped, whose last outcomes the handlers then send.
func (s *controlServer) interrupt(error) { s.Close() }

// ordersOf is the channel the escalation takes kill orders from; nil
// (never ready) for a nil server.
func (s *controlServer) ordersOf() <-chan killOrder {
	if s == nil {
		return nil
	}
	return s.orders
}

func (s *controlServer) handle(c net.Conn) {
	defer s.handlers.Done()
	defer c.Close()
	c.SetDeadline(time.Now().Add(controlReplyWait))
	enc := json.NewEncoder(c)
	var req ControlRequest
	if err := json.NewDecoder(io.LimitReader(c, 64<<10)).Decode(&req); err != nil {
		enc.Encode(KillReply{Error: fmt.Sprintf("bad request: %v", err)})
		return
	}
	if req.Kill == nil || req.Kill.Signal <= 0 {
		enc.Encode(KillReply{Error: "bad request: no kill, or no signal to send"})
		return
	}
	o := killOrder{
		sig:     unix.Signal(req.Kill.Signal),
		grace:   time.Duration(max(req.Kill.GraceMS, 0)) * time.Millisecond,
		reply:   make(chan KillReply, 1),
		outcome: make(chan KillOutcome, 1),
	}
	// Bounded as the client's wait is: an order the escalation takes
	// after the client gave up (and signalled the run itself) would
	// signal it twice.
	busy := time.NewTimer(controlReplyWait)
	defer busy.Stop()
	select {
	case s.orders <- o:
	case <-s.done:
		enc.Encode(KillReply{Error: "the run has ended"})
		return
	case <-busy.C:
		enc.Encode(KillReply{Error: "the supervisor did not take the order in time"})
		return
	}
	r := <-o.reply
	if enc.Encode(r) != nil || !r.Armed {
		return
	}
	c.SetDeadline(time.Now().Add(o.grace + controlReplyWait))
	t := time.NewTimer(o.grace + controlReplyWait)
	defer t.Stop()
	select {
	case out := <-o.outcome:
		enc.Encode(out)
	case <-t.C:
	}
}

// Close takes no more orders and stops listening, then waits a moment
// (closeWait) for the handlers to send what they have to send: the
// outcomes of armed kills, which the run's end has just settled.
func (s *controlServer) Close() {
	if s == nil {
		return
	}
	s.once.Do(func() {
		s.stopOrders()
		s.ln.Close()
		<-s.accepted
		done := make(chan struct{})
		go func() { s.handlers.Wait(); close(done) }()
		t := time.NewTimer(closeWait)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
		}
		close(s.closed)
	})
}

// stopOrders makes the requests still to come answer that the run has
// ended: the escalation that carried them out is gone.
func (s *controlServer) stopOrders() { s.stopOnce.Do(func() { close(s.done) }) }

// Killing is a kill request a supervisor took: the signal is sent.
type Killing struct {
	KillReply
	c     net.Conn
	r     *bufio.Reader
	grace time.Duration
}

// Kill asks the supervisor of the run in runDir, which must be process
// supervisorPID (checked by SO_PEERCRED, as for stdin), to send sig to
// every process of the run and, with a grace, SIGKILL to those left when
// it ends. Any error wraps ErrNoControl (nothing was signalled by the
// supervisor) or ErrKillNoReply (the request was sent; it is not known
// whether it was carried out). The caller closes the Killing.
func Kill(runDir string, supervisorPID int, sig unix.Signal, grace time.Duration) (*Killing, error) {
	c, err := dialSupervisor(runDir, ControlSocket, supervisorPID)
	if errors.Is(err, ErrStdinImpostor) {
		return nil, fmt.Errorf("%w: %s is not served by the run's supervisor (pid %d)", ErrNoControl, ControlSocket, supervisorPID)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoControl, err)
	}
	c.SetDeadline(time.Now().Add(controlReplyWait + replySlack))
	if err := json.NewEncoder(c).Encode(ControlRequest{Kill: &KillRequest{Signal: int(sig), GraceMS: grace.Milliseconds()}}); err != nil {
		c.Close()
		return nil, fmt.Errorf("%w: sending the request: %v", ErrKillNoReply, err)
	}
	k := &Killing{c: c, r: bufio.NewReader(c), grace: grace}
	if err := k.read(&k.KillReply); err != nil {
		c.Close()
		return nil, fmt.Errorf("%w: %v", ErrKillNoReply, err)
	}
	if k.Error != "" {
		c.Close()
		// The supervisor refused before it signalled anything.
		return nil, fmt.Errorf("%w: %s", ErrNoControl, k.Error)
	}
	return k, nil
}

// Wait waits for the outcome of an armed kill: whether the supervisor sent
// SIGKILL when the grace ended. An error wraps ErrNoOutcome.
func (k *Killing) Wait() (escalated bool, err error) {
	if !k.Armed {
		return false, nil
	}
	k.c.SetDeadline(time.Now().Add(k.grace + controlReplyWait + replySlack))
	var out KillOutcome
	if err := k.read(&out); err != nil {
		return false, fmt.Errorf("%w: %v", ErrNoOutcome, err)
	}
	return out.Escalated, nil
}

// Close ends the request; an armed kill is carried out all the same.
func (k *Killing) Close() error { return k.c.Close() }

func (k *Killing) read(v any) error {
	line, err := k.r.ReadBytes('\n')
	if err != nil {
		return err
	}
	return json.Unmarshal(line, v)
}
