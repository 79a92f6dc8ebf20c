package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"os"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// drainLimit bounds how long the server keeps answering after stdin
// closed. Blocking calls end at once then (Handlers.Gone), so this only
// matters for a call stuck in I/O.
const drainLimit = 30 * time.Second

// Serve runs the MCP server on in and out until in reaches EOF and every
// request read before it has been answered.
//
// mcp-go v1.2.1 cancels its workers as soon as its reader sees EOF, so a
// tool call still queued loses its reply (a client that writes a request
// and closes its end at once never gets an answer). Serve holds EOF back
// from mcp-go until the replies are out.
func Serve(ctx context.Context, m *Handlers, version string, in io.Reader, out io.Writer, errLog *log.Logger) error {
	g := &gate{gone: make(chan struct{})}
	g.cond = sync.NewCond(&g.mu)
	m.Gone = g.gone
	m.blocking = make(chan struct{}, MaxBlockingCalls)

	s := server.NewMCPServer("agent-box", version,
		server.WithToolCapabilities(false),
		server.WithRecovery(),
		server.WithInstructions(Instructions),
	)
	m.Register(s)

	pr, pw := io.Pipe()
	go g.pump(in, pw)
	stdio := server.NewStdioServer(s)
	stdio.SetErrorLogger(log.New(&lostReplies{g: g, w: errLog.Writer()}, errLog.Prefix(), errLog.Flags()))
	// mcp-go serves 5 tool calls at once by default: five waits would hold
	// back every other call, a process_kill included.
	server.WithWorkerPoolSize(Workers)(stdio)
	return stdio.Listen(ctx, pr, &gatedWriter{g: g, w: out})
}

// Instructions is what the server tells the client about itself.
const Instructions = `agent-box runs long processes on this machine that survive the connection. ` +
	`Workflow: process_start (returns at once) -> process_wait (blocks until it ends; no polling) or tail_log with wait_ms (follow output) -> tail_log (read output by byte offset; continue from end_offset) -> process_kill (signals every process of the run). ` +
	`After a reconnect, process_list shows every run and its true state.`

type gate struct {
	mu      sync.Mutex
	cond    *sync.Cond
	pending int
	gone    chan struct{}
}

type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

func hasID(id json.RawMessage) bool {
	return len(id) > 0 && !bytes.Equal(id, []byte("null"))
}

// pump copies in to pw line by line, counting requests, and closes pw only
// once in is at EOF and every counted request was answered.
func (g *gate) pump(in io.Reader, pw *io.PipeWriter) {
	r := bufio.NewReaderSize(in, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			var e envelope
			if json.Unmarshal(line, &e) == nil && e.Method != "" && hasID(e.ID) {
				g.mu.Lock()
				g.pending++
				g.mu.Unlock()
			}
			if _, werr := pw.Write(line); werr != nil {
				return
			}
		}
		if err != nil {
			break
		}
	}
	close(g.gone)
	done := make(chan struct{})
	go func() {
		g.mu.Lock()
		for g.pending > 0 {
			g.cond.Wait()
		}
		g.mu.Unlock()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(drainLimit):
		os.Stderr.WriteString("agent-box: giving up on unanswered requests after stdin closed\n")
	}
	pw.CloseWithError(io.EOF)
}

// isResponse reports whether msg is a JSON-RPC response with an id. It reads
// only as far as the keys it needs: mcp-go writes "jsonrpc" and "id" before
// "result", and a tail_log result can be a megabyte.
func isResponse(msg []byte) bool {
	d := json.NewDecoder(bytes.NewReader(msg))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	idSeen := false
	for d.More() {
		k, err := d.Token()
		if err != nil {
			return false
		}
		switch k {
		case "method":
			return false
		case "id":
			var id json.RawMessage
			if d.Decode(&id) != nil || !hasID(id) {
				return false
			}
			idSeen = true
			continue
		case "result", "error":
			return idSeen || keyLater(d, "id")
		}
		var skip json.RawMessage
		if d.Decode(&skip) != nil {
			return false
		}
	}
	return false
}

// keyLater scans on for key, for a response written with result before id.
func keyLater(d *json.Decoder, key string) bool {
	var skip json.RawMessage
	if d.Decode(&skip) != nil {
		return false
	}
	for d.More() {
		k, err := d.Token()
		if err != nil {
			return false
		}
		var v json.RawMessage
		if d.Decode(&v) != nil {
			return false
		}
		if k == key {
			return hasID(v)
		}
	}
	return false
}

// lostReplies passes mcp-go's error log through and counts the replies it
// reports it could not write (a marshal or write error): they will never
// reach gatedWriter, and must not hold the process up after stdin closed.
type lostReplies struct {
	g *gate
	w io.Writer
}

func (l *lostReplies) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("Error writing tool response")) || bytes.Contains(p, []byte("Error writing response")) {
		l.g.mu.Lock()
		l.g.pending--
		l.g.cond.Broadcast()
		l.g.mu.Unlock()
	}
	return l.w.Write(p)
}

// gatedWriter counts the responses mcp-go writes (one Write per message).
type gatedWriter struct {
	g *gate
	w io.Writer
}

func (w *gatedWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	if isResponse(p) {
		w.g.mu.Lock()
		w.g.pending--
		w.g.cond.Broadcast()
		w.g.mu.Unlock()
	}
	return n, err
}
