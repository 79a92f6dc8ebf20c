// Package connect is agent-box connect: the MCP server an agent's client
// starts on the user's machine, which relays every call to a box's
// agent-box through a session that survives the transport's drops.
//
// MCP clients do not restart a stdio server that died (Claude Code's
// issues 43177 and 82746), so the process the client started must outlive
// every ssh connection: connect answers the client itself (initialize with
// the box's own answer, tools/list from the box's list as last fetched,
// ping), and forwards the rest through package session, which redials and
// re-sends what was in flight.
package connect

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"sync"
	"time"

	"github.com/agent-box/agent-box/session"
	"github.com/agent-box/agent-box/wire"
)

// maxLine bounds one message from the client (the box bounds arguments
// far below it).
const maxLine = 64 << 20

// Server relays one client's MCP session to one box.
type Server struct {
	Box     session.Box
	Options session.Options
	// InitWait bounds how long initialize waits for the box's first answer
	// (default 30 s, under the minute clients give a request).
	InitWait time.Duration
	// CacheDir keeps, per box, its last answer to initialize and its tool
	// list (cache.go); "" keeps nothing.
	CacheDir string
	// Channel, if set, makes connect a Claude Code channel (channel.go).
	Channel *Channel
	Log     *log.Logger // connect's own diagnostics (stderr); nil: none
}

// relay is one client connection.
type relay struct {
	srv *Server
	out io.Writer
	wmu sync.Mutex

	mu        sync.Mutex
	sess      *session.Session
	tools     json.RawMessage // the box's tools/list result, once fetched
	cache     *cache
	answered  string                        // the box's version as the client was told at initialize
	kept      cached                        // what the cache holds, or is to
	inflight  map[string]context.CancelFunc // by the client's request id
	channeled bool                          // the channel's loop has started
	wg        sync.WaitGroup
}

// Serve relays the client's messages from in, and the answers to out,
// until in ends or ctx does; then it lets the box finish what is in flight
// (the transport gets EOF) and returns.
func (srv *Server) Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	r := &relay{srv: srv, out: out, inflight: map[string]context.CancelFunc{}, cache: cacheFor(srv.CacheDir, srv.Box)}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	read := make(chan error, 1)
	go func() { read <- r.read(ctx, in) }()
	var err error
	select {
	case err = <-read:
	case <-ctx.Done():
		err = ctx.Err()
	}
	r.mu.Lock()
	sess := r.sess
	r.mu.Unlock()
	if sess != nil {
		sess.Close()
	}
	cancel()
	r.wg.Wait()
	return err
}

type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

func (r *relay) read(ctx context.Context, in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	for sc.Scan() {
		if ctx.Err() != nil {
			return ctx.Err() // connect is ending: nothing new starts
		}
		var m message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			r.answer(nil, nil, &rpcError{Code: -32700, Message: "parse error: " + err.Error()})
			continue
		}
		isRequest := len(m.ID) > 0 && string(m.ID) != "null"
		switch {
		case m.Method == "":
			// An answer to a request of ours: connect asks the client nothing.
		case !isRequest:
			r.notification(ctx, m)
		default:
			r.request(ctx, m)
		}
	}
	return sc.Err()
}

func (r *relay) notification(ctx context.Context, m message) {
	if m.Method == "notifications/initialized" {
		// Connect initializes the box itself, at every dial. The client
		// may be sent notifications from now on (MCP's lifecycle).
		r.startChannel(ctx)
		return
	}
	if m.Method != "notifications/cancelled" {
		return
	}
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(m.Params, &p) != nil {
		return
	}
	r.mu.Lock()
	cancel := r.inflight[string(p.RequestID)]
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// request serves one request: initialize in order (it opens the session),
// every other on a goroutine of its own, so that a long wait holds up
// nothing.
func (r *relay) request(ctx context.Context, m message) {
	if m.Method == "initialize" {
		r.initialize(ctx, m)
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	r.mu.Lock()
	r.inflight[string(m.ID)] = cancel
	r.mu.Unlock()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer func() {
			r.mu.Lock()
			delete(r.inflight, string(m.ID))
			r.mu.Unlock()
			cancel()
		}()
		r.serve(ctx, m)
	}()
}

func (r *relay) session() *session.Session {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sess
}

func (r *relay) initialize(ctx context.Context, m message) {
	r.mu.Lock()
	if r.sess == nil {
		opt := r.srv.Options
		opt.Dialled = r.dialled
		r.sess = session.Open(r.srv.Box, m.Params, opt)
	}
	sess := r.sess
	r.mu.Unlock()
	wait := r.srv.InitWait
	if wait <= 0 {
		wait = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(m.Params, &p)
	res, err := sess.Initialize(ctx)
	if err == nil {
		r.mu.Lock()
		if old, lerr := r.cache.load(); lerr == nil && old.Asked == p.ProtocolVersion {
			r.kept.Tools = old.Tools
		}
		r.kept.Asked, r.kept.Initialize, r.kept.At = p.ProtocolVersion, res, time.Now().UTC()
		r.saveLocked()
		r.answered = serverVersion(res)
		r.mu.Unlock()
		r.answer(m.ID, r.initAnswer(res), nil)
		return
	}
	r.logf("initialize: %v", err)
	if old, lerr := r.cache.load(); lerr == nil && old.Asked == p.ProtocolVersion {
		// The box is away as the client starts: its tools as last seen,
		// and calls that say why they fail until it is back.
		r.logf("answering initialize and tools/list from what %s said at %s", r.srv.Box.Name, old.At.Format(time.RFC3339))
		r.mu.Lock()
		r.kept, r.tools = old, old.Tools
		r.answered = serverVersion(old.Initialize)
		r.mu.Unlock()
		r.answer(m.ID, r.initAnswer(old.Initialize), nil)
		return
	}
	r.answer(m.ID, nil, &rpcError{Code: -32603, Message: "agent-box connect: " + describe(r.srv.Box, err)})
}

// dialled is told the box's answer at every dial: an agent-box that is not
// the one the client was told of (upgraded on the box, or first reached
// after an answer from the cache) may have other tools, so the tool list
// is fetched anew and the client told it changed.
func (r *relay) dialled(res json.RawMessage) {
	v := serverVersion(res)
	r.mu.Lock()
	changed := r.answered != "" && v != r.answered
	if changed {
		r.answered, r.tools = v, nil
		r.kept.Initialize, r.kept.Tools, r.kept.At = res, nil, time.Now().UTC()
		r.saveLocked()
	}
	r.mu.Unlock()
	if changed {
		r.logf("%s now runs agent-box %s: its tools are listed anew", r.srv.Box.Name, v)
		r.write([]byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`))
	}
}

// serverVersion is serverInfo.version of an answer to initialize.
func serverVersion(res json.RawMessage) string {
	var r struct {
		ServerInfo struct {
			Version string `json:"version"`
		} `json:"serverInfo"`
	}
	_ = json.Unmarshal(res, &r)
	return r.ServerInfo.Version
}

// initAnswer is the client's answer to initialize, from the box's.
func (r *relay) initAnswer(res json.RawMessage) json.RawMessage {
	res = listChanges(res)
	if r.srv.Channel != nil {
		res = withChannel(res)
	}
	return res
}

// listChanges is an answer to initialize that says the tool list may
// change (connect tells the client when the box behind it changed).
func listChanges(res json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	var caps map[string]json.RawMessage
	var tools map[string]any
	if json.Unmarshal(res, &m) != nil || json.Unmarshal(m["capabilities"], &caps) != nil {
		return res
	}
	_ = json.Unmarshal(caps["tools"], &tools)
	if tools == nil {
		tools = map[string]any{}
	}
	tools["listChanged"] = true
	caps["tools"], _ = json.Marshal(tools)
	m["capabilities"], _ = json.Marshal(caps)
	b, err := json.Marshal(m)
	if err != nil {
		return res
	}
	return b
}

// saveLocked writes the cache (r.mu held).
func (r *relay) saveLocked() {
	if err := r.cache.save(r.kept); err != nil {
		r.logf("keeping what %s said: %v", r.srv.Box.Name, err)
	}
}

func (r *relay) serve(ctx context.Context, m message) {
	sess := r.session()
	if sess == nil {
		if m.Method == "ping" {
			r.answer(m.ID, json.RawMessage(`{}`), nil)
			return
		}
		r.answer(m.ID, nil, &rpcError{Code: -32002, Message: "agent-box connect: initialize first"})
		return
	}
	switch m.Method {
	case "ping":
		r.answer(m.ID, json.RawMessage(`{}`), nil)
	case "tools/call":
		ans, err := sess.CallTool(ctx, m.Params, r.write)
		r.forward(ctx, m, ans, err)
	case "tools/list":
		if tools := r.cachedTools(m.Params); tools != nil {
			r.answer(m.ID, tools, nil)
			return
		}
		ans, err := sess.Call(ctx, m.Method, m.Params)
		if err == nil && ans.Error == nil {
			r.mu.Lock()
			r.tools = ans.Result
			if len(r.kept.Initialize) > 0 {
				r.kept.Tools = ans.Result
				r.saveLocked()
			}
			r.mu.Unlock()
		}
		r.forward(ctx, m, ans, err)
	default:
		ans, err := sess.Call(ctx, m.Method, m.Params)
		r.forward(ctx, m, ans, err)
	}
}

// cachedTools is the box's tool list as last fetched, for a tools/list
// without a cursor (agent-box lists every tool on one page).
func (r *relay) cachedTools(params json.RawMessage) json.RawMessage {
	var p struct {
		Cursor *string `json:"cursor"`
	}
	if json.Unmarshal(params, &p) == nil && p.Cursor != nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tools
}

// forward answers the client with the box's answer, or with what went
// wrong: for a tool call a tool error the model reads, with the
// structured error a program branches on.
func (r *relay) forward(ctx context.Context, m message, ans session.Answer, err error) {
	switch {
	case err == nil && ans.Error != nil:
		r.answerRaw(m.ID, "error", ans.Error)
	case err == nil:
		r.answerRaw(m.ID, "result", ans.Result)
	case ctx.Err() != nil:
		// Cancelled by the client (MCP: no answer is due), or connect is
		// ending.
	case m.Method == "tools/call":
		code, retryable := wire.Unreachable, true
		if errors.Is(err, session.ErrOutcomeUnknown) {
			code, retryable = wire.UnknownOutcome, false
		}
		msg := describe(r.srv.Box, err)
		res, _ := json.Marshal(map[string]any{
			"content":           []map[string]string{{"type": "text", "text": msg}},
			"isError":           true,
			"structuredContent": map[string]any{wire.ErrorKey: wire.Error{Code: code, Message: msg, Retryable: retryable}},
		})
		r.answer(m.ID, res, nil)
	default:
		r.answer(m.ID, nil, &rpcError{Code: -32603, Message: "agent-box connect: " + describe(r.srv.Box, err)})
	}
}

// describe says what went wrong in words for the model and the person:
// the box's name and the transport's own words are in err already.
func describe(box session.Box, err error) string {
	switch {
	case errors.Is(err, session.ErrUnreachable), errors.Is(err, session.ErrOutcomeUnknown):
		return err.Error()
	}
	return fmt.Sprintf("%s: %v", box.Name, err)
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (r *relay) answer(id json.RawMessage, result json.RawMessage, e *rpcError) {
	if e != nil {
		b, _ := json.Marshal(e)
		r.answerRaw(id, "error", b)
		return
	}
	r.answerRaw(id, "result", result)
}

func (r *relay) answerRaw(id json.RawMessage, key string, body json.RawMessage) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	// Written as it came from the box: a tail_log window is not parsed and
	// encoded again on its way through.
	line := make([]byte, 0, len(body)+len(id)+32)
	line = append(line, `{"jsonrpc":"2.0","id":`...)
	line = append(line, id...)
	line = append(line, `,"`...)
	line = append(line, key...)
	line = append(line, `":`...)
	line = append(line, body...)
	line = append(line, '}')
	r.write(line)
}

// write sends one message to the client, whole, one a line.
func (r *relay) write(line []byte) {
	_ = r.send(line)
}

// send is write, saying whether the message went out.
func (r *relay) send(line []byte) error {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	_, err := r.out.Write(append(line[:len(line):len(line)], '\n'))
	return err
}

func (r *relay) logf(format string, args ...any) {
	if r.srv.Log != nil {
		r.srv.Log.Printf(format, args...)
	}
}
