// Package rawmcp speaks line-delimited JSON-RPC to an MCP server over its
// stdin/stdout with nothing but the standard library, so that the demo, the
// golden transcripts and the benchmarks see the wire exactly as it is.
package rawmcp

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os/exec"
)

// ProtocolVersion is the MCP revision the client announces.
const ProtocolVersion = "2025-06-18"

// Conn is one server process and its pipes.
type Conn struct {
	Cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	next int
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
	return &Conn{Cmd: cmd, in: in, out: bufio.NewReaderSize(out, 4<<20)}, nil
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
	err := c.Request("initialize", map[string]any{
		"protocolVersion": version,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": clientName, "version": "1"},
	}, &res)
	if err != nil {
		return nil, err
	}
	return res, c.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
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
// the request whose reply is awaited.
func (c *Conn) LastID() int { return c.next }

// RPCError is a JSON-RPC error response.
type RPCError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// Request sends a request and decodes its result into result, skipping
// notifications that arrive in between.
func (c *Conn) Request(method string, params, result any) error {
	c.next++
	id := c.next
	params, err := c.withMeta(params)
	if err != nil {
		return err
	}
	if err := c.Send(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params}); err != nil {
		return err
	}
	for {
		line, err := c.out.ReadBytes('\n')
		if err != nil {
			return fmt.Errorf("reading reply to %s: %w", method, err)
		}
		if c.Trace != nil {
			c.Trace("<", line[:len(line)-1])
		}
		var msg struct {
			ID     *int            `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			Result json.RawMessage `json:"result"`
			Error  *RPCError       `json:"error"`
		}
		if err := json.Unmarshal(line, &msg); err != nil {
			return fmt.Errorf("bad reply to %s: %w", method, err)
		}
		if msg.ID == nil && msg.Method != "" && c.OnNotification != nil {
			c.OnNotification(msg.Method, msg.Params)
		}
		if msg.ID == nil || *msg.ID != id {
			continue
		}
		if msg.Error != nil {
			return msg.Error
		}
		if result == nil {
			return nil
		}
		return json.Unmarshal(msg.Result, result)
	}
}

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

// ToolResult is a tools/call result.
type ToolResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent map[string]any `json:"structuredContent"`
	IsError           bool           `json:"isError"`
}

// Text joins the text contents.
func (r *ToolResult) Text() string {
	var s string
	for _, c := range r.Content {
		if c.Type == "text" {
			s += c.Text
		}
	}
	return s
}

// Call calls a tool.
func (c *Conn) Call(tool string, args any) (*ToolResult, error) {
	var r ToolResult
	if err := c.Request("tools/call", map[string]any{"name": tool, "arguments": args}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Close closes stdin (the polite end of an MCP stdio session) and waits.
func (c *Conn) Close() error {
	c.in.Close()
	err := c.Cmd.Wait()
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
