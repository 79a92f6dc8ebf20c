// Package connect is agent-box connect: the MCP server an agent's client
// starts on the user's machine, which relays every call to a box's
// agent-box through a session that survives the transport's drops. Given
// several boxes, it is one server for all of them: a session per box, and
// package fleet's tool list and routing.
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

	"github.com/agent-box/agent-box/fleet"
	"github.com/agent-box/agent-box/session"
	"github.com/agent-box/agent-box/wire"
)

// maxLine bounds one message from the client (the box bounds arguments
// far below it).
const maxLine = 64 << 20

// Server relays one client's MCP session to its boxes.
type Server struct {
	// Boxes are the boxes, each with its name. One box is relayed as it
	// is: its own tools, unchanged. Several are a fleet (package fleet),
	// and each one's name is what the tools' box takes.
	Boxes   []session.Box
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
	ctx context.Context // the connection's: what runs in the background ends with it

	mu        sync.Mutex
	members   []*member
	opened    bool                          // the sessions are open (at the first initialize)
	fleet     *fleet.Fleet                  // several boxes: the fleet that routes calls; nil for one
	lead      int                           // the member whose answer to initialize and tools the client was given
	tools     json.RawMessage               // the client's tools/list result, once fetched
	inflight  map[string]context.CancelFunc // by the client's request id
	channeled bool                          // the channel's loop has started
	wg        sync.WaitGroup
}

// member is one box of the connection.
type member struct {
	box      session.Box
	sess     *session.Session
	cache    *cache
	answered string // the box's version, as last told at initialize or a dial
	kept     cached // what the cache holds, or is to
}

// Serve relays the client's messages from in, and the answers to out,
// until in ends or ctx does; then it lets the box finish what is in flight
// (the transport gets EOF) and returns.
func (srv *Server) Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	if len(srv.Boxes) == 0 {
		return errors.New("connect: no box")
	}
	r := &relay{srv: srv, out: out, inflight: map[string]context.CancelFunc{}}
	for _, b := range srv.Boxes {
		r.members = append(r.members, &member{box: b, cache: cacheFor(srv.CacheDir, b)})
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.ctx = ctx
	read := make(chan error, 1)
	go func() { read <- r.read(ctx, in) }()
	var err error
	select {
	case err = <-read:
	case <-ctx.Done():
		err = ctx.Err()
	}
	r.mu.Lock()
	var open []*session.Session
	for _, mb := range r.members {
		if mb.sess != nil {
			open = append(open, mb.sess)
		}
	}
	r.mu.Unlock()
	for _, sess := range open {
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

// opened says whether the sessions are open (after initialize).
func (r *relay) isOpen() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.opened
}

// open opens a session to every box, with the client's initialize (the
// box's is made at every dial). The first initialize does; a repeat
// (a client that tries again) reuses them.
func (r *relay) open(params json.RawMessage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.opened {
		return
	}
	var boxes []fleet.Box
	for _, mb := range r.members {
		opt := r.srv.Options
		opt.Dialled = func(res json.RawMessage) { r.dialled(mb, res) }
		if len(r.members) > 1 && opt.Stderr != nil {
			// Several transports write one stderr: each line says its box.
			opt.Stderr = &linePrefix{w: opt.Stderr, prefix: []byte(mb.box.Name + ": "), start: true}
		}
		mb.sess = session.Open(mb.box, params, opt)
		boxes = append(boxes, fleet.Box{Name: mb.box.Name, Caller: mb.sess})
	}
	if len(r.members) > 1 {
		// Server's boxes were named by main, with fleet.CheckName.
		r.fleet, _ = fleet.New(boxes)
	}
	r.opened = true
}

func (r *relay) initialize(ctx context.Context, m message) {
	r.open(m.Params)
	if r.fleet == nil && len(r.members) > 1 {
		r.answer(m.ID, nil, &rpcError{Code: -32603, Message: "agent-box connect: the boxes' names are not all good box names"})
		return
	}
	wait := r.srv.InitWait
	if wait <= 0 {
		wait = 30 * time.Second
	}
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(m.Params, &p)
	lead, res, err := r.initializeAll(ctx, p.ProtocolVersion, wait)
	if err == nil {
		r.mu.Lock()
		r.lead = lead
		r.mu.Unlock()
		r.answer(m.ID, r.initAnswer(res), nil)
		return
	}
	r.logf("initialize: %v", err)
	for i, mb := range r.members {
		old, lerr := mb.cache.load()
		if lerr != nil || old.Asked != p.ProtocolVersion {
			continue
		}
		// The box is away as the client starts: its tools as last seen,
		// and calls that say why they fail until it is back.
		r.logf("answering initialize and tools/list from what %s said at %s", mb.box.Name, old.At.Format(time.RFC3339))
		r.mu.Lock()
		r.lead = i
		mb.kept, mb.answered = old, serverVersion(old.Initialize)
		r.tools = nil
		var terr error
		if old.Tools != nil {
			r.tools, terr = r.clientTools(old.Tools)
		}
		r.mu.Unlock()
		if terr != nil {
			r.logf("the tools %s listed at %s: %v", mb.box.Name, old.At.Format(time.RFC3339), terr)
			continue
		}
		r.answer(m.ID, r.initAnswer(old.Initialize), nil)
		return
	}
	r.answer(m.ID, nil, &rpcError{Code: -32603, Message: "agent-box connect: " + r.describe(err)})
}

// initializeAll waits for the boxes' answers to initialize, each for wait
// at most, and returns the first (which member, and its answer): one box
// answering is enough to serve the client. Each box that answers keeps
// its answer in its cache, those that answer later too.
func (r *relay) initializeAll(ctx context.Context, asked string, wait time.Duration) (int, json.RawMessage, error) {
	type got struct {
		i   int
		res json.RawMessage
		err error
	}
	ch := make(chan got, len(r.members))
	for i, mb := range r.members {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			ctx, cancel := context.WithTimeout(r.ctx, wait)
			defer cancel()
			res, err := mb.sess.Initialize(ctx)
			if err == nil {
				r.mu.Lock()
				if old, lerr := mb.cache.load(); lerr == nil && old.Asked == asked {
					mb.kept.Tools = old.Tools
				}
				mb.kept.Asked, mb.kept.Initialize, mb.kept.At = asked, res, time.Now().UTC()
				r.saveLocked(mb)
				mb.answered = serverVersion(res)
				r.mu.Unlock()
			}
			ch <- got{i, res, err}
		}()
	}
	var first error
	for range r.members {
		select {
		case g := <-ch:
			if g.err == nil {
				return g.i, g.res, nil
			}
			if first == nil {
				first = g.err
			}
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		}
	}
	return 0, nil, first
}

// dialled is told a box's answer at every dial: an agent-box that is not
// the one the client was told of (upgraded on the box, or first reached
// after an answer from the cache) may have other tools, so the tool list
// is fetched anew and the client told it changed. Of several boxes, the
// tools are the lead's (the box whose answer the client was given).
func (r *relay) dialled(mb *member, res json.RawMessage) {
	v := serverVersion(res)
	r.mu.Lock()
	changed := mb.answered != "" && v != mb.answered
	lead := len(r.members) > 0 && r.members[r.lead] == mb
	if changed {
		mb.answered = v
		mb.kept.Initialize, mb.kept.Tools, mb.kept.At = res, nil, time.Now().UTC()
		r.saveLocked(mb)
		if lead {
			r.tools = nil
		}
	}
	r.mu.Unlock()
	if changed && lead {
		r.logf("%s now runs agent-box %s: its tools are listed anew", mb.box.Name, v)
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
	if r.fleet != nil {
		res = withInstructions(res, r.fleet.Instructions())
	}
	if r.srv.Channel != nil {
		res = withChannel(res)
	}
	return res
}

// clientTools is a box's tools/list result as the client is given it:
// as it is, or the fleet's (every tool takes box).
func (r *relay) clientTools(list json.RawMessage) (json.RawMessage, error) {
	if r.fleet == nil {
		return list, nil
	}
	return r.fleet.ToolList(list)
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

// withInstructions is an answer to initialize with more instructions.
func withInstructions(res json.RawMessage, more string) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(res, &m) != nil || m == nil {
		return res
	}
	var instructions string
	_ = json.Unmarshal(m["instructions"], &instructions)
	m["instructions"], _ = json.Marshal(instructions + more)
	b, err := json.Marshal(m)
	if err != nil {
		return res
	}
	return b
}

// saveLocked writes mb's cache (r.mu held).
func (r *relay) saveLocked(mb *member) {
	if err := mb.cache.save(mb.kept); err != nil {
		r.logf("keeping what %s said: %v", mb.box.Name, err)
	}
}

func (r *relay) serve(ctx context.Context, m message) {
	if !r.isOpen() {
		if m.Method == "ping" {
			r.answer(m.ID, json.RawMessage(`{}`), nil)
			return
		}
		r.answer(m.ID, nil, &rpcError{Code: -32002, Message: "agent-box connect: initialize first"})
		return
	}
	r.mu.Lock()
	lead, fl := r.members[r.lead], r.fleet
	r.mu.Unlock()
	switch m.Method {
	case "ping":
		r.answer(m.ID, json.RawMessage(`{}`), nil)
	case "tools/call":
		var ans session.Answer
		var err error
		if fl != nil {
			ans, err = fl.CallTool(ctx, m.Params, r.write)
		} else {
			ans, err = lead.sess.CallTool(ctx, m.Params, r.write)
		}
		r.forward(ctx, m, ans, err)
	case "tools/list":
		if tools := r.cachedTools(m.Params); tools != nil {
			r.answer(m.ID, tools, nil)
			return
		}
		ans, err := lead.sess.Call(ctx, m.Method, m.Params)
		if err == nil && ans.Error == nil {
			list, lerr := r.clientTools(ans.Result)
			if lerr != nil {
				r.answer(m.ID, nil, &rpcError{Code: -32603, Message: "agent-box connect: " + lead.box.Name + ": " + lerr.Error()})
				return
			}
			r.mu.Lock()
			r.tools = list
			if len(lead.kept.Initialize) > 0 {
				lead.kept.Tools = ans.Result
				r.saveLocked(lead)
			}
			r.mu.Unlock()
			ans.Result = list
		}
		r.forward(ctx, m, ans, err)
	default:
		ans, err := lead.sess.Call(ctx, m.Method, m.Params)
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
		msg := r.describe(err)
		res, _ := json.Marshal(map[string]any{
			"content":           []map[string]string{{"type": "text", "text": msg}},
			"isError":           true,
			"structuredContent": map[string]any{wire.ErrorKey: wire.Error{Code: code, Message: msg, Retryable: retryable}},
		})
		r.answer(m.ID, res, nil)
	default:
		r.answer(m.ID, nil, &rpcError{Code: -32603, Message: "agent-box connect: " + r.describe(err)})
	}
}

// describe says what went wrong in words for the model and the person:
// the box's name and the transport's own words are in err already, or
// for one box are added.
func (r *relay) describe(err error) string {
	switch {
	case errors.Is(err, session.ErrUnreachable), errors.Is(err, session.ErrOutcomeUnknown), len(r.members) > 1:
		return err.Error()
	}
	return fmt.Sprintf("%s: %v", r.members[0].box.Name, err)
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

// linePrefix writes prefix before every line written through it.
type linePrefix struct {
	w      io.Writer
	prefix []byte
	mu     sync.Mutex // a redial's transport may write while the last one's last words do
	start  bool       // the next byte begins a line
}

func (l *linePrefix) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b []byte
	for _, c := range p {
		if l.start {
			b = append(b, l.prefix...)
		}
		b = append(b, c)
		l.start = c == '\n'
	}
	if _, err := l.w.Write(b); err != nil {
		return 0, err
	}
	return len(p), nil
}
