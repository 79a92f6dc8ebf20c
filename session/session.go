// Package session is the local side's connection to one box: an MCP
// session over a transport command (ssh, or any command whose stdin and
// stdout are the box's agent-box: docker exec -i, kubectl exec -i) that
// redials underneath its user when the transport dies, and re-sends what
// was in flight so that the caller sees no drop a redial heals.
//
// What is re-sent, and how (docs/architecture/guarantees.md, "What a drop
// can lose"):
//   - Reads and waits (tail_log, process_wait, process_list, and every
//     method other than tools/call) are sent again as they were, a wait
//     with the time it has left; progress goes on under the caller's token.
//   - Mutations are sent again only to a box that applies a request id at
//     most once (wire.SafeRepeat): the session gives each one an id in
//     _meta before its first send. Against a box without it, a mutation
//     whose answer was lost fails with ErrOutcomeUnknown.
//
// It imports nothing of the box side: it speaks to agent-box only through
// MCP and package wire.
package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agent-box/agent-box/wire"
)

// Sentinels callers branch on.
var (
	// ErrUnreachable: the box could not be reached (the error says why, in
	// the transport's own words).
	ErrUnreachable = errors.New("box unreachable")
	// ErrOutcomeUnknown: a mutation was sent, the connection dropped before
	// its answer, and the box cannot say whether it applied it.
	ErrOutcomeUnknown = errors.New("outcome unknown")
)

// Options tune a Session; the zero value serves.
type Options struct {
	// Stderr receives what the transport writes on its stderr (ssh's
	// warnings), as it comes. Nil discards it.
	Stderr io.Writer
	// Notify receives the box's notifications that no call of this session
	// claims (a call's progress goes to that call).
	Notify func(line []byte)
	// Dialled receives the box's answer to initialize at every dial that
	// succeeds (an agent-box upgraded on the box answers differently).
	Dialled func(initResult json.RawMessage)
	// GiveUp bounds how long a call waits for a box that was reached
	// before and cannot be reached now (default 20 s: under the minute
	// clients give a request). A box never reached fails a call at its
	// first failed dial.
	GiveUp time.Duration
	// DialTimeout bounds one dial: the transport's start and the box's
	// answer to initialize (default 30 s).
	DialTimeout time.Duration
	// MaxBackoff bounds the pause between two failed dials (default 5 s).
	MaxBackoff time.Duration
	// Keepalive is how often the session pings the box while connected; a
	// ping unanswered for as long again ends the transport, which is then
	// dialled anew. It notices a transport that hangs without exiting (a
	// docker exec whose daemon went away; ssh notices its own link).
	// Default 10 s; negative: never.
	Keepalive time.Duration
}

// Session is one box, reached again and again.
type Session struct {
	box  Box
	opt  Options
	init json.RawMessage // the initialize params sent at every dial

	ids atomic.Int64

	mu      sync.Mutex
	cur     *link         // nil while not connected
	changed chan struct{} // closed (and replaced) when cur or lastErr changes
	lastErr error         // the last dial's failure; nil once a dial succeeded
	reached bool          // a dial has succeeded once
	dials   int           // failed dials so far
	calls   map[string]*progressRoute

	kick  chan struct{} // a caller waits: dial now rather than after the backoff
	notes chan func()   // notifications for callers (deliver)
	stop  context.CancelFunc
	done  chan struct{}
}

// link is one live transport with what its box said at initialize.
type link struct {
	c          *conn
	result     json.RawMessage // the box's initialize result
	safeRepeat bool
}

// Open starts a session to box: it dials at once and again whenever the
// transport dies, until Close. initParams are the params of the initialize
// request sent at every dial (a client's own, when connect relays one).
func Open(box Box, initParams json.RawMessage, opt Options) *Session {
	if opt.GiveUp <= 0 {
		opt.GiveUp = 20 * time.Second
	}
	if opt.DialTimeout <= 0 {
		opt.DialTimeout = 30 * time.Second
	}
	if opt.MaxBackoff <= 0 {
		opt.MaxBackoff = 5 * time.Second
	}
	if opt.Keepalive == 0 {
		opt.Keepalive = 10 * time.Second
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &Session{box: box, opt: opt, init: initParams, changed: make(chan struct{}),
		calls: map[string]*progressRoute{}, kick: make(chan struct{}, 1), notes: make(chan func(), 256), stop: stop, done: make(chan struct{})}
	go s.keep(ctx)
	go s.deliverNotes()
	return s
}

// Close ends the session: the transport gets EOF (the box finishes what is
// in flight), and no dial follows.
func (s *Session) Close() {
	s.stop()
	<-s.done
}

// Box is the box this session reaches.
func (s *Session) Box() Box { return s.box }

// keep is the session's one actor: it dials, publishes the link, waits for
// the transport's death, and dials again, with a backoff between failures.
func (s *Session) keep(ctx context.Context) {
	defer close(s.done)
	backoff := time.Duration(0)
	for {
		if backoff > 0 {
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			case <-s.kick:
				t.Stop()
			}
		}
		if ctx.Err() != nil {
			return
		}
		l, err := s.dial(ctx)
		if err != nil {
			s.publish(nil, err)
			backoff = min(max(2*backoff, 100*time.Millisecond), s.opt.MaxBackoff)
			continue
		}
		s.publish(l, nil)
		if s.opt.Dialled != nil {
			s.opt.Dialled(l.result)
		}
		up := time.Now()
		alive, stopPings := s.keepalive(l)
		select {
		case <-l.c.done:
		case <-alive:
			l.c.kill()
			<-l.c.done
		case <-ctx.Done():
			s.publish(nil, nil)
			l.c.close()
			stopPings()
			return
		}
		stopPings()
		s.publish(nil, nil)
		// A box that answers and dies at once is not redialled in a loop.
		if time.Since(up) > time.Second {
			backoff = 0
		} else {
			backoff = min(max(2*backoff, 100*time.Millisecond), s.opt.MaxBackoff)
		}
	}
}

// keepalive watches that the box on l answers: every Keepalive without a
// byte from it, it pings; dead is closed when a ping had no answer and no
// byte came for Keepalive more (a slow link carrying a large answer is
// alive, though the ping's answer waits behind it). stop ends the watch.
func (s *Session) keepalive(l *link) (dead <-chan struct{}, stop func()) {
	d := make(chan struct{})
	if s.opt.Keepalive < 0 {
		return d, func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	quiet := func() bool { return time.Since(time.Unix(0, l.c.lastRead.Load())) >= s.opt.Keepalive }
	go func() {
		defer close(done)
		t := time.NewTicker(s.opt.Keepalive)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if !quiet() {
				continue
			}
			// The ping is sent on a goroutine of its own: a write blocked
			// on a box that stopped reading must not block the watch.
			answered := make(chan error, 1)
			go func() {
				_, err := s.send(ctx, l, "ping", nil)
				answered <- err
			}()
			for waiting := true; waiting; {
				select {
				case <-ctx.Done():
					return
				case err := <-answered:
					if err != nil {
						return // the transport died: keep sees it
					}
					waiting = false
				case <-t.C:
					if quiet() {
						close(d)
						return
					}
				}
			}
		}
	}()
	return d, func() { cancel(); <-done }
}

func (s *Session) publish(l *link, dialErr error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur = l
	switch {
	case l != nil:
		s.reached, s.lastErr = true, nil
	case dialErr != nil:
		s.lastErr = dialErr
		s.dials++
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

// dial starts a transport and initializes the box's MCP session on it.
func (s *Session) dial(ctx context.Context) (*link, error) {
	c, err := start(s.box.Argv, s.opt.Stderr, s.note)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.opt.DialTimeout)
	defer cancel()
	id := s.nextID()
	req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "initialize", "params": s.init})
	ans, err := c.call(ctx, id, req)
	if err == nil {
		var r struct {
			Result json.RawMessage `json:"result"`
			Error  *rpcError       `json:"error"`
		}
		switch err = json.Unmarshal(ans, &r); {
		case err != nil:
		case r.Error != nil:
			err = fmt.Errorf("initialize: %s", r.Error.Message)
		default:
			l := &link{c: c, result: r.Result, safeRepeat: hasSafeRepeat(r.Result)}
			if err = c.send([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); err == nil {
				return l, nil
			}
		}
	}
	c.kill()
	<-c.exited
	if errors.Is(err, errDropped) || errors.Is(err, errNotSent) {
		err = fmt.Errorf("%s exited without answering (%s)", s.box.Argv[0], c.cmd.ProcessState)
	}
	if words := c.stderr.words(); words != "" {
		// The transport's own words first: ssh's say what went wrong.
		return nil, fmt.Errorf("%s (%w)", words, err)
	}
	return nil, err
}

func hasSafeRepeat(initResult json.RawMessage) bool {
	var r struct {
		Capabilities struct {
			Experimental map[string]json.RawMessage `json:"experimental"`
		} `json:"capabilities"`
	}
	if json.Unmarshal(initResult, &r) != nil {
		return false
	}
	_, ok := r.Capabilities.Experimental[wire.SafeRepeat]
	return ok
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (s *Session) nextID() json.RawMessage {
	return json.RawMessage(strconv.Quote("c" + strconv.FormatInt(s.ids.Add(1), 10)))
}

// link waits for a live link. A box never reached fails at its first
// failed dial after the wait began; a box reached before gets GiveUp.
func (s *Session) link(ctx context.Context) (*link, error) {
	giveUp := time.NewTimer(s.opt.GiveUp)
	defer giveUp.Stop()
	s.mu.Lock()
	startDials := s.dials
	s.mu.Unlock()
	kicked := false
	for {
		s.mu.Lock()
		l, changed, lastErr, reached, dials := s.cur, s.changed, s.lastErr, s.reached, s.dials
		s.mu.Unlock()
		if l != nil && !l.c.dead() {
			return l, nil
		}
		if !reached && dials > startDials {
			return nil, s.unreachable(lastErr)
		}
		if !kicked {
			// Once: a caller cuts the backoff short for one dial, not for
			// every dial that fails while it waits.
			kicked = true
			select {
			case s.kick <- struct{}{}:
			default:
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-giveUp.C:
			return nil, s.unreachable(lastErr)
		case <-s.done:
			return nil, fmt.Errorf("%w: %s: the session is closed", ErrUnreachable, s.box.Name)
		}
	}
}

func (s *Session) unreachable(err error) error {
	if err == nil {
		return fmt.Errorf("%w: %s: no answer for %s", ErrUnreachable, s.box.Name, s.opt.GiveUp)
	}
	return fmt.Errorf("%w: %s: %w", ErrUnreachable, s.box.Name, err)
}

// Initialize waits for the box and returns its answer to initialize.
func (s *Session) Initialize(ctx context.Context) (json.RawMessage, error) {
	l, err := s.link(ctx)
	if err != nil {
		return nil, err
	}
	return l.result, nil
}

// Drop kills the live transport, as a dropped link would (for tests and
// for a caller that saw the link hang). The session redials.
func (s *Session) Drop() {
	s.mu.Lock()
	l := s.cur
	s.mu.Unlock()
	if l != nil {
		l.c.kill()
	}
}
