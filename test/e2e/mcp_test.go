package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// callTimeout bounds one tool call; none here should take more than a
// fraction of it, so hitting it means the server stopped answering.
const callTimeout = 45 * time.Second

// session is an MCP client session with an agent-box reached through cmd:
// the go-sdk client speaks over cmd's stdin and stdout, as an agent's MCP
// client does over `ssh box -- agent-box`.
type session struct {
	t      *testing.T
	cmd    *exec.Cmd
	cs     *mcp.ClientSession
	stderr string // file with cmd's stderr, logged when the test fails
	// sent receives the tool name of every tools/call written to the
	// server, so that a test can act once a call is on the wire.
	sent chan string
}

func connect(t *testing.T, cmd *exec.Cmd) *session {
	t.Helper()
	errf, err := os.CreateTemp(t.TempDir(), "client-stderr-")
	require.NoError(t, err)
	cmd.Stderr = errf // a file, so that cmd.Wait never waits on a copier
	s := &session{t: t, cmd: cmd, stderr: errf.Name(), sent: make(chan string, 64)}
	t.Cleanup(func() {
		s.close()
		errf.Close()
		if t.Failed() {
			if b, _ := os.ReadFile(s.stderr); len(b) > 0 {
				t.Logf("stderr of %s:\n%s", filepath.Base(cmd.Path), b)
			}
		}
	})
	client := mcp.NewClient(&mcp.Implementation{Name: "agent-box-e2e", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	tr := &observedTransport{
		Transport: &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second},
		onWrite:   s.noteWrite,
	}
	cs, err := client.Connect(ctx, tr, nil)
	require.NoError(t, err, "connecting through %v", cmd.Args)
	s.cs = cs
	return s
}

func (s *session) noteWrite(msg jsonrpc.Message) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.Method != "tools/call" {
		return
	}
	var p struct{ Name string }
	if json.Unmarshal(req.Params, &p) == nil {
		select {
		case s.sent <- p.Name:
		default:
		}
	}
}

// close ends the session the polite way: stdin closed, the process waited for.
func (s *session) close() {
	if s.cs != nil {
		s.cs.Close()
		s.cs = nil
	}
}

// kill SIGKILLs the client-side process (for ssh: the connection drops
// without goodbye) and then reaps it.
func (s *session) kill() {
	s.t.Helper()
	require.NoError(s.t, s.cmd.Process.Kill())
	s.close() // stdin closed on a dead process; Close reaps it
}

// callAsync sends a call and returns at once; the channel gets its error
// (nil when it was answered, whatever the answer).
func (s *session) callAsync(tool string, args map[string]any) <-chan error {
	cs := s.cs // read here: kill and close clear s.cs while the call runs
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		done <- err
	}()
	return done
}

// waitSent returns once a tools/call of tool has been written to the
// server (it may not have been read yet).
func (s *session) waitSent(tool string) {
	s.t.Helper()
	timeout := time.After(callTimeout)
	for {
		select {
		case name := <-s.sent:
			if name == tool {
				return
			}
		case <-timeout:
			s.t.Fatalf("no %s call was written within %s", tool, callTimeout)
		}
	}
}

func (s *session) call(tool string, args map[string]any) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return s.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
}

// ok calls tool, requires success, and decodes its structured content
// into out.
func (s *session) ok(tool string, args map[string]any, out any) {
	s.t.Helper()
	res, err := s.call(tool, args)
	require.NoError(s.t, err, "calling %s(%v)", tool, args)
	require.False(s.t, res.IsError, "%s(%v) failed: %s", tool, args, text(res))
	require.NotNil(s.t, res.StructuredContent, "%s(%v) returned no structured content: %s", tool, args, text(res))
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(s.t, err)
	require.NoError(s.t, json.Unmarshal(b, out), "%s result: %s", tool, b)
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// observedTransport reports every message its connection writes.
type observedTransport struct {
	mcp.Transport
	onWrite func(jsonrpc.Message)
}

func (t *observedTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &observedConn{Connection: c, onWrite: t.onWrite}, nil
}

type observedConn struct {
	mcp.Connection
	onWrite func(jsonrpc.Message)
}

func (c *observedConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	err := c.Connection.Write(ctx, msg)
	if err == nil {
		c.onWrite(msg)
	}
	return err
}

// runInfo is the part of a run (process_list, process_wait) the tests read.
type runInfo struct {
	Name        string `json:"name"`
	RunID       string `json:"run_id"`
	State       string `json:"state"`
	Reason      string `json:"reason"`
	PID         int    `json:"pid"`
	ExitCode    *int   `json:"exit_code"`
	Signal      string `json:"signal"`
	CaptureMode string `json:"capture_mode"`
	LogBytes    int64  `json:"log_bytes"`
}

type listOut struct {
	Runs []runInfo `json:"runs"`
}

type waitOut struct {
	Run      runInfo `json:"run"`
	TimedOut bool    `json:"wait_timed_out"`
}

// tailOut is tail_log's answer.
type tailOut struct {
	RunID     string  `json:"run_id"`
	Content   string  `json:"content"`
	Encoding  string  `json:"encoding"`
	Stdout    *string `json:"stdout"`
	Stderr    *string `json:"stderr"`
	Offset    int64   `json:"offset"`
	EndOffset int64   `json:"end_offset"`
	Truncated bool    `json:"truncated"`
	EOF       bool    `json:"eof"`
	State     string  `json:"state"`
	ExitCode  *int    `json:"exit_code"`
	LogBytes  int64   `json:"log_bytes"`
}

// logBytes holds what a client has reassembled of a run's log: for a
// combined run the one stream, for a framed run stdout and stderr apart.
type logBytes struct {
	combined, stdout, stderr []byte
}

// window reads one tail_log window at off, in base64 (exact bytes), and
// appends what it holds to got.
func (s *session) window(name string, framed bool, off int64, maxBytes int, got *logBytes) tailOut {
	s.t.Helper()
	var w tailOut
	s.ok("tail_log", map[string]any{"name": name, "offset": off, "max_bytes": maxBytes, "encoding": "base64"}, &w)
	require.Equal(s.t, off, w.Offset, "tail_log answered for another offset")
	require.GreaterOrEqual(s.t, w.EndOffset, w.Offset)
	if framed {
		// Framed windows hold whole frames, and one frame may be larger
		// than max_bytes (logread's package comment); no size bound here.
		require.NotNil(s.t, w.Stdout, "framed run: tail_log has no stdout field (content=%q)", w.Content)
		require.NotNil(s.t, w.Stderr, "framed run: tail_log has no stderr field (content=%q)", w.Content)
		got.stdout = append(got.stdout, unb64(s.t, *w.Stdout)...)
		got.stderr = append(got.stderr, unb64(s.t, *w.Stderr)...)
	} else {
		got.combined = append(got.combined, unb64(s.t, w.Content)...)
	}
	return w
}

// readToEOF continues reading a finished run's log from off until eof, as
// a client resuming from end_offset does, and returns the last answer.
func (s *session) readToEOF(name string, framed bool, off int64, maxBytes int, got *logBytes) tailOut {
	s.t.Helper()
	for i := 0; ; i++ {
		require.Less(s.t, i, 1<<16, "tail_log never reached eof")
		w := s.window(name, framed, off, maxBytes, got)
		if !framed {
			// Exact windows of a combined log are cut at max_bytes exactly.
			require.Equal(s.t, min(int64(maxBytes), w.LogBytes-off), w.EndOffset-off, "window at %d with max_bytes=%d", off, maxBytes)
		}
		if w.EOF {
			return w
		}
		// The run has exited (the caller waited for it): every answer short
		// of eof must move on, or a client following end_offset loops.
		require.Greater(s.t, w.EndOffset, off, "tail_log made no progress at offset %d of an exited run (log_bytes %d)", off, w.LogBytes)
		off = w.EndOffset
	}
}

func unb64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	require.NoError(t, err, "not base64: %q", s)
	return b
}

// underRun decodes into v the run of an answer that holds it under "run"
// (process_start's).
func underRun(v any) any {
	return &struct {
		Run any `json:"run"`
	}{v}
}
