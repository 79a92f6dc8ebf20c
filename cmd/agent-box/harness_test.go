package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// binary is agent-box built once for the whole test run: the tests drive
// the real executable over pipes, as an MCP client would.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "agent-box-bin-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "agent-box")
	build := exec.Command("go", "build", "-race", "-o", binary, ".")
	if os.Getenv("AGENT_BOX_TEST_NORACE") != "" {
		build = exec.Command("go", "build", "-o", binary, ".")
	}
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building agent-box:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// server is one agent-box process and an MCP session with it.
type server struct {
	t   *testing.T
	cmd *exec.Cmd
	cs  *mcp.ClientSession
}

func connect(t *testing.T, stateDir string) *server {
	t.Helper()
	cmd := exec.Command(binary, "--state-dir", stateDir)
	cmd.Stderr = &prefixWriter{t: t}
	client := mcp.NewClient(&mcp.Implementation{Name: "agent-box-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	require.NoError(t, err)
	s := &server{t: t, cmd: cmd, cs: cs}
	t.Cleanup(func() { s.close() })
	return s
}

func (s *server) close() {
	if s.cs != nil {
		s.cs.Close()
		s.cs = nil
	}
}

// kill SIGKILLs the server, as a dropped SSH connection would end it.
func (s *server) kill() {
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cs.Close()
	s.cs = nil
}

type prefixWriter struct{ t *testing.T }

func (w *prefixWriter) Write(p []byte) (int, error) {
	w.t.Logf("server stderr: %s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// result is a decoded tool result.
type result struct {
	IsError bool
	Text    string
	Data    map[string]any
}

func (s *server) call(tool string, args map[string]any) result {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	require.NoError(s.t, err, "calling %s", tool)
	var r result
	r.IsError = res.IsError
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			r.Text += tc.Text
		}
	}
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		require.NoError(s.t, err)
		require.NoError(s.t, json.Unmarshal(b, &r.Data))
	}
	return r
}

// ok calls tool and fails the test unless it succeeded.
func (s *server) ok(tool string, args map[string]any) result {
	s.t.Helper()
	r := s.call(tool, args)
	require.False(s.t, r.IsError, "%s(%v) failed: %s", tool, args, r.Text)
	return r
}

func num(v any) int64 {
	switch n := v.(type) {
	case float64:
		return int64(n)
	case json.Number:
		i, _ := n.Int64()
		return i
	}
	return -1
}

func str(v any) string { s, _ := v.(string); return s }

// waitFor polls cond; used only where no event exists to wait on (a
// process's death seen from outside).
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runOf returns the run named name from a process_list answer.
func runOf(t *testing.T, r result, name string) map[string]any {
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

// readAll drains a run's log with tail_log windows of maxBytes, as a client
// resuming from end_offset would, and returns the decoded bytes.
func (s *server) readAll(name string, maxBytes int, framed bool) (all, stdout, stderr []byte) {
	s.t.Helper()
	off := int64(0)
	for i := 0; ; i++ {
		require.Less(s.t, i, 100000, "tail_log made no progress")
		r := s.ok("tail_log", map[string]any{"name": name, "offset": off, "max_bytes": maxBytes, "encoding": "base64"})
		d := r.Data
		require.Equal(s.t, off, num(d["offset"]))
		if framed {
			so, se := b64(s.t, str(d["stdout"])), b64(s.t, str(d["stderr"]))
			stdout = append(stdout, so...)
			stderr = append(stderr, se...)
		} else {
			all = append(all, b64(s.t, str(d["content"]))...)
		}
		end := num(d["end_offset"])
		if d["eof"] == true {
			return
		}
		if end == off {
			// Nothing new yet and the run is still writing: follow.
			s.ok("tail_log", map[string]any{"name": name, "offset": off, "max_bytes": 1, "wait_ms": 1000})
		}
		off = end
	}
}
