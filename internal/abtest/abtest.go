// Package abtest drives a real agent-box binary over MCP for tests: it
// builds the binary, connects the official go-sdk client to it (over pipes,
// or over any command such as ssh), and decodes tool results. Test support
// only; nothing in agent-box itself imports it.
package abtest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// RepoRoot is the directory holding go.mod.
func RepoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the agent-box module")
	}
	return filepath.Dir(mod), nil
}

// Server is one agent-box server and an MCP session with it: a process of
// its own (Cmd), or one that ConnectServe runs in this process.
type Server struct {
	T   testing.TB
	Cmd *exec.Cmd
	// stop waits for a server in this process to stop once its
	// client has gone.
	stop func()
	// CallTimeout bounds each call (2 minutes when zero): a test of a call
	// that must not hang sets it short, to fail rather than wait.
	CallTimeout time.Duration
	cs          *mcp.ClientSession

	mu       sync.Mutex
	progress []*mcp.ProgressNotificationParams
	// listChanged: a notifications/tools/list_changed came (ToolListChanged)
	listChanged chan struct{}
	schemas     map[string]*jsonschema.Resolved // output schemas by tool, from tools/list
}

// Connect starts binary --state-dir stateDir and opens a session. When the
// test ends, the runs still alive under stateDir are killed.
func Connect(t testing.TB, binary, stateDir string) *Server {
	t.Helper()
	return ConnectCmd(t, exec.Command(binary, "--state-dir", stateDir))
}

// ConnectEnv is Connect with env (KEY=value) added to the server's
// environment: the settings main reads (AGENT_BOX_PROGRESS_MS...).
func ConnectEnv(t testing.TB, binary, stateDir string, env ...string) *Server {
	t.Helper()
	cmd := exec.Command(binary, "--state-dir", stateDir)
	cmd.Env = append(os.Environ(), env...)
	return ConnectCmd(t, cmd)
}

// ConnectCmd opens a session with the MCP server that cmd runs on its
// stdin/stdout (agent-box itself, or ssh running it remotely). When the
// test ends, the runs still alive under the state dir its arguments name
// (--state-dir) are killed.
func ConnectCmd(t testing.TB, cmd *exec.Cmd) *Server {
	t.Helper()
	if dir := stateDirArg(cmd.Args); dir != "" {
		ReapRunsAtCleanup(t, dir)
	}
	if cmd.Stderr == nil {
		cmd.Stderr = &logWriter{t: t}
	}
	s := &Server{T: t, Cmd: cmd}
	s.open(&mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second})
	return s
}

// ConnectServe opens a session with a server that serve runs in this
// process, on pipes: it reads requests from in and writes answers to out
// until in ends or ctx is done. For tests of what the tools answer, where
// a process of its own adds nothing but its start, which is costly under
// -race (docs/architecture/performance.md, "The test suite"). When the
// test ends the session is closed, the server waited for, and the runs
// still alive under stateDir are killed.
func ConnectServe(t testing.TB, stateDir string, serve func(ctx context.Context, in io.Reader, out io.Writer) error) *Server {
	t.Helper()
	ReapRunsAtCleanup(t, stateDir)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := serve(ctx, inR, outW)
		outW.Close()
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("the server stopped: %v", err)
		}
	}()
	s := &Server{T: t}
	s.stop = func() {
		inW.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("the server was still serving 10 s after its client went")
			cancel()
			<-done
		}
		cancel()
	}
	s.open(&mcp.IOTransport{Reader: outR, Writer: inW})
	return s
}

// open connects the go-sdk client over tr.
func (s *Server) open(tr mcp.Transport) {
	t := s.T
	t.Helper()
	s.listChanged = make(chan struct{}, 1)
	client := mcp.NewClient(&mcp.Implementation{Name: "agent-box-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			s.mu.Lock()
			s.progress = append(s.progress, req.Params)
			s.mu.Unlock()
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case s.listChanged <- struct{}{}:
			default:
			}
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, tr, nil)
	require.NoError(t, err)
	s.cs = cs
	t.Cleanup(s.Close)
}

// ToolListChanged receives when the server said its tool list changed.
func (s *Server) ToolListChanged() <-chan struct{} { return s.listChanged }

// Progress returns the progress notifications received so far for token.
func (s *Server) Progress(token string) []*mcp.ProgressNotificationParams {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*mcp.ProgressNotificationParams
	for _, p := range s.progress {
		if p.ProgressToken == token {
			out = append(out, p)
		}
	}
	return out
}

// resolvedSchemas holds the output schemas resolved so far, by their JSON:
// every connection asks tools/list, but most get the schemas an earlier one
// got, and resolving them again costs a test more than its calls.
var resolvedSchemas sync.Map

// outputSchema returns tool's output schema as tools/list gives it,
// resolved for validation; tools/list is asked once per connection.
func (s *Server) outputSchema(tool string) *jsonschema.Resolved {
	s.T.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.schemas == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := s.cs.ListTools(ctx, nil)
		require.NoError(s.T, err, "tools/list")
		s.schemas = map[string]*jsonschema.Resolved{}
		for _, tl := range res.Tools {
			if tl.OutputSchema == nil {
				continue
			}
			b, err := json.Marshal(tl.OutputSchema)
			require.NoError(s.T, err)
			if rs, ok := resolvedSchemas.Load(string(b)); ok {
				s.schemas[tl.Name] = rs.(*jsonschema.Resolved)
				continue
			}
			var sc jsonschema.Schema
			require.NoError(s.T, json.Unmarshal(b, &sc), "output schema of %s", tl.Name)
			rs, err := sc.Resolve(nil)
			require.NoError(s.T, err, "output schema of %s", tl.Name)
			resolvedSchemas.Store(string(b), rs)
			s.schemas[tl.Name] = rs
		}
	}
	return s.schemas[tool]
}

// Session is the underlying go-sdk session.
func (s *Server) Session() *mcp.ClientSession { return s.cs }

// Close ends the session the polite way (stdin EOF).
func (s *Server) Close() {
	if s.cs != nil {
		s.cs.Close()
		s.cs = nil
	}
	if s.stop != nil {
		s.stop()
		s.stop = nil
	}
}

// Kill SIGKILLs the server process, as a dropped SSH connection would end
// the remote agent-box.
func (s *Server) Kill() {
	if s.Cmd == nil {
		s.T.Fatal("Kill needs a server process of its own (Connect, not ConnectServe)")
	}
	// No Cmd.Wait here: the go-sdk transport waits for the process itself
	// when it sees the connection drop, and a second Wait can block.
	s.Cmd.Process.Kill()
	if s.cs != nil {
		s.cs.Close()
		s.cs = nil
	}
}

type logWriter struct{ t testing.TB }

func (w *logWriter) Write(p []byte) (int, error) {
	w.t.Logf("server stderr: %s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Result is a decoded tool result.
type Result struct {
	IsError bool
	Text    string
	Data    map[string]any
}

// Call calls tool; a protocol error fails the test, a tool error does not.
// A successful result's structured content must match the tool's output
// schema, so that every end-to-end test also pins the schemas.
func (s *Server) Call(tool string, args map[string]any) Result {
	s.T.Helper()
	return s.call(&mcp.CallToolParams{Name: tool, Arguments: args})
}

// CallWithProgress is Call with a progress token in the request's _meta.
func (s *Server) CallWithProgress(tool string, args map[string]any, token string) Result {
	s.T.Helper()
	p := &mcp.CallToolParams{Name: tool, Arguments: args}
	p.SetProgressToken(token)
	return s.call(p)
}

// CallMeta is Call with meta as the request's _meta (a request id,
// wire.RequestMeta).
func (s *Server) CallMeta(tool string, args, meta map[string]any) Result {
	s.T.Helper()
	return s.call(&mcp.CallToolParams{Name: tool, Arguments: args, Meta: meta})
}

func (s *Server) call(p *mcp.CallToolParams) Result {
	s.T.Helper()
	tool := p.Name
	d := s.CallTimeout
	if d == 0 {
		d = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	res, err := s.cs.CallTool(ctx, p)
	require.NoError(s.T, err, "calling %s", tool)
	var r Result
	r.IsError = res.IsError
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			r.Text += tc.Text
		}
	}
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		require.NoError(s.T, err)
		require.NoError(s.T, json.Unmarshal(b, &r.Data))
		if !res.IsError {
			if rs := s.outputSchema(tool); rs != nil {
				var v any
				require.NoError(s.T, json.Unmarshal(b, &v))
				require.NoError(s.T, rs.Validate(v), "%s: structured content does not match the output schema: %.500s", tool, b)
			}
		}
	}
	return r
}

// OK calls tool and fails the test unless it succeeded.
func (s *Server) OK(tool string, args map[string]any) Result {
	s.T.Helper()
	r := s.Call(tool, args)
	require.False(s.T, r.IsError, "%s(%v) failed: %s", tool, args, r.Text)
	return r
}

// ReadAll drains a run's log with tail_log windows of maxBytes, resuming
// from end_offset as a client would, until eof. Combined runs fill all;
// framed runs fill stdout and stderr.
func (s *Server) ReadAll(name string, maxBytes int, framed bool) (all, stdout, stderr []byte) {
	s.T.Helper()
	off := int64(0)
	for i := 0; ; i++ {
		require.Less(s.T, i, 100000, "tail_log made no progress")
		r := s.OK("tail_log", map[string]any{"name": name, "offset": off, "max_bytes": maxBytes, "encoding": "base64"})
		d := r.Data
		require.Equal(s.T, off, Num(d["offset"]))
		if framed {
			stdout = append(stdout, B64(s.T, Str(d["stdout"]))...)
			stderr = append(stderr, B64(s.T, Str(d["stderr"]))...)
		} else {
			all = append(all, B64(s.T, Str(d["content"]))...)
		}
		end := Num(d["end_offset"])
		if d["eof"] == true {
			return
		}
		if end == off {
			// Nothing new yet and the run is still writing: follow.
			s.OK("tail_log", map[string]any{"name": name, "offset": off, "max_bytes": 1, "wait_ms": 1000})
		}
		off = end
	}
}

// Num reads a JSON number.
func Num(v any) int64 {
	switch n := v.(type) {
	case float64:
		return int64(n)
	case json.Number:
		i, _ := n.Int64()
		return i
	}
	return -1
}

// Str reads a JSON string ("" for anything else).
func Str(v any) string { s, _ := v.(string); return s }

// Chunks joins the text of a framed tail_log answer's chunks of stream
// ("stdout", "stderr"), or of both ("") in the order written.
func Chunks(d map[string]any, stream string) string {
	var b strings.Builder
	cs, _ := d["chunks"].([]any)
	for _, c := range cs {
		m, _ := c.(map[string]any)
		if stream == "" || m["stream"] == stream {
			b.WriteString(Str(m["text"]))
		}
	}
	return b.String()
}

// B64 decodes standard base64.
func B64(t testing.TB, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	require.NoError(t, err)
	return b
}

// Missing skips t for an absent dependency, or fails it in CI (CI set and
// not 0 or false), where a missing dependency means .ci/setup is broken
// rather than that this machine lacks it.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if v := os.Getenv("CI"); v != "" && v != "0" && v != "false" {
		t.Fatalf("%s (CI=%s: .ci/setup must install it)", msg, v)
	}
	t.Skipf("%s; run `bash .ci/setup` to install it", msg)
}

// WaitFor polls cond; only for facts no event tells of (a process's death
// seen from outside).
func WaitFor(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// RunOf returns the run named name from a process_list answer.
func RunOf(t testing.TB, r Result, name string) map[string]any {
	t.Helper()
	list, _ := r.Data["runs"].([]any)
	for _, x := range list {
		m := x.(map[string]any)
		if m["name"] == name {
			return m
		}
	}
	t.Fatalf("run %q not in list: %s", name, r.Text)
	return nil
}

// SameBytes compares long outputs and reports where they differ rather
// than printing both.
func SameBytes(t testing.TB, want, got []byte, format string, args ...any) bool {
	t.Helper()
	if bytes.Equal(want, got) {
		return true
	}
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	t.Errorf("%s: got %d bytes, want %d; first difference at byte %d: got %q, want %q", fmt.Sprintf(format, args...),
		len(got), len(want), i, got[i:min(len(got), i+40)], want[i:min(len(want), i+40)])
	return false
}

// Run is the run a result holds under "run" (process_start, process_wait,
// process_kill ...), or nil.
func (r Result) Run() map[string]any {
	m, _ := r.Data["run"].(map[string]any)
	return m
}
