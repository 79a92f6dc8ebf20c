package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// tsClientDir is where .ci/setup installs the official MCP TypeScript SDK
// from the lockfile in testdata/fixtures/e2e/tsclient, whose driver.mjs
// the Go test steers.
const (
	tsClientDir     = ".tools/tsclient"
	tsClientFixture = "testdata/fixtures/e2e/tsclient"
)

// tsClient is driver.mjs running the SDK's Client: one JSON request a
// line in, one answer a line out.
type tsClient struct {
	t       *testing.T
	in      io.WriteCloser
	answers chan []byte
}

func startTSClient(t *testing.T) *tsClient {
	t.Helper()
	requireNode(t)
	modules := filepath.Join(repoRoot, tsClientDir, "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		missing(t, "the MCP TypeScript SDK is not installed in %s", tsClientDir)
	}
	// Node resolves the SDK from the script's directory upwards: the
	// driver runs from a directory whose node_modules is the installed one.
	dir := t.TempDir()
	script, err := os.ReadFile(filepath.Join(repoRoot, tsClientFixture, "driver.mjs"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "driver.mjs"), script, 0o600))
	require.NoError(t, os.Symlink(modules, filepath.Join(dir, "node_modules")))

	cmd := exec.Command("node", filepath.Join(dir, "driver.mjs"))
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	// The driver's stderr is the server command's too (ssh, agent-box).
	errf, err := os.CreateTemp(dir, "stderr-")
	require.NoError(t, err)
	cmd.Stderr = errf
	require.NoError(t, cmd.Start())
	errf.Close()
	c := &tsClient{t: t, in: in, answers: make(chan []byte, 1)}
	go func() {
		r := bufio.NewReaderSize(out, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				close(c.answers)
				return
			}
			c.answers <- line
		}
	}()
	t.Cleanup(func() {
		in.Close() // the driver closes its client and exits at EOF
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			b, _ := os.ReadFile(errf.Name())
			t.Logf("stderr of the TypeScript client and its server:\n%s", b)
		}
	})
	return c
}

// do sends one request and returns the answer; it fails the test unless
// the answer's ok is want.
func (c *tsClient) do(want bool, req map[string]any) map[string]any {
	c.t.Helper()
	b, err := json.Marshal(req)
	require.NoError(c.t, err)
	_, err = c.in.Write(append(b, '\n'))
	require.NoError(c.t, err)
	select {
	case line, ok := <-c.answers:
		require.True(c.t, ok, "the TypeScript driver exited during %s", b)
		var ans map[string]any
		require.NoError(c.t, json.Unmarshal(line, &ans), "driver answer: %s", line)
		require.Equal(c.t, want, ans["ok"], "%s: %s", b, line)
		return ans
	case <-time.After(90 * time.Second):
		// A bound against hanging: the longest step here is a short wait.
		c.t.Fatalf("no answer from the TypeScript driver to %s in 90 s", b)
		return nil
	}
}

// call calls tool and returns the structuredContent, which the SDK has
// validated against the tool's output schema.
func (c *tsClient) call(tool string, args map[string]any) map[string]any {
	c.t.Helper()
	ans := c.do(true, map[string]any{"op": "call", "tool": tool, "args": args})
	res := ans["result"].(map[string]any)
	require.NotEqual(c.t, true, res["isError"], "%s(%v) failed: %v", tool, args, res["content"])
	sc, ok := res["structuredContent"].(map[string]any)
	require.True(c.t, ok, "%s(%v): no structuredContent: %v", tool, args, res)
	return sc
}

// connect connects through cmd (its path and arguments) and lists the
// tools, so that the SDK validates every answer on this connection.
func (c *tsClient) connect(cmd *exec.Cmd, extra map[string]any) {
	c.t.Helper()
	req := map[string]any{"op": "connect", "command": cmd.Path, "args": cmd.Args[1:]}
	for k, v := range extra {
		req[k] = v
	}
	ans := c.do(true, req)
	require.Equal(c.t, "agent-box", ans["server"].(map[string]any)["name"])
	// The SDK's newest revision; 2026-07-28 is not in SDK 1.x (that lane
	// is protocol_test.go's).
	require.Equal(c.t, "2025-11-25", ans["protocolVersion"])

	tools := c.do(true, map[string]any{"op": "listTools"})["tools"].([]any)
	var names []string
	for _, x := range tools {
		tool := x.(map[string]any)
		names = append(names, tool["name"].(string))
		require.Equal(c.t, true, tool["hasOutputSchema"], "%s has no output schema: the SDK would not check its answers", tool["name"])
	}
	sort.Strings(names)
	require.Equal(c.t, []string{"process_kill", "process_list", "process_remove", "process_resize", "process_restart", "process_start", "process_wait", "process_write", "tail_log"}, names)
}

// TestTSClient runs agent-box's reason to exist with the official MCP
// TypeScript SDK's client (the one most JavaScript agents embed), over the
// real sshd: start a run, drop the ssh connection, reconnect, wait for the
// run, read its log. The SDK checks every answer's structuredContent
// against the tool's output schema, and fails the call when it does not
// match; the last step shows it does.
func TestTSClient(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("TypeScript client lane: starts node and an sshd")
	}
	c := startTSClient(t)
	srv := startSSHD(t)
	state := t.TempDir()
	reapAtCleanup(t, state)
	// Progress every 200 ms instead of every 3 s (see protocol_test.go).
	remote := func() *exec.Cmd {
		return srv.command("env", "AGENT_BOX_PROGRESS_MS=200", binary, "--state-dir", state)
	}

	c.connect(remote(), nil)
	run := c.call("process_start", map[string]any{"name": "gate", "stdin": "pipe",
		"command": `echo before; read line; echo "after $line"; exit 3`})
	run = run["run"].(map[string]any) // process_start answers its run under "run"
	require.Equal(t, "running", run["state"])
	require.NotContains(t, run, "exit_code", "a running run has no exit code: the field is left out")
	killAtCleanup(t, int(run["pid"].(float64)))

	// The connection dies with the run waiting on its stdin.
	c.do(true, map[string]any{"op": "drop"})
	waitUntil(t, "the remote agent-box to exit after its ssh client was killed", 20*time.Second, func() bool {
		return len(serverPIDs(state)) == 0
	})

	c.connect(remote(), nil)
	l := c.call("process_list", map[string]any{"name": "gate"})
	runs := l["runs"].([]any)
	require.Len(t, runs, 1)
	again := runs[0].(map[string]any)
	require.Equal(t, run["run_id"], again["run_id"])
	require.Equal(t, "running", again["state"], "the run outlived the connection that started it: %v", again)

	wr := c.call("process_write", map[string]any{"name": "gate", "data": "from the new connection\n"})
	require.EqualValues(t, 24, wr["written"])
	w := c.call("process_wait", map[string]any{"name": "gate", "timeout_ms": 30000})
	require.Equal(t, false, w["wait_timed_out"])
	ended := w["run"].(map[string]any)
	require.Equal(t, "exited", ended["state"])
	require.EqualValues(t, 3, ended["exit_code"])

	tail := c.call("tail_log", map[string]any{"name": "gate"})
	require.Equal(t, "before\nafter from the new connection\n", tail["content"])
	require.Equal(t, true, tail["eof"])
	require.EqualValues(t, 3, tail["exit_code"])

	// The SDK's own progress and cancellation (AbortSignal): it sends a
	// progress token, routes the notifications to this call, and on abort
	// sends notifications/cancelled; the run goes on.
	sleeper := c.call("process_start", map[string]any{"name": "sleeper", "argv": []any{"sleep", "300"}})
	sleeper = sleeper["run"].(map[string]any) // process_start answers its run under "run"
	killAtCleanup(t, int(sleeper["pid"].(float64)))
	ans := c.do(false, map[string]any{"op": "call", "tool": "process_wait", "args": map[string]any{"name": "sleeper", "timeout_ms": 600000},
		"cancelAfterProgress": 2})
	require.Equal(t, true, ans["cancelled"], "the wait ended otherwise than by its cancellation: %v", ans)
	require.Len(t, ans["progress"], 2, "progress notifications before the cancellation")
	l = c.call("process_list", map[string]any{"name": "sleeper"})
	require.Equal(t, "running", l["runs"].([]any)[0].(map[string]any)["state"], "cancelling the wait does not end the run")
	c.call("process_kill", map[string]any{"name": "sleeper", "signal": "KILL"})
	c.do(true, map[string]any{"op": "close"})

	// The validation runs: told that process_list's answer must hold a
	// property agent-box never sends, the SDK fails the call.
	c.connect(remote(), map[string]any{"breakOutputSchema": "process_list"})
	ans = c.do(false, map[string]any{"op": "call", "tool": "process_list", "args": map[string]any{}})
	require.Contains(t, ans["error"], "Structured content does not match the tool's output schema")
	require.Contains(t, ans["error"], "no_such_field")
	c.do(true, map[string]any{"op": "close"})
}
