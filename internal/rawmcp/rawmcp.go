// Package rawmcp speaks line-delimited JSON-RPC to an MCP server over its
// stdin/stdout with nothing but the standard library, so that the demo, the
// golden transcripts, the end-to-end tests and the benchmarks see the wire
// exactly as it is.
//
// A Conn is used from one goroutine at a time, and every call runs on the
// caller's: the benchmarks time round trips with it, so reading a reply
// takes no goroutine hop, skips other messages without decoding them, and
// decodes the reply in one pass straight into the caller's type.
package rawmcp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// ProtocolVersion is the MCP revision the client announces.
const ProtocolVersion = "2025-06-18"

// Conn is one server process and its pipes.
type Conn struct {
	Cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	next int
	rx   int64 // bytes of messages read
	// Trace, if set, is called with every line sent (dir ">") and
	// received (dir "<"), without the newline.
	Trace func(dir string, line []byte)
	// Meta, if set, goes into the _meta of every request, next to what the
	// params' own _meta holds: a 2026-07-28 client names its protocol
	// version, capabilities and identity there (StatelessMeta) instead of
	// in an initialize handshake.
	Meta map[string]any
	// OnNotification, if set, is called with each notification read while
	// a request waits for its reply (progress); it may Send.
	OnNotification func(method string, params json.RawMessage)
}

// Protocol version 2026-07-28's _meta keys (SEP-2575).
const (
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientInfo         = "io.modelcontextprotocol/clientInfo"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	MetaServerInfo         = "io.modelcontextprotocol/serverInfo"
)

// StatelessMeta is the _meta a 2026-07-28 client sends with every request.
func StatelessMeta(version, clientName string) map[string]any {
	return map[string]any{
		MetaProtocolVersion:    version,
		MetaClientInfo:         map[string]any{"name": clientName, "version": "1"},
		MetaClientCapabilities: map[string]any{},
	}
}

// Start starts cmd and returns a Conn on its stdin/stdout; nothing is sent.
func Start(cmd *exec.Cmd) (*Conn, error) {
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := newConn(in, out)
	c.Cmd = cmd
	return c, nil
}

// newConn is a Conn on a pair of streams, with no process.
func newConn(in io.WriteCloser, out io.Reader) *Conn {
	// A tail_log answer of 1 MiB in base64 is some 2.8 MB of JSON (the
	// content is in the text and in structuredContent); a big buffer keeps
	// ReadBytes from gathering it from many small reads.
	return &Conn{in: in, out: bufio.NewReaderSize(out, 4<<20)}
}

// Dial starts cmd and performs the initialize handshake.
func Dial(cmd *exec.Cmd, clientName string) (*Conn, map[string]any, error) {
	c, err := Start(cmd)
	if err != nil {
		return nil, nil, err
	}
	res, err := c.Initialize(clientName)
	if err != nil {
		c.Kill()
		return nil, nil, err
	}
	return c, res, nil
}

// Initialize sends initialize for ProtocolVersion and
// notifications/initialized.
func (c *Conn) Initialize(clientName string) (map[string]any, error) {
	return c.InitializeVersion(clientName, ProtocolVersion)
}

// InitializeVersion is Initialize announcing protocol version version.
func (c *Conn) InitializeVersion(clientName, version string) (map[string]any, error) {
	var res map[string]any
	if err := c.Request("initialize", InitializeParams(clientName, version), &res); err != nil {
		return nil, err
	}
	return res, c.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
}

// InitializeParams are the params of an initialize request announcing
// protocol version version, for a caller that times the request alone.
func InitializeParams(clientName, version string) map[string]any {
	return map[string]any{
		"protocolVersion": version,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": clientName, "version": "1"},
	}
}

// Send writes one message.
func (c *Conn) Send(msg any) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	if c.Trace != nil {
		c.Trace(">", b)
	}
	_, err = c.in.Write(append(b, '\n'))
	return err
}

// LastID is the id of the last request sent; in OnNotification, that of
// the request whose reply is awaited unless others were sent since.
func (c *Conn) LastID() int { return c.next }

// Received is how many bytes of messages the Conn has read.
func (c *Conn) Received() int64 { return c.rx }

// RPCError is a JSON-RPC error response.
type RPCError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// Request sends a request and decodes its result into result (nil: the
// result is discarded), skipping notifications that arrive in between.
func (c *Conn) Request(method string, params, result any) error {
	id, err := c.SendRequest(method, params)
	if err != nil {
		return err
	}
	if err := c.Await(id, result); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	return nil
}

// SendRequest writes a request and returns its id, for Await to read its
// reply later: several may be in flight.
func (c *Conn) SendRequest(method string, params any) (int, error) {
	c.next++
	id := c.next
	params, err := c.withMeta(params)
	if err != nil {
		return 0, err
	}
	return id, c.Send(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

// Await reads messages until the reply to request id and decodes its
// result into result (nil: discarded) in one pass over the line: a
// tail_log reply is megabytes, and decoding it twice would make a
// benchmark's client, which shares the CPUs with the server, a bigger cost
// than it need be. Notifications go to OnNotification; replies to other
// requests are dropped.
func (c *Conn) Await(id int, result any) error {
	if result == nil {
		result = discard{}
	}
	for {
		line, err := c.out.ReadBytes('\n')
		if err != nil {
			return fmt.Errorf("reading reply %d: %w", id, err)
		}
		c.rx += int64(len(line))
		if c.Trace != nil {
			c.Trace("<", bytes.TrimSuffix(line, []byte("\n")))
		}
		if !hasID(line, id) {
			c.notify(line)
			continue
		}
		msg := struct {
			ID     *int      `json:"id"`
			Method string    `json:"method"`
			Result any       `json:"result"`
			Error  *RPCError `json:"error"`
		}{Result: result}
		if err := json.Unmarshal(line, &msg); err != nil {
			return fmt.Errorf("bad reply %d: %w", id, err)
		}
		if msg.ID == nil || *msg.ID != id || msg.Method != "" {
			// Not a reply after all: "id":N was in a notification's params,
			// or the server sent a request with an id of its own.
			c.notify(line)
			continue
		}
		if msg.Error != nil {
			return msg.Error
		}
		return nil
	}
}

// notify hands a notification line to OnNotification, if set; anything
// else is dropped.
func (c *Conn) notify(line []byte) {
	if c.OnNotification == nil {
		return
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(line, &msg) == nil && msg.ID == nil && msg.Method != "" {
		c.OnNotification(msg.Method, msg.Params)
	}
}

// hasID reports whether a message line carries "id":id. Servers write
// {"jsonrpc":"2.0","id":N,...}, so the key is found in the first bytes;
// a line without it anywhere near the start is decoded in full to be sure.
func hasID(line []byte, id int) bool {
	head := line[:min(len(line), 64)]
	if i := bytes.Index(head, []byte(`"id":`)); i >= 0 {
		rest := bytes.TrimLeft(head[i+5:], " ")
		want := strconv.AppendInt(nil, int64(id), 10)
		return bytes.HasPrefix(rest, want) && len(rest) > len(want) && (rest[len(want)] == ',' || rest[len(want)] == '}' || rest[len(want)] == ' ')
	}
	var msg struct {
		ID *int `json:"id"`
	}
	return json.Unmarshal(line, &msg) == nil && msg.ID != nil && *msg.ID == id
}

// discard accepts any JSON value and keeps nothing.
type discard struct{}

func (discard) UnmarshalJSON([]byte) error { return nil }

// withMeta returns params with c.Meta added to its _meta; params must then
// encode as a JSON object (or be nil).
func (c *Conn) withMeta(params any) (any, error) {
	if c.Meta == nil {
		return params, nil
	}
	p := map[string]any{}
	if params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &p); err != nil {
			return nil, fmt.Errorf("params with _meta must be an object: %w", err)
		}
	}
	meta := maps.Clone(c.Meta)
	if own, ok := p["_meta"].(map[string]any); ok {
		maps.Copy(meta, own)
	}
	p["_meta"] = meta
	return p, nil
}

// Content is one item of a tool result's content.
type Content struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// ToolResult is a tools/call result.
type ToolResult struct {
	Content           []Content      `json:"content"`
	StructuredContent map[string]any `json:"structuredContent"`
	IsError           bool           `json:"isError"`
}

// Text joins the text contents.
func (r *ToolResult) Text() string { return joinText(r.Content) }

func joinText(content []Content) string {
	var s strings.Builder
	for _, c := range content {
		if c.Type == "text" {
			s.WriteString(c.Text)
		}
	}
	return s.String()
}

// Call calls a tool.
func (c *Conn) Call(tool string, args any) (*ToolResult, error) {
	var r ToolResult
	if err := c.Request("tools/call", map[string]any{"name": tool, "arguments": args}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// ToolError is a tools/call result with isError set, as CallInto and
// AwaitCall return it.
type ToolError struct {
	Tool string
	Text string // the result's text content
}

func (e *ToolError) Error() string { return fmt.Sprintf("%s: tool error: %s", e.Tool, e.Text) }

// SendCall starts a tools/call without waiting for its reply.
func (c *Conn) SendCall(tool string, args any) (int, error) {
	return c.SendRequest("tools/call", map[string]any{"name": tool, "arguments": args})
}

// AwaitCall waits for the reply to the tools/call id of tool and decodes
// its structuredContent into structured (nil: discarded); a result with
// isError set is a *ToolError.
func (c *Conn) AwaitCall(tool string, id int, structured any) error {
	if structured == nil {
		structured = discard{}
	}
	// The content is kept raw, a copy cheap next to decoding it, and
	// decoded only for an error.
	res := struct {
		IsError    bool            `json:"isError"`
		Structured any             `json:"structuredContent"`
		Content    json.RawMessage `json:"content"`
	}{Structured: structured}
	if err := c.Await(id, &res); err != nil {
		return fmt.Errorf("%s: %w", tool, err)
	}
	if !res.IsError {
		return nil
	}
	var content []Content
	_ = json.Unmarshal(res.Content, &content)
	return &ToolError{Tool: tool, Text: joinText(content)}
}

// CallInto calls a tool and decodes its structuredContent into structured,
// as AwaitCall.
func (c *Conn) CallInto(tool string, args, structured any) error {
	id, err := c.SendCall(tool, args)
	if err != nil {
		return err
	}
	return c.AwaitCall(tool, id, structured)
}

// closeGrace is how long Close waits for the server after closing its
// stdin before it kills it; a variable for the tests.
var closeGrace = 10 * time.Second

// ErrLingered is Close's error for a server that had not exited 10 s
// after its stdin closed.
var ErrLingered = errors.New("server still running after its stdin closed; killed")

// Close closes stdin (the polite end of an MCP stdio session) and waits for
// the server; one still running 10 s later is killed (ErrLingered).
func (c *Conn) Close() error {
	c.in.Close()
	done := make(chan error, 1)
	go func() { done <- c.Cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(closeGrace):
		c.Cmd.Process.Kill()
		<-done
		return ErrLingered
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return fmt.Errorf("server exited: %w", err)
	}
	return err
}

// Kill SIGKILLs the server, as a dropped connection would end it.
func (c *Conn) Kill() {
	c.Cmd.Process.Kill()
	c.Cmd.Wait()
}
