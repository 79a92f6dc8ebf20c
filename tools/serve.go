package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/agent-box/agent-box/runs"
	"github.com/agent-box/agent-box/wire"
)

// drainIdle bounds how long the server keeps answering after stdin
// closed or ctx ended (SIGTERM) while no answer gets out. Blocking calls
// end at once then (Handlers.Gone), and the quick ones answer one after
// the other: as long as they do, the server waits for the last, however
// loaded the machine (forty requests piped in and stdin closed were cut
// off after a fixed second under make test). A call stuck in a system
// call (none should be: every file under the state dir is opened
// non-blocking), or a client that no longer reads, stops the answers:
// the server gives up this long after the last one, so that it exits
// soon after its client went away whatever is in flight (issue 9). A
// variable, for the tests.
var drainIdle = time.Second

// maxLine bounds one JSON-RPC message: tool arguments are at most
// MaxArgumentBytes, which JSON escaping can make at most six times longer,
// so a longer line is a broken or hostile client.
const maxLine = 16 << 20

// Serve runs the MCP server on in and out until in reaches EOF (or ctx
// ends) and every request read before it has been answered, or no answer
// got out for drainIdle. Once it returns it writes nothing more, and it
// returns in the middle of a line only when the client stopped reading.
//
// mcp-go's MCPServer decides every message (initialize, tools/list,
// tools/call, ping, the schemas); this is only the stdio transport around
// it, in place of mcp-go's StdioServer, for three reasons:
//   - At stdin EOF, StdioServer v1.2.1 cancels its workers, so a tool call
//     still queued loses its reply (a client that writes a request and
//     closes its end never gets an answer). Here every request read before
//     EOF is answered.
//   - StdioServer marshals a tools/call reply through CallToolResult's
//     map-based MarshalJSON, and encoding/json then re-scans the whole
//     reply once per nesting level to compact it: for a 1 MiB tail_log
//     window that is most of the server's CPU. encodeMessage writes the
//     same bytes in one pass (encode.go).
//   - notifications/cancelled cancels the request it names, so a client
//     that gives up on a process_wait frees it at once.
func Serve(ctx context.Context, m *Handlers, version string, in io.Reader, out io.Writer, errLog *log.Logger) error {
	gone := make(chan struct{})
	m.Gone = gone
	s := m.server(version)

	sess := &session{notes: make(chan mcp.JSONRPCNotification, 100)}
	if err := s.RegisterSession(ctx, sess); err != nil {
		return fmt.Errorf("registering the stdio session: %w", err)
	}
	defer s.UnregisterSession(ctx, sess.SessionID())
	ctx, stop := context.WithCancel(s.WithContext(ctx, sess))
	defer stop()

	c := &conn{srv: s, out: out, errLog: errLog, slots: make(chan struct{}, Workers), inflight: map[string]context.CancelFunc{},
		answered: make(chan struct{}, 1)}
	go c.notifications(ctx, sess.notes)
	// A read of stdin cannot be cancelled; SIGTERM (ctx) must end the
	// session all the same, so the read runs on its own goroutine, which
	// the process's exit ends.
	read := make(chan error, 1)
	go func() { read <- c.read(ctx, in) }()
	var err error
	select {
	case err = <-read:
	case <-ctx.Done():
		err = ctx.Err()
	}
	close(gone)
	c.drain(errLog)
	return err
}

// server is the MCP server of m's tools.
func (m *Handlers) server(version string) *server.MCPServer {
	m.blocking = make(chan struct{}, MaxBlockingCalls)
	s := server.NewMCPServer("agent-box", version,
		server.WithToolCapabilities(false),
		server.WithRecovery(),
		server.WithInstructions(m.instructions()),
		// The mutations apply a request id at most once (Handlers.once).
		server.WithExperimental(map[string]any{wire.SafeRepeat: map[string]any{}}),
	)
	m.Register(s)
	return s
}

// InProcess is m's MCP server without a transport: each call answers one
// JSON-RPC request. It is how the CLI reaches the box it runs on, through
// the same tools as a client over ssh, so that one CLI serves both.
// Blocking calls end with their ctx (nothing else is there to go away).
func InProcess(m *Handlers, version string) func(ctx context.Context, request json.RawMessage) (json.RawMessage, error) {
	s := m.server(version)
	return func(ctx context.Context, request json.RawMessage) (json.RawMessage, error) {
		return encodeMessage(s.HandleMessage(ctx, request))
	}
}

// drain waits for the requests in flight until every one is answered, or
// none was for drainIdle; then it stops the writes (see quiesce).
func (c *conn) drain(errLog *log.Logger) {
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	idle := time.NewTimer(drainIdle)
	defer idle.Stop()
	for {
		select {
		case <-done:
			c.quiesce()
			return
		case <-c.answered:
			idle.Reset(drainIdle)
		case <-idle.C:
			errLog.Printf("giving up on unanswered requests: none answered for %s after the client went away", drainIdle)
			c.quiesce()
			return
		}
	}
}

// quiesce makes every later write a no-op, once the write in progress (if
// any) has ended, so that the process exits between two lines rather than
// in one. A write blocked on a client that no longer reads holds it up at
// most drainIdle; such a client sees nothing more anyway.
func (c *conn) quiesce() {
	deadline := time.Now().Add(drainIdle)
	for !c.writeMu.TryLock() {
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(time.Millisecond)
	}
	c.closed = true
	c.writeMu.Unlock()
}

// Instructions is what the server tells the client about itself.
const Instructions = `agent-box runs long processes on this machine that survive the connection. ` +
	`Workflow: process_start (returns at once; with wait_ms a short command's end too) -> process_wait (blocks until it ends; no polling) or tail_log with wait_ms (follow output) -> tail_log (the last lines; or by byte offset, continuing from end_offset) -> process_kill (signals every process of the run). ` +
	`Every process_list answer has a cursor: keep the latest, and after a reconnect call process_list {changed_since: cursor} to learn which runs started or ended while you were away (exits included), then process_wait on those you still need. ` +
	`Waits: process_wait for the end of one run, or names for the first of several (all: every one); tail_log wait_ms to follow output; changed_since for what changed anywhere.`

// instructions are Instructions, and the box's default limits when it
// has some: the budget every run gets unless it sets its own.
func (h *Handlers) instructions() string {
	if h.M == nil || h.M.DefaultLimits == nil || h.M.DefaultLimits.Zero() {
		return Instructions
	}
	l := *h.M.DefaultLimits
	if err := h.M.CheckEnforceable(l); err != nil {
		return Instructions + " Every run here is to be capped at " + runs.DescribeLimits(l) +
			", which this machine cannot enforce, so process_start refuses every run: " + err.Error()
	}
	return Instructions + " Every run here is capped by default at " + runs.DescribeLimits(l) +
		" (process_start limits set each field otherwise); usage shows in process_list."
}

// conn is one stdio connection: requests are served concurrently, at most
// Workers at once, and every message is written whole, one per line.
type conn struct {
	srv    *server.MCPServer
	out    io.Writer
	errLog *log.Logger
	slots  chan struct{}
	wg     sync.WaitGroup

	writeMu   sync.Mutex
	closed    bool          // under writeMu: Serve returned, nothing more is written
	answered  chan struct{} // a message went out (drain's sign of progress)
	writeErrs atomic.Int64

	mu       sync.Mutex
	inflight map[string]context.CancelFunc // by the request's JSON id

	// initialized: an initialize request has been read. Set as it is read,
	// not answered, so that requests a client writes after it are served.
	initialized atomic.Bool
}

// envelope is what the transport needs of a message to route it.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		RequestID json.RawMessage `json:"requestId"` // notifications/cancelled
		Name      json.RawMessage `json:"name"`      // tools/call
		Meta      *mcp.Meta       `json:"_meta"`     // a 2026-07-28 request's protocol version
	} `json:"params"`
}

func hasID(id json.RawMessage) bool {
	return len(id) > 0 && string(id) != "null"
}

// read serves the messages of in until EOF. A request runs on a goroutine
// of its own (once a slot is free, so a flood of calls waits here instead
// of piling up); a notification runs in order, here.
func (c *conn) read(ctx context.Context, in io.Reader) error {
	r := bufio.NewReaderSize(in, 1<<20)
	for {
		line, err := readLine(r)
		if len(line) > 0 {
			c.dispatch(ctx, line)
		}
		switch {
		case errors.Is(err, errTooLong):
			c.write(mcp.JSONRPCError{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(nil),
				Error: mcp.NewJSONRPCErrorDetails(mcp.INVALID_REQUEST, err.Error(), nil)})
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return fmt.Errorf("reading stdin: %w", err)
		}
	}
}

// errTooLong is a message line over maxLine, skipped to its end.
var errTooLong = fmt.Errorf("a message of over %d MiB (tool arguments are at most %d MiB); it was skipped", maxLine>>20, MaxArgumentBytes>>20)

// readLine reads one message line, without its newline and surrounding
// blanks. A line over maxLine is read to its end but not kept.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	tooLong := false
	for {
		frag, err := r.ReadSlice('\n')
		if !tooLong && len(line)+len(frag) > maxLine {
			tooLong, line = true, nil
		}
		if !tooLong {
			line = append(line, frag...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if tooLong && err == nil {
			return nil, errTooLong
		}
		return bytes.TrimSpace(line), err
	}
}

func (c *conn) dispatch(ctx context.Context, line []byte) {
	var e envelope
	routed := json.Unmarshal(line, &e) == nil
	// A request or notification that encoding/json (mcp-go) would read one
	// way and another reader another is not acted on (strict.go).
	var strict error
	if routed && e.Method != "" {
		strict = strictJSON(line)
	}
	switch {
	case routed && e.Method == "":
		// A response: agent-box sends the client no requests, so there is
		// nothing waiting for it.
		if !hasID(e.ID) {
			c.handle(ctx, line, nil, nil) // not a message at all: mcp-go answers the error
		}
		return
	case routed && hasID(e.ID):
		if strict != nil {
			c.write(refusal(e.ID, mcp.INVALID_REQUEST, "%v", strict))
			return
		}
		if e.Method == string(mcp.MethodInitialize) {
			c.initialized.Store(true)
		} else if needsInitialize(&e) && !c.initialized.Load() {
			c.write(refusal(e.ID, mcp.INVALID_REQUEST, "%s before initialize: send initialize first, or name protocol version %s in the request's _meta", e.Method, mcp.ProtocolVersion20260728))
			return
		}
		c.slots <- struct{}{}
		c.wg.Add(1)
		rctx, cancel := context.WithCancel(ctx)
		key := string(e.ID)
		c.mu.Lock()
		c.inflight[key] = cancel
		c.mu.Unlock()
		go func() {
			defer func() { <-c.slots; c.wg.Done() }()
			defer func() {
				c.mu.Lock()
				delete(c.inflight, key)
				c.mu.Unlock()
				cancel()
			}()
			c.handle(rctx, line, e.ID, func(resp mcp.JSONRPCMessage) mcp.JSONRPCMessage {
				if e.Method == string(mcp.MethodToolsCall) {
					return c.unknownTool(resp, e.Params.Name)
				}
				return resp
			})
		}()
		return
	case strict != nil:
		// A notification cannot be answered, only ignored.
		c.errLog.Printf("ignoring a notification that is not strict JSON: %v", strict)
		return
	case routed && e.Method == string(mcp.MethodNotificationCancelled):
		c.mu.Lock()
		cancel := c.inflight[string(e.Params.RequestID)]
		c.mu.Unlock()
		if cancel != nil {
			cancel()
		}
	}
	c.handle(ctx, line, nil, nil)
}

// unknownTool rewrites mcp-go's answer to a tools/call of a tool that does
// not exist ("tool 'x' not found: tool not found") to say which tools do.
// Only that answer: mcp-go's other checks of the request come first, and
// whatever else it answers stays as it is.
func (c *conn) unknownTool(resp mcp.JSONRPCMessage, rawName json.RawMessage) mcp.JSONRPCMessage {
	// mcp-go's answer carries its sentinel's text, not the error itself.
	e, ok := resp.(mcp.JSONRPCError)
	if !ok || e.Error.Code != mcp.INVALID_PARAMS || !strings.HasSuffix(e.Error.Message, server.ErrToolNotFound.Error()) {
		return resp
	}
	var name string
	_ = json.Unmarshal(rawName, &name) // absent or not a string: ""
	if c.srv.GetTool(name) != nil {
		return resp
	}
	tools := slices.Sorted(maps.Keys(c.srv.ListTools()))
	if len(name) > 64 {
		name = name[:64] + "..."
	}
	e.Error.Message = fmt.Sprintf("unknown tool %q; the tools are: %s", name, strings.Join(tools, ", "))
	return e
}

// handle runs one message through mcp-go and writes its answer, if any. A
// panic outside the tool handlers (which WithRecovery covers) still gets
// the request an answer.
// fix, when not nil, may rewrite the answer before it is written.
func (c *conn) handle(ctx context.Context, line []byte, id json.RawMessage, fix func(mcp.JSONRPCMessage) mcp.JSONRPCMessage) {
	var resp mcp.JSONRPCMessage
	func() {
		defer func() {
			if r := recover(); r != nil {
				c.errLog.Printf("panic serving a message: %v", r)
				var e envelope
				_ = json.Unmarshal(line, &e)
				var id any
				_ = json.Unmarshal(e.ID, &id)
				resp = mcp.JSONRPCError{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id),
					Error: mcp.NewJSONRPCErrorDetails(mcp.INTERNAL_ERROR, fmt.Sprintf("internal error: %v", r), nil)}
			}
		}()
		resp = c.srv.HandleMessage(ctx, line)
	}()
	if resp != nil && fix != nil {
		resp = fix(resp)
	}
	if resp != nil {
		c.write(withID(resp, id))
	}
}

// write sends msg as one line in one Write, so that concurrent replies
// never interleave.
func (c *conn) write(msg any) {
	b, err := encodeMessage(msg)
	if err != nil {
		c.errLog.Printf("encoding a reply: %v", err)
		return
	}
	b = append(b, '\n')
	c.writeMu.Lock()
	if c.closed {
		c.writeMu.Unlock()
		return
	}
	_, err = c.out.Write(b)
	c.writeMu.Unlock()
	select {
	case c.answered <- struct{}{}:
	default: // drain has a sign already
	}
	// The client is gone once stdout breaks; say so once, not per reply.
	if err != nil && c.writeErrs.Add(1) == 1 {
		c.errLog.Printf("writing a reply: %v", err)
	}
}

// notifications writes what the tools send the client (progress).
func (c *conn) notifications(ctx context.Context, notes <-chan mcp.JSONRPCNotification) {
	for {
		select {
		case n := <-notes:
			c.write(n)
		case <-ctx.Done():
			return
		}
	}
}

// session is the one client of a stdio connection, as mcp-go sees it: it
// carries notifications and remembers what initialize negotiated.
type session struct {
	notes       chan mcp.JSONRPCNotification
	initialized atomic.Bool
	mu          sync.Mutex
	info        mcp.Implementation
	caps        mcp.ClientCapabilities
	version     string
}

func (s *session) SessionID() string                                   { return "stdio" }
func (s *session) NotificationChannel() chan<- mcp.JSONRPCNotification { return s.notes }
func (s *session) Initialize()                                         { s.initialized.Store(true) }
func (s *session) Initialized() bool                                   { return s.initialized.Load() }

func (s *session) GetClientInfo() mcp.Implementation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.info
}

func (s *session) SetClientInfo(i mcp.Implementation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.info = i
}

func (s *session) GetClientCapabilities() mcp.ClientCapabilities {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.caps
}

func (s *session) SetClientCapabilities(c mcp.ClientCapabilities) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.caps = c
}

func (s *session) ProtocolVersion() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

func (s *session) SetProtocolVersion(v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version = v
}

var (
	_ server.SessionWithClientInfo      = (*session)(nil)
	_ server.SessionWithProtocolVersion = (*session)(nil)
)
