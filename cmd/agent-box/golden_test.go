//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/rawmcp"
)

var update = flag.Bool("update", false, "rewrite the golden transcripts in testdata/fixtures/golden")

// normalizers replace what differs between runs (ids, pids, times, paths)
// so that a transcript pins the protocol and nothing else.
func normalize(s, state string) string {
	s = strings.ReplaceAll(s, state, "$STATE")
	for _, r := range []struct{ re, repl string }{
		{`\d{8}T\d{6}\.\d{9}Z-[0-9a-f]{6}`, "$$RUN_ID"},
		{`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`, "$$TIME"},
		{`"(pid|supervisor_pid)": \d+`, `"$1": "$$PID"`},
		{`pid=\d+`, "pid=$$PID"},
		{`process group \d+`, "process group $$PID"},
		{`"signalled_groups": \[\s*\d+\s*\]`, `"signalled_groups": ["$$PID"]`},
		{`"duration_ms": \d+`, `"duration_ms": "$$DUR"`},
		{`duration=[0-9.]+m?s`, "duration=$$DUR"},
		{`"version": "[^"]*"`, `"version": "$$VERSION"`},
		{`c1\.[A-Za-z0-9_-]+`, "$$CURSOR"},
		{`"(memory_bytes|peak_memory_bytes|cpu_ms)": \d+`, `"$1": "$$N"`},
		{` (mem|peak_mem|cpu)=[0-9.]+[A-Za-z]+`, " $1=$$N"},
	} {
		s = regexp.MustCompile(r.re).ReplaceAllString(s, r.repl)
	}
	return s
}

// transcript records JSON-RPC lines pretty-printed, one section each.
type transcript struct {
	state   string
	buf     bytes.Buffer
	n       int
	firstID float64 // ids are renumbered from 1: unrecorded calls come first
}

func (tr *transcript) trace(dir string, line []byte) {
	var v any
	if json.Unmarshal(line, &v) != nil {
		fmt.Fprintf(&tr.buf, "%s %s\n", dir, line)
		return
	}
	if m, ok := v.(map[string]any); ok {
		if id, ok := m["id"].(float64); ok {
			if tr.firstID == 0 {
				tr.firstID = id
			}
			m["id"] = id - tr.firstID + 1
		}
	}
	pretty, _ := json.MarshalIndent(v, "", "  ")
	tr.n++
	fmt.Fprintf(&tr.buf, "-- %02d %s --\n%s\n", tr.n, map[string]string{">": "client", "<": "server"}[dir], normalize(string(pretty), tr.state))
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("..", "..", "testdata", "fixtures", "golden", name)
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "missing golden file; run go test ./cmd/agent-box -run Golden -update")
	if string(want) != got {
		t.Errorf("transcript %s differs (-want +got):\n%s\nrun with -update after checking the change is intended", name, lineDiff(string(want), got))
	}
}

// lineDiff is a small readable diff: the first differing lines with context.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < 40; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n-%s\n+%s\n", i+1, wl, gl)
			shown++
		}
	}
	return b.String()
}

func rawDial(t *testing.T, state string, tr *transcript) *rawmcp.Conn {
	t.Helper()
	cmd := exec.Command(binary, "--state-dir", state)
	c, err := rawmcp.Start(cmd)
	require.NoError(t, err)
	t.Cleanup(func() { c.Kill() })
	if tr != nil {
		c.Trace = tr.trace
	}
	_, err = c.Initialize("golden")
	require.NoError(t, err)
	return c
}

func TestGoldenToolsList(t *testing.T) {
	state := t.TempDir()
	tr := &transcript{state: state}
	c := rawDial(t, state, tr)
	require.NoError(t, c.Request("tools/list", map[string]any{}, nil))
	checkGolden(t, "tools_list.txt", tr.buf.String())
}

func TestGoldenSession(t *testing.T) {
	state := t.TempDir()
	tr := &transcript{state: state}
	c := rawDial(t, state, nil)
	_, err := c.Call("process_start", map[string]any{"name": "golden", "cwd": "/", "command": "echo hello; echo oops >&2; exec sleep 30"})
	require.NoError(t, err)
	// Unrecorded: wait until both lines are in the log so that the
	// recorded answers are the same every time.
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := c.Call("process_list", map[string]any{})
		require.NoError(t, err)
		runs := r.StructuredContent["runs"].([]any)
		if runs[0].(map[string]any)["log_bytes"].(float64) == 11 {
			break
		}
		require.True(t, time.Now().Before(deadline), "output never arrived")
		time.Sleep(10 * time.Millisecond)
	}
	c.Trace = tr.trace
	for _, step := range []struct {
		tool string
		args map[string]any
	}{
		{"process_list", map[string]any{}},
		{"tail_log", map[string]any{"name": "golden"}},
		{"tail_log", map[string]any{"name": "golden", "offset": 6, "max_bytes": 3}},
		{"process_kill", map[string]any{"name": "golden"}},
		{"process_list", map[string]any{"name": "golden"}},
		{"process_start", map[string]any{"name": "bad name", "command": "true"}},
		// A start's reply, with nothing in its log yet.
		{"process_start", map[string]any{"name": "quiet", "cwd": "/", "argv": []any{"sleep", "30"}}},
		{"process_kill", map[string]any{"name": "quiet", "signal": "KILL"}},
	} {
		_, err := c.Call(step.tool, step.args)
		require.NoError(t, err)
	}
	checkGolden(t, "session.txt", tr.buf.String())
}
