package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// inspectorBin is the MCP Inspector that .ci/setup installs from the
// lockfile in testdata/fixtures/e2e/inspector. Its package declares engines
// node >= 22.19, but its --cli runs on Node 20 (these lanes run it there).
const inspectorBin = ".tools/inspector/node_modules/.bin/mcp-inspector"

// requireInspector skips or, in CI, fails the test when Node.js or the
// pinned inspector is missing.
func requireInspector(t *testing.T) {
	t.Helper()
	requireNode(t)
	if _, err := os.Stat(filepath.Join(repoRoot, inspectorBin)); err != nil {
		missing(t, "the MCP Inspector is not installed at %s", inspectorBin)
	}
}

// requireNode skips or, in CI, fails the test when Node.js is missing.
func requireNode(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing(t, "%s not found: the Node.js lanes need it", tool)
		}
	}
}

// inspector runs `mcp-inspector --cli agent-box --state-dir STATE ARGS...`
// with env as its environment and decodes the JSON it prints. Its CLI passes --tool-arg values as
// strings and converts each to the type the tool's inputSchema gives the
// property (integer, boolean, array, object), so these calls also check
// that the published schemas say what the handlers accept.
func inspector(t *testing.T, env []string, state string, args ...string) map[string]any {
	t.Helper()
	stdout, stderr := runInspectorEnv(t, env, state, append([]string{"--cli", binary, "--state-dir", state}, args...)...)
	var out map[string]any
	require.NoError(t, json.Unmarshal(stdout, &out), "mcp-inspector %v printed no JSON object:\n%s\nstderr: %s", args, stdout, stderr)
	return out
}

// runInspector runs mcp-inspector with args and returns what it printed;
// it fails the test unless the inspector exits 0. state is the state dir
// of the agent-box it runs, asked directly when the inspector hangs.
func runInspector(t *testing.T, state string, args ...string) (stdout, stderr []byte) {
	t.Helper()
	return runInspectorEnv(t, nil, state, args...)
}

// runInspectorEnv is runInspector with env as the inspector's environment
// (nil: this process's).
func runInspectorEnv(t *testing.T, env []string, state string, args ...string) (stdout, stderr []byte) {
	t.Helper()
	bin := filepath.Join(repoRoot, inspectorBin)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	// The launcher runs the CLI in a second node, which runs agent-box:
	// on timeout kill the whole group, and stop waiting for pipes that a
	// straggler holds.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		// The inspector hides the server's stderr: ask the server directly.
		t.Fatalf("mcp-inspector %v did not finish in 30 s: the server never answered?\nstdout: %s\nstderr: %s\n%s",
			args, out.Bytes(), errOut.Bytes(), rawExchange(state, args))
	}
	require.NoError(t, err, "mcp-inspector %v\nstdout: %s\nstderr: %s", args, out.Bytes(), errOut.Bytes())
	return out.Bytes(), errOut.Bytes()
}

// toolResult checks a tools/call answer succeeded and returns its
// structuredContent.
func toolResult(t *testing.T, out map[string]any) map[string]any {
	t.Helper()
	require.NotEqual(t, true, out["isError"], "tool failed: %v", out["content"])
	sc, ok := out["structuredContent"].(map[string]any)
	require.True(t, ok, "no structuredContent in %v", out)
	return sc
}

func TestInspectorCLI(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("inspector lane: starts node several times")
	}
	requireInspector(t)
	state := t.TempDir()
	// For an agent-box built with -race (the inspector passes its
	// environment on): no 1 s pause at each exit, and reports in files.
	race := filepath.Join(t.TempDir(), "race")
	env := append(os.Environ(), "GORACE=atexit_sleep_ms=0 log_path="+race)
	t.Cleanup(func() { checkRaceLogs(t, race) })

	list := inspector(t, env, state, "--method", "tools/list")
	tools, ok := list["tools"].([]any)
	require.True(t, ok, "tools/list printed no tools: %v", list)
	byName := map[string]map[string]any{}
	var names []string
	for _, x := range tools {
		tool := x.(map[string]any)
		name, _ := tool["name"].(string)
		byName[name] = tool
		names = append(names, name)
	}
	sort.Strings(names)
	require.Equal(t, []string{"process_kill", "process_list", "process_remove", "process_resize", "process_restart", "process_start", "process_wait", "process_write", "tail_log"}, names)
	for name, tool := range byName {
		require.NotEmpty(t, tool["description"], "%s has no description", name)
		for _, key := range []string{"inputSchema", "outputSchema"} {
			schema, ok := tool[key].(map[string]any)
			require.True(t, ok, "%s has no %s: %v", name, key, tool)
			require.Equal(t, "object", schema["type"], "%s %s", name, key)
			require.NotEmpty(t, schema["properties"], "%s %s has no properties", name, key)
		}
	}
	start := byName["process_start"]["inputSchema"].(map[string]any)
	for _, p := range []string{"name", "command", "argv", "capture_mode"} {
		require.Contains(t, start["properties"], p, "process_start inputSchema")
	}
	require.Contains(t, start["required"], "name")
	// What an answer requires is one branch of anyOf; a failure's
	// {"error": ...} is the other (tools orError).
	tailOutSchema := byName["tail_log"]["outputSchema"].(map[string]any)
	branches, _ := tailOutSchema["anyOf"].([]any)
	require.Len(t, branches, 2, "tail_log outputSchema: an answer's fields or an error")
	// content is absent where a framed run's chunks hold the text.
	for _, p := range []string{"offset", "end_offset", "eof", "state"} {
		require.Contains(t, branches[0].(map[string]any)["required"], p, "tail_log outputSchema required")
	}
	require.Equal(t, []any{"error"}, branches[1].(map[string]any)["required"])

	run := toolResult(t, inspector(t, env, state, "--method", "tools/call", "--tool-name", "process_start",
		"--tool-arg", "name=smoke", "--tool-arg", "command=echo hello"))
	run = run["run"].(map[string]any) // process_start answers its run under "run"
	require.Equal(t, "smoke", run["name"])
	require.Greater(t, run["pid"], float64(0))
	runID := run["run_id"]
	require.NotEmpty(t, runID)

	// timeout_ms reaches the server as a number only if the schema says
	// integer: a string would be refused.
	wait := toolResult(t, inspector(t, env, state, "--method", "tools/call", "--tool-name", "process_wait",
		"--tool-arg", "name=smoke", "--tool-arg", "timeout_ms=30000"))
	require.Equal(t, false, wait["wait_timed_out"])
	waited := wait["run"].(map[string]any)
	require.Equal(t, runID, waited["run_id"])
	require.Equal(t, "exited", waited["state"])
	require.Equal(t, float64(0), waited["exit_code"])

	tail := toolResult(t, inspector(t, env, state, "--method", "tools/call", "--tool-name", "tail_log",
		"--tool-arg", "name=smoke"))
	require.Equal(t, "hello\n", tail["content"])
	require.Equal(t, float64(0), tail["offset"])
	require.Equal(t, float64(6), tail["end_offset"])
	require.Equal(t, true, tail["eof"])
	require.Equal(t, float64(0), tail["exit_code"])

	// A window by byte offset in base64, resumed from its end_offset.
	first := toolResult(t, inspector(t, env, state, "--method", "tools/call", "--tool-name", "tail_log",
		"--tool-arg", "name=smoke", "--tool-arg", "offset=0", "--tool-arg", "max_bytes=4", "--tool-arg", "encoding=base64"))
	require.Equal(t, "aGVsbA==", first["content"], "base64 of \"hell\"")
	require.Equal(t, float64(4), first["end_offset"])
	require.Equal(t, false, first["eof"])
	rest := toolResult(t, inspector(t, env, state, "--method", "tools/call", "--tool-name", "tail_log",
		"--tool-arg", "name=smoke", "--tool-arg", "offset=4", "--tool-arg", "encoding=base64"))
	require.Equal(t, "bwo=", rest["content"], "base64 of \"o\\n\"")
	require.Equal(t, true, rest["eof"])
}

// TestInspectorStrict: the inspector's schema lint (--strict) finds no
// error and no warning in agent-box's tools, as a client that maps tool
// schemas onto a narrower dialect (Gemini's OpenAPI subset) needs. It
// warned 11 times of exit_code typed ["integer", "null"] (issue 14).
func TestInspectorStrict(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("inspector lane: starts node")
	}
	requireInspector(t)
	lint := regexp.MustCompile(`(?m)^(Warning|Error): tool |^\d+ errors?, \d+ warnings? across |Schema portability`)

	// The lint runs, and this is how it reports: a server with the schema
	// agent-box had gets a warning, in the form the check below looks for.
	_, stderr := runInspector(t, "", "--cli", "--strict", testBinary(t), fakeMCPServerArg, "--method", "tools/list")
	require.Contains(t, string(stderr), `Warning: tool "nullable"`, "the lint did not report a type array:\n%s", stderr)
	require.Contains(t, string(stderr), "0 errors, 1 warning across 1 tool.", "%s", stderr)
	require.Regexp(t, lint, string(stderr))

	state := t.TempDir()
	stdout, stderr := runInspector(t, state, "--cli", "--strict", binary, "--state-dir", state, "--method", "tools/list")
	require.NotRegexp(t, lint, string(stderr), "agent-box's tool schemas are not portable")
	var list struct{ Tools []map[string]any }
	require.NoError(t, json.Unmarshal(stdout, &list), "%s", stdout)
	require.Len(t, list.Tools, 9, "the lint saw every tool")
	for _, tool := range list.Tools {
		require.NotNil(t, tool["outputSchema"], "%s has no output schema to lint", tool["name"])
	}
}

// rawExchange sends agent-box the handshake and the request of an
// inspector call that had no answer (its method, with empty params), closes
// stdin, and reports what came back on stdout and stderr.
func rawExchange(state string, inspectorArgs []string) string {
	if state == "" {
		return "(the server is not a local agent-box: not asked directly)"
	}
	method := ""
	for i, a := range inspectorArgs {
		if a == "--method" && i+1 < len(inspectorArgs) {
			method = inspectorArgs[i+1]
		}
	}
	in := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"` + method + `","params":{}}
`
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "--state-dir", state)
	cmd.Stdin = strings.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return fmt.Sprintf("agent-box given initialize and %s directly (exit: %v):\nstdout: %s\nstderr: %s", method, err, stdout.Bytes(), stderr.Bytes())
}
