package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/rawmcp"
	"github.com/agent-box/agent-box/proc"
)

// TestProtocolRevisions speaks both MCP revisions agent-box serves, over
// the real sshd, byte by byte as a client of that revision writes them:
// 2025-11-25, which opens with the initialize handshake, and 2026-07-28,
// the stateless one, which opens with server/discover and names its
// protocol version, capabilities and identity in the _meta of every
// request (the revision current Claude Code speaks). In each: tools/list,
// a process_wait that reports progress, its cancellation with
// notifications/cancelled, and every structuredContent checked against
// the tool's output schema.
func TestProtocolRevisions(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("ssh lane: starts an sshd")
	}
	srv := startSSHD(t)
	for _, rev := range []struct {
		version   string
		stateless bool
	}{
		{"2025-11-25", false},
		{"2026-07-28", true},
	} {
		// Each revision has a state dir of its own; they share the sshd.
		t.Run(rev.version, func(t *testing.T) { t.Parallel(); testRevision(t, srv, rev.version, rev.stateless) })
	}
}

func testRevision(t *testing.T, srv *sshServer, version string, stateless bool) {
	state := t.TempDir()
	reapAtCleanup(t, state)
	// Progress every 200 ms instead of every 3 s, so that two notifications
	// come quickly; env execs agent-box, whose argv stays the one
	// serverPIDs looks for.
	c := dialRaw(t, srv.command("env", "AGENT_BOX_PROGRESS_MS=200", binary, "--state-dir", state))

	if stateless {
		// Without the revision's _meta and without initialize, a request
		// is refused: what the calls below carry is what makes them work.
		err := c.Request("tools/list", map[string]any{}, nil)
		var rpcErr *rawmcp.RPCError
		require.ErrorAs(t, err, &rpcErr, "tools/list with neither initialize nor _meta")
		require.Contains(t, rpcErr.Message, "before initialize")

		c.Meta = rawmcp.StatelessMeta(version, "agent-box-e2e")
		var disc struct {
			SupportedVersions []string `json:"supportedVersions"`
			Capabilities      struct {
				Tools map[string]any `json:"tools"`
			} `json:"capabilities"`
			Meta map[string]any `json:"_meta"`
		}
		require.NoError(t, c.Request("server/discover", map[string]any{}, &disc))
		require.Contains(t, disc.SupportedVersions, version)
		require.NotNil(t, disc.Capabilities.Tools, "server/discover: no tools capability")
		requireServerInfo(t, disc.Meta, "server/discover")
	} else {
		res, err := c.InitializeVersion("agent-box-e2e", version)
		require.NoError(t, err)
		require.Equal(t, version, res["protocolVersion"], "initialize: the server did not agree to %s", version)
	}

	var list struct {
		Tools []struct {
			Name         string          `json:"name"`
			OutputSchema json.RawMessage `json:"outputSchema"`
		} `json:"tools"`
	}
	require.NoError(t, c.Request("tools/list", map[string]any{}, &list))
	schemas := map[string]*jsonschema.Resolved{}
	for _, tool := range list.Tools {
		var s jsonschema.Schema
		require.NoError(t, json.Unmarshal(tool.OutputSchema, &s), "output schema of %s", tool.Name)
		rs, err := s.Resolve(nil)
		require.NoError(t, err, "output schema of %s", tool.Name)
		schemas[tool.Name] = rs
	}
	require.Len(t, schemas, 9, "tools/list")

	// call makes a tools/call with params (name, arguments, _meta) and
	// checks the answer's structuredContent against the tool's schema.
	call := func(params map[string]any) map[string]any {
		t.Helper()
		var res struct {
			StructuredContent map[string]any `json:"structuredContent"`
			IsError           bool           `json:"isError"`
			Content           []struct {
				Text string `json:"text"`
			} `json:"content"`
			Meta map[string]any `json:"_meta"`
		}
		done := make(chan error, 1)
		go func() { done <- c.Request("tools/call", params, &res) }()
		select {
		case err := <-done:
			require.NoError(t, err, "tools/call %v", params)
		case <-time.After(callTimeout):
			// A bound against hanging, not a measurement: every call here
			// answers in well under a second once it can.
			t.Fatalf("tools/call %v: no answer in %s", params, callTimeout)
		}
		require.False(t, res.IsError, "tools/call %v failed: %v", params, res.Content)
		require.NotNil(t, res.StructuredContent, "tools/call %v: no structuredContent", params)
		tool := params["name"].(string)
		require.NoError(t, schemas[tool].Validate(jsonValue(t, res.StructuredContent)),
			"%s: structuredContent does not match the output schema: %v", tool, res.StructuredContent)
		if stateless {
			requireServerInfo(t, res.Meta, tool)
		}
		return res.StructuredContent
	}

	run := call(map[string]any{"name": "process_start", "arguments": map[string]any{"name": "sleeper", "argv": []any{"sleep", "300"}}})
	run = run["run"].(map[string]any) // process_start answers its run under "run"
	require.Equal(t, "running", run["state"])
	killAtCleanup(t, int(run["pid"].(float64)))

	// A wait with a progress token reports progress; after the second
	// notification the client gives up on it with notifications/cancelled.
	// (The callback runs on the call's goroutine: it only records.)
	const token = "wait-1"
	var (
		mu        sync.Mutex
		progress  []json.RawMessage
		cancelErr error
	)
	c.OnNotification = func(method string, params json.RawMessage) {
		if method != "notifications/progress" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		progress = append(progress, params)
		if len(progress) == 2 {
			// The reply awaited is the wait's, the last request sent.
			cancelErr = c.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled",
				"params": map[string]any{"requestId": c.LastID(), "reason": "the test gives up"}})
		}
	}
	// agent-box answers a cancelled wait at once, with the run as it is
	// (the client ignores that answer); without the cancellation this wait
	// would last its 10 minutes and the call's bound would fail the test.
	w := call(map[string]any{"name": "process_wait", "arguments": map[string]any{"name": "sleeper", "timeout_ms": 600000},
		"_meta": map[string]any{"progressToken": token}})
	c.OnNotification = nil
	mu.Lock()
	require.NoError(t, cancelErr, "sending notifications/cancelled")
	require.GreaterOrEqual(t, len(progress), 2, "progress notifications before the cancellation")
	last := -1.0
	for _, raw := range progress {
		var p struct {
			Token    any     `json:"progressToken"`
			Progress float64 `json:"progress"`
			Message  string  `json:"message"`
		}
		require.NoError(t, json.Unmarshal(raw, &p))
		require.Equal(t, token, p.Token, "progress for another token: %s", raw)
		require.Greater(t, p.Progress, last, "progress must increase: %s", raw)
		require.Contains(t, p.Message, "sleeper", "progress message")
		last = p.Progress
	}
	mu.Unlock()
	require.Equal(t, "running", w["run"].(map[string]any)["state"], "the cancelled wait: %v", w)

	// The cancellation ended the wait, not the run.
	l := call(map[string]any{"name": "process_list", "arguments": map[string]any{"name": "sleeper"}})
	require.Equal(t, "running", l["runs"].([]any)[0].(map[string]any)["state"])

	call(map[string]any{"name": "process_kill", "arguments": map[string]any{"name": "sleeper", "signal": "KILL"}})
	w = call(map[string]any{"name": "process_wait", "arguments": map[string]any{"name": "sleeper", "timeout_ms": 30000}})
	ended := w["run"].(map[string]any)
	require.Equal(t, "exited", ended["state"], "%v", w)
	require.Equal(t, "SIGKILL", ended["signal"])
	require.NotContains(t, ended, "exit_code", "a run killed by a signal has no exit code: the field is left out")

	require.NoError(t, c.Close(), "the server ends when its client closes stdin")
}

// dialRaw starts cmd for a raw JSON-RPC session whose wire is logged when
// the test fails.
func dialRaw(t *testing.T, cmd *exec.Cmd) *rawmcp.Conn {
	t.Helper()
	var (
		mu   sync.Mutex
		wire strings.Builder
	)
	f, err := os.CreateTemp(t.TempDir(), "stderr-")
	require.NoError(t, err)
	cmd.Stderr = f // a file, so that cmd.Wait never waits on a copier
	c, err := rawmcp.Start(cmd)
	f.Close()
	require.NoError(t, err)
	c.Trace = func(dir string, line []byte) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(&wire, "%s %.600s\n", dir, line)
	}
	t.Cleanup(func() {
		c.Kill()
		if t.Failed() {
			mu.Lock()
			t.Logf("wire:\n%s", wire.String())
			mu.Unlock()
			b, _ := os.ReadFile(f.Name())
			t.Logf("stderr of %v:\n%s", cmd.Args[0], b)
		}
	})
	return c
}

func requireServerInfo(t *testing.T, meta map[string]any, what string) {
	t.Helper()
	info, ok := meta[rawmcp.MetaServerInfo].(map[string]any)
	require.True(t, ok, "%s: a 2026-07-28 result names the server in _meta: %v", what, meta)
	require.Equal(t, "agent-box", info["name"])
}

// jsonValue is v as encoding/json decodes it, for schema validation.
func jsonValue(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var out any
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

// reapAtCleanup ends, when the test ends, every run still alive under
// stateDir: the sessions of the supervisors whose stderr (the run dir's
// supervisor.log) lies there. It catches a run whose start the client
// refused to read (a schema mismatch fails the call, not the start).
// Registered after stateDir's t.TempDir, it runs before its removal.
func reapAtCleanup(t *testing.T, stateDir string) {
	prefix := stateDir + string(filepath.Separator)
	t.Cleanup(func() {
		procs, err := proc.Processes()
		if err != nil {
			t.Logf("reaping the runs of %s: %v", stateDir, err)
			return
		}
		for _, p := range procs {
			if p.SID != p.PID || p.PID <= 1 {
				continue
			}
			if log, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/2", p.PID)); err == nil && strings.HasPrefix(log, prefix) {
				for _, q := range procs {
					if q.SID == p.PID {
						syscall.Kill(q.PID, syscall.SIGKILL)
					}
				}
			}
		}
	})
}

// killAtCleanup SIGKILLs the process group of a run's pid when the test
// ends, if it is still that run's: a test that fails midway must not
// leave it behind.
func killAtCleanup(t *testing.T, pid int) {
	_, start, _, err := procStat(pid)
	require.NoError(t, err, "the run's pid %d is not a process on this machine", pid)
	t.Cleanup(func() {
		if pgid, err := syscall.Getpgid(pid); err == nil && pgid == pid && alive(pid, start) {
			syscall.Kill(-pgid, syscall.SIGKILL)
		}
	})
}
