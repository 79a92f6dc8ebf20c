package session

import (
	"bytes"
	"encoding/json"
	"sync"
	"time"
)

// progressRoute carries one call's progress notifications to its caller.
// The box counts a wait's progress in seconds from when it got the call;
// a re-sent call starts again at zero, so the route adds the time between
// the first send and the re-send: the caller's progress only grows, as
// MCP requires of one token.
type progressRoute struct {
	s     *Session
	token json.RawMessage // nil: the call asked for no progress
	key   string
	fn    func([]byte)

	mu   sync.Mutex
	base float64 // seconds before the current send
	last float64
	sent bool
}

func (s *Session) route(p map[string]json.RawMessage, fn func([]byte)) *progressRoute {
	r := &progressRoute{s: s, fn: fn}
	var meta struct {
		Token json.RawMessage `json:"progressToken"`
	}
	if json.Unmarshal(p["_meta"], &meta) != nil || len(meta.Token) == 0 || string(meta.Token) == "null" || fn == nil {
		return r
	}
	r.token, r.key = meta.Token, tokenKey(meta.Token)
	s.mu.Lock()
	s.calls[r.key] = r
	s.mu.Unlock()
	return r
}

func (r *progressRoute) end() {
	if r.token == nil {
		return
	}
	r.s.mu.Lock()
	if r.s.calls[r.key] == r {
		delete(r.s.calls, r.key)
	}
	r.s.mu.Unlock()
}

func (r *progressRoute) rebase(elapsed time.Duration) {
	r.mu.Lock()
	r.base = elapsed.Seconds()
	r.mu.Unlock()
}

// forward passes on one progress notification of the call's, its progress
// shifted by the time before the current send.
func (r *progressRoute) forward(msg map[string]json.RawMessage, params map[string]json.RawMessage) {
	var progress float64
	if json.Unmarshal(params["progress"], &progress) != nil {
		return
	}
	r.mu.Lock()
	progress += r.base
	if r.sent && progress <= r.last {
		r.mu.Unlock()
		return
	}
	r.last, r.sent = progress, true
	r.mu.Unlock()
	params["progress"], _ = json.Marshal(progress)
	params["progressToken"] = r.token // the client's own bytes
	msg["params"], _ = json.Marshal(params)
	line, err := json.Marshal(msg)
	if err == nil {
		r.s.deliver(func() { r.fn(line) })
	}
}

// tokenKey is a progress token as the box and the client both spell it:
// the box decodes the token and encodes it again (a number as a float64,
// "<" as \u003c), so the bytes it echoes may not be the client's.
func tokenKey(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if e.Encode(v) != nil {
		return string(raw)
	}
	return b.String()
}

// deliver hands a notification to the caller's function on the session's
// delivery goroutine, never on the transport's reader: a caller slow to
// take it (a client that stopped reading its stdout) must not stall the
// answers behind it, pings' included. Progress is advisory: when too many
// wait, the newest is dropped.
func (s *Session) deliver(fn func()) {
	select {
	case s.notes <- fn:
	default:
	}
}

// deliverNotes runs the delivery goroutine until the session ends.
func (s *Session) deliverNotes() {
	for {
		select {
		case fn := <-s.notes:
			fn()
		case <-s.done:
			return
		}
	}
}

// note takes a message from the box that is not an answer: a call's
// progress goes to that call; anything else to Options.Notify.
func (s *Session) note(line []byte) {
	var msg map[string]json.RawMessage
	if json.Unmarshal(line, &msg) != nil {
		return
	}
	var method string
	_ = json.Unmarshal(msg["method"], &method)
	if _, isRequest := msg["id"]; isRequest {
		return // agent-box asks its client nothing (no sampling, no roots)
	}
	if method == "notifications/progress" {
		var params map[string]json.RawMessage
		if json.Unmarshal(msg["params"], &params) == nil {
			s.mu.Lock()
			r := s.calls[tokenKey(params["progressToken"])]
			s.mu.Unlock()
			if r != nil {
				r.forward(msg, params)
			}
		}
		return
	}
	if s.opt.Notify != nil {
		s.deliver(func() { s.opt.Notify(line) })
	}
}
