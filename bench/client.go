package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// client is one MCP session with a fresh agent-box server over its stdio:
// newline-delimited JSON-RPC 2.0, exactly what an SSH client sees.
type client struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *tailBuffer
	next   int64
	rx     int64 // bytes of messages read
}

// spawn starts a server but does not initialize it, so that the caller can
// time the handshake on its own.
func spawn(binary, stateDir string) (*client, error) {
	cmd := exec.Command(binary, "--state-dir", stateDir)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr := &tailBuffer{max: 8 << 10}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", binary, err)
	}
	// A tail_log answer of 1 MiB in base64 is some 2.8 MB of JSON (the
	// content is in the text and in structuredContent); a big buffer keeps
	// ReadSlice from splitting it into many small copies.
	return &client{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 4<<20), stderr: stderr}, nil
}

// dial spawns a server and completes the MCP handshake.
func dial(binary, stateDir string) (*client, error) {
	c, err := spawn(binary, stateDir)
	if err != nil {
		return nil, err
	}
	if err := c.initialize(); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

func (c *client) pid() int { return c.cmd.Process.Pid }

// initParams are the initialize request's params.
var initParams = map[string]any{
	"protocolVersion": "2025-06-18",
	"capabilities":    map[string]any{},
	"clientInfo":      map[string]any{"name": "agent-box-bench", "version": "1"},
}

func (c *client) initialize() error {
	if _, err := c.request("initialize", initParams); err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	return c.write(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
}

func (c *client) write(msg any) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	_, err = c.in.Write(append(b, '\n'))
	return err
}

// send writes a request and returns its id, for a reply awaited later.
func (c *client) send(method string, params any) (int64, error) {
	c.next++
	id := c.next
	return id, c.write(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

// await reads messages until the reply to id, skipping notifications, and
// returns the reply's result.
func (c *client) await(id int64) (json.RawMessage, error) {
	var res json.RawMessage
	err := c.awaitInto(id, &res)
	return res, err
}

// awaitInto decodes the result of the reply to id into result in one pass
// over the line: a tail_log reply is megabytes, and decoding it twice
// would make the benchmark's client, which shares the CPUs with the
// server, a bigger cost than it need be.
func (c *client) awaitInto(id int64, result any) error {
	for {
		line, err := c.out.ReadBytes('\n')
		if err != nil {
			return fmt.Errorf("reading reply %d: %w (server stderr: %s)", id, err, c.stderr.String())
		}
		c.rx += int64(len(line))
		if !hasID(line, id) {
			continue // a notification, or the reply to another request
		}
		msg := struct {
			ID     *int64          `json:"id"`
			Result any             `json:"result"`
			Error  json.RawMessage `json:"error"`
		}{Result: result}
		if err := json.Unmarshal(line, &msg); err != nil {
			return fmt.Errorf("reply %d: %w", id, err)
		}
		if msg.ID == nil || *msg.ID != id {
			return fmt.Errorf("reply %d: id mismatch in %.200s", id, line)
		}
		if len(msg.Error) > 0 && !bytes.Equal(msg.Error, []byte("null")) {
			return fmt.Errorf("protocol error: %s", msg.Error)
		}
		return nil
	}
}

// hasID reports whether a message line carries "id":id. mcp-go writes
// {"jsonrpc":"2.0","id":N,...}, so the key is found in the first bytes;
// a line without it anywhere near the start is decoded in full to be sure.
func hasID(line []byte, id int64) bool {
	head := line[:min(len(line), 64)]
	if i := bytes.Index(head, []byte(`"id":`)); i >= 0 {
		rest := bytes.TrimLeft(head[i+5:], " ")
		want := strconv.AppendInt(nil, id, 10)
		return bytes.HasPrefix(rest, want) && len(rest) > len(want) && (rest[len(want)] == ',' || rest[len(want)] == '}' || rest[len(want)] == ' ')
	}
	var msg struct {
		ID *int64 `json:"id"`
	}
	return json.Unmarshal(line, &msg) == nil && msg.ID != nil && *msg.ID == id
}

func (c *client) request(method string, params any) (json.RawMessage, error) {
	id, err := c.send(method, params)
	if err != nil {
		return nil, err
	}
	return c.await(id)
}

// sendTool starts a tools/call without waiting for its reply.
func (c *client) sendTool(tool string, args map[string]any) (int64, error) {
	return c.send("tools/call", map[string]any{"name": tool, "arguments": args})
}

// awaitTool waits for the reply to a tools/call and decodes its structured
// content into out (if not nil).
func (c *client) awaitTool(tool string, id int64, out any) error {
	if out == nil {
		out = &discard{}
	}
	res := toolResult{Structured: out}
	if err := c.awaitInto(id, &res); err != nil {
		return fmt.Errorf("%s: %w", tool, err)
	}
	return res.err(tool)
}

// call runs one tool and returns how long the round trip took, from the
// first byte written to the reply decoded (a client has to parse it).
func (c *client) call(tool string, args map[string]any, out any) (time.Duration, error) {
	t0 := time.Now()
	id, err := c.sendTool(tool, args)
	if err != nil {
		return 0, err
	}
	err = c.awaitTool(tool, id, out)
	return time.Since(t0), err
}

// toolResult is a tools/call result: structuredContent is decoded into
// Structured; the text content is kept raw (a copy is cheap next to
// decoding it) and decoded only to report an error.
type toolResult struct {
	IsError    bool            `json:"isError"`
	Structured any             `json:"structuredContent"`
	Content    json.RawMessage `json:"content"`
}

// discard accepts any JSON value and keeps nothing.
type discard struct{}

func (*discard) UnmarshalJSON([]byte) error { return nil }

func (r *toolResult) err(tool string) error {
	if !r.IsError {
		return nil
	}
	var content []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(r.Content, &content)
	msg := "(no text)"
	if len(content) > 0 {
		msg = content[0].Text
	}
	return fmt.Errorf("%s: tool error: %s", tool, msg)
}

// close ends the session the way an SSH client does (stdin EOF) and waits
// for the server; a server that lingers is killed.
func (c *client) close() {
	c.in.Close()
	done := make(chan struct{})
	go func() { c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		c.cmd.Process.Kill()
		<-done
	}
}

// tailBuffer keeps the last max bytes written, for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	os.Stderr.Write(p) // the server's diagnostics are the operator's too
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}

// runInfo is the part of a runs.Run the benchmark checks.
type runInfo struct {
	Name      string `json:"name"`
	RunID     string `json:"run_id"`
	State     string `json:"state"`
	Reason    string `json:"reason"`
	PID       int    `json:"pid"`
	ExitCode  *int   `json:"exit_code"`
	Signal    string `json:"signal"`
	LogPath   string `json:"log_path"`
	LogBytes  int64  `json:"log_bytes"`
	LogCapped bool   `json:"log_capped"`
	LogError  string `json:"log_error"`
}

type waitInfo struct {
	Run        runInfo `json:"run"`
	TimedOut   bool    `json:"wait_timed_out"`
	OutputTail string  `json:"output_tail"`
}

type tailInfo struct {
	Content   string `json:"content"`
	Offset    int64  `json:"offset"`
	EndOffset int64  `json:"end_offset"`
	EOF       bool   `json:"eof"`
	State     string `json:"state"`
	LogBytes  int64  `json:"log_bytes"`
}

// exitedOK checks that a waited-for run exited with status 0.
func (w *waitInfo) exitedOK() error {
	switch {
	case w.TimedOut:
		return errors.New("process_wait timed out")
	case w.Run.State != "exited" || w.Run.ExitCode == nil || *w.Run.ExitCode != 0:
		return fmt.Errorf("run %s ended %s (%s), want exit code 0", w.Run.Name, w.Run.State, w.Run.Reason)
	}
	return nil
}
