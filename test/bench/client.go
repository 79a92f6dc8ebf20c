package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/agent-box/agent-box/internal/rawmcp"
)

// client is one MCP session with a fresh agent-box server over its stdio:
// newline-delimited JSON-RPC 2.0, exactly what an SSH client sees. The
// protocol is rawmcp's, whose calls run on the caller's goroutine; the
// client adds the server's stderr to transport errors and times calls.
type client struct {
	*rawmcp.Conn
	stderr *tailBuffer
}

// spawn starts a server but does not initialize it, so that the caller can
// time the handshake on its own.
func spawn(binary, stateDir string) (*client, error) { return spawnEnv(binary, stateDir, nil) }

// spawnEnv is spawn of a server with the environment env (nil: the
// bench's own).
func spawnEnv(binary, stateDir string, env []string) (*client, error) {
	cmd := exec.Command(binary, "--state-dir", stateDir)
	cmd.Env = env
	stderr := &tailBuffer{max: 8 << 10}
	cmd.Stderr = stderr
	conn, err := rawmcp.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", binary, err)
	}
	return &client{Conn: conn, stderr: stderr}, nil
}

// dial spawns a server and completes the MCP handshake.
func dial(binary, stateDir string) (*client, error) {
	c, err := spawn(binary, stateDir)
	if err != nil {
		return nil, err
	}
	if _, err := c.Initialize(clientName); err != nil {
		c.close()
		return nil, c.withStderr(err)
	}
	return c, nil
}

// clientName is the clientInfo name the benchmark announces.
const clientName = "agent-box-bench"

func (c *client) pid() int { return c.Cmd.Process.Pid }

// withStderr adds the server's last words to a transport or protocol
// error; a tool error is the server answering, and says enough.
func (c *client) withStderr(err error) error {
	var te *rawmcp.ToolError
	if err == nil || errors.As(err, &te) {
		return err
	}
	return fmt.Errorf("%w (server stderr: %s)", err, c.stderr.String())
}

// sendTool starts a tools/call without waiting for its reply.
func (c *client) sendTool(tool string, args map[string]any) (int, error) {
	return c.SendCall(tool, args)
}

// awaitTool waits for the reply to a tools/call and decodes its structured
// content into out (if not nil).
func (c *client) awaitTool(tool string, id int, out any) error {
	return c.withStderr(c.AwaitCall(tool, id, out))
}

// call runs one tool and returns how long the round trip took, from the
// first byte written to the reply decoded (a client has to parse it).
func (c *client) call(tool string, args map[string]any, out any) (time.Duration, error) {
	t0 := time.Now()
	err := c.CallInto(tool, args, out)
	return time.Since(t0), c.withStderr(err)
}

// close ends the session the way an SSH client does (stdin EOF) and waits
// for the server; one that lingers is killed.
func (c *client) close() { _ = c.Close() }

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

// start calls process_start, whose answer holds the run under "run".
func (c *client) start(args map[string]any) (runInfo, time.Duration, error) {
	var st struct {
		Run runInfo `json:"run"`
	}
	d, err := c.call("process_start", args, &st)
	return st.Run, d, err
}
