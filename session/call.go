package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agent-box/agent-box/wire"
)

// Answer is the box's answer to a request: its result, or its JSON-RPC
// error (a protocol fault; a tool's failure is a result with isError).
type Answer struct {
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// kind is how a tool call may be re-sent after a drop.
type kind int

const (
	mutation kind = iota // re-sent only with a request id the box honours
	read                 // re-sent as it was
	waitMS               // re-sent with the time it has left
)

// kinds are agent-box's tools that may be re-sent freely. Any other tool,
// including one a newer box adds, is treated as a mutation.
var kinds = map[string]kind{
	"process_list": read,
	"tail_log":     waitMS,
	"process_wait": waitMS,
}

// maxSends bounds the sends of one call that reached a transport which
// then died: a call whose every send ends its transport (an answer too
// large to read, a box that crashes on it) is not re-sent for ever.
const maxSends = 32

// maxBusy bounds the re-sends of a repeat that the box answers busy: the
// first try of its request id is still in progress on an agent-box that
// has not seen the drop yet (a link cut without a reset).
const maxBusy = 3

// Call sends a request other than tools/call (tools/list, ping) and
// returns the box's answer, re-sending it as it was after a drop.
func (s *Session) Call(ctx context.Context, method string, params json.RawMessage) (Answer, error) {
	for sends := 0; ; {
		l, err := s.link(ctx)
		if err != nil {
			return Answer{}, err
		}
		if sends == maxSends {
			return Answer{}, s.droppedTooOften(method)
		}
		ans, err := s.send(ctx, l, method, params)
		switch {
		case errors.Is(err, errNotSent):
			continue
		case errors.Is(err, errDropped):
			sends++
			continue
		}
		return ans, err
	}
}

func (s *Session) droppedTooOften(what string) error {
	return fmt.Errorf("%w: %s: the connection dropped under %s %d times", ErrUnreachable, s.box.Name, what, maxSends)
}

// send sends one request on l and waits for its answer. When ctx ends
// first, the box is told the request is cancelled.
func (s *Session) send(ctx context.Context, l *link, method string, params json.RawMessage) (Answer, error) {
	id := s.nextID()
	msg := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if len(params) > 0 {
		msg["params"] = params
	}
	line, err := json.Marshal(msg)
	if err != nil {
		return Answer{}, fmt.Errorf("%s: %w", method, err)
	}
	raw, err := l.c.call(ctx, id, line)
	if err != nil {
		if ctx.Err() != nil {
			cancel, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled",
				"params": map[string]any{"requestId": id, "reason": "the caller cancelled"}})
			_ = l.c.send(cancel)
		}
		return Answer{}, err
	}
	var a Answer
	if err := json.Unmarshal(raw, &a); err != nil {
		return Answer{}, fmt.Errorf("%s: the box's answer is not JSON-RPC: %w", method, err)
	}
	return a, nil
}

// CallTool sends a tools/call (params as a client gave them) and returns
// the box's answer. After a drop it re-sends the call as its kind allows
// (see the package comment); the caller sees no error for a drop a redial
// heals. progress, if not nil, receives the call's progress notifications
// (their progress counted from the first send, not the re-send).
func (s *Session) CallTool(ctx context.Context, params json.RawMessage, progress func(line []byte)) (Answer, error) {
	var p map[string]json.RawMessage
	if err := json.Unmarshal(params, &p); err != nil {
		return Answer{}, fmt.Errorf("tools/call: params must be an object: %w", err)
	}
	var name string
	_ = json.Unmarshal(p["name"], &name)
	k, known := kinds[name]
	if !known {
		k = mutation
	}
	args := p["arguments"] // as given: a re-sent wait's time is reckoned from it
	route := s.route(p, progress)
	defer route.end()
	began := time.Now()
	// A request id the client gave is kept: it is the client's to repeat
	// (as the box's busy answer tells it to).
	requestID := metaString(p, wire.RequestMeta)
	sent := false // a send of this call may have reached a box
	busy := 0
	for sends := 0; ; {
		l, err := s.link(ctx)
		if err != nil {
			if sent && k == mutation {
				// Never "unreachable, retryable" for a change that may
				// have been made: a retry would make it again.
				return Answer{}, s.outcomeUnknown(name, err)
			}
			return Answer{}, err
		}
		if k == mutation {
			switch {
			case !sent && requestID == "" && l.safeRepeat:
				requestID = newRequestID()
				setMeta(p, wire.RequestMeta, requestID)
			case sent && (requestID == "" || !l.safeRepeat):
				return Answer{}, s.outcomeUnknown(name, nil)
			}
		}
		if sent && k == waitMS {
			p["arguments"] = args
			timeLeft(p, name, time.Since(began), route.token != nil)
		}
		if sends == maxSends {
			if sent && k == mutation {
				return Answer{}, s.outcomeUnknown(name, s.droppedTooOften(name))
			}
			return Answer{}, s.droppedTooOften(name)
		}
		route.rebase(time.Since(began))
		body, err := json.Marshal(p)
		if err != nil {
			return Answer{}, fmt.Errorf("tools/call: %w", err)
		}
		ans, err := s.send(ctx, l, "tools/call", body)
		switch {
		case errors.Is(err, errNotSent):
			continue
		case errors.Is(err, errDropped):
			sent = true
			sends++
			continue
		case err != nil:
			return Answer{}, err
		}
		if sent && k == mutation && busy < maxBusy && isBusy(ans) {
			busy++
			continue
		}
		return ans, nil
	}
}

// isBusy says whether an answer is a tool error with code busy.
func isBusy(a Answer) bool {
	res, err := a.toolResult("")
	if err != nil {
		return false
	}
	f := res.failure("")
	return f != nil && f.Err.Code == wire.Busy
}

// toolResult is the part of a tools/call result the session reads.
type toolResult struct {
	IsError           bool            `json:"isError"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	Content           []struct {
		Text string `json:"text"`
	} `json:"content"`
}

func (a Answer) toolResult(tool string) (toolResult, error) {
	var res toolResult
	if err := json.Unmarshal(a.Result, &res); err != nil {
		return res, fmt.Errorf("%s: the box's result is not a tool's: %w", tool, err)
	}
	return res, nil
}

// ToolError is a tool's failure as the box said it: its structured error
// (wire.Error; an older box's failures have none) and its text.
type ToolError struct {
	Tool string
	Err  wire.Error
	Text string
}

func (e *ToolError) Error() string {
	if e.Err.Message != "" {
		return e.Tool + ": " + e.Err.Message
	}
	return e.Tool + ": " + e.Text
}

// failure is the result's failure, or nil when the call succeeded.
func (r toolResult) failure(tool string) *ToolError {
	if !r.IsError {
		return nil
	}
	te := &ToolError{Tool: tool}
	var sc struct {
		Error wire.Error `json:"error"`
	}
	if json.Unmarshal(r.StructuredContent, &sc) == nil {
		te.Err = sc.Error
	}
	for _, c := range r.Content {
		te.Text += c.Text
	}
	return te
}

// metaString is a string in the call's _meta, or "".
func metaString(p map[string]json.RawMessage, key string) string {
	var meta map[string]json.RawMessage
	var v string
	if json.Unmarshal(p["_meta"], &meta) != nil || json.Unmarshal(meta[key], &v) != nil {
		return ""
	}
	return v
}

func (s *Session) outcomeUnknown(tool string, cause error) error {
	msg := fmt.Sprintf("the connection to %s dropped after %s was sent; whether it was applied is unknown: read the log", s.box.Name, tool)
	if cause != nil {
		return fmt.Errorf("%w: %s (%w)", ErrOutcomeUnknown, msg, cause)
	}
	return fmt.Errorf("%w: %s", ErrOutcomeUnknown, msg)
}

func newRequestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// setMeta sets one key of the call's _meta, keeping the others (a
// progress token).
func setMeta(p map[string]json.RawMessage, key, value string) {
	meta := map[string]json.RawMessage{}
	_ = json.Unmarshal(p["_meta"], &meta)
	v, _ := json.Marshal(value)
	meta[key] = v
	p["_meta"], _ = json.Marshal(meta)
}

// timeLeft rewrites a wait's bound to what is left of it after elapsed:
// process_wait's timeout_ms (the box's default when not given, its most
// with a progress token, cut as the box cuts a wait without one),
// tail_log's wait_ms.
func timeLeft(p map[string]json.RawMessage, tool string, elapsed time.Duration, watched bool) {
	args := map[string]json.RawMessage{}
	_ = json.Unmarshal(p["arguments"], &args)
	field := "wait_ms"
	if tool == "process_wait" {
		field = "timeout_ms"
	}
	var ms int64
	// null is "not given", as the box reads it.
	given := string(args[field]) != "null" && json.Unmarshal(args[field], &ms) == nil
	switch {
	case tool == "process_wait" && !given && watched:
		ms = wire.WaitMaxMS
	case tool == "process_wait" && !given:
		ms = wire.WaitDefaultMS
	case !given:
		return // tail_log without wait_ms does not wait
	}
	if tool == "process_wait" && !watched {
		ms = min(ms, wire.WaitUnwatchedMS)
	}
	// until and idle_ms need a wait: the box refuses them with wait_ms 0.
	least := int64(0)
	if tool == "tail_log" && (hasValue(args["until"]) || hasValue(args["idle_ms"])) {
		least = 1
	}
	ms = max(least, ms-elapsed.Milliseconds())
	args[field], _ = json.Marshal(ms)
	p["arguments"], _ = json.Marshal(args)
}

func hasValue(v json.RawMessage) bool { return len(v) > 0 && string(v) != "null" }
