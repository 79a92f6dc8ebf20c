//go:build linux

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
)

// A running run's usage over MCP: process_list and process_wait say it in
// their text and structured content, agent-box ps in its columns.
func TestUsageShown(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	s := connect(t, state)
	s.OK("process_start", map[string]any{"name": "mem", "argv": []any{"python3", "-c",
		"import time\nb = bytearray(40 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('ready', flush=True)\ntime.sleep(600)"}})
	t.Cleanup(func() { s.Call("process_kill", map[string]any{"name": "mem", "signal": "KILL"}) })
	s.OK("tail_log", map[string]any{"name": "mem", "wait_ms": 30000, "until": "ready"})

	mem := regexp.MustCompile(` mem=(\d+)M peak_mem=\d+M cpu=\S+ procs=1\s`)
	r := s.OK("process_list", map[string]any{})
	m := mem.FindStringSubmatch(r.Text)
	require.NotNil(t, m, "process_list text: %s", r.Text)
	mib, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	assert.GreaterOrEqual(t, mib, 40, "the 40 MiB it made resident: %s", r.Text)
	runs := r.Data["runs"].([]any)
	u, ok := runs[0].(map[string]any)["usage"].(map[string]any)
	require.True(t, ok, "structured run has no usage: %v", runs[0])
	assert.Equal(t, "proc", u["from"])
	assert.GreaterOrEqual(t, u["memory_bytes"].(float64), float64(40<<20))
	assert.GreaterOrEqual(t, u["peak_memory_bytes"].(float64), u["memory_bytes"].(float64))
	assert.Equal(t, float64(1), u["procs"])

	r = s.OK("process_wait", map[string]any{"name": "mem", "timeout_ms": 1})
	assert.Regexp(t, mem, r.Text)
	assert.Equal(t, "proc", r.Data["run"].(map[string]any)["usage"].(map[string]any)["from"])

	out, _, code := agentBox(t, state, "ps")
	require.Equal(t, 0, code)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, out)
	assert.Regexp(t, `^BOX\s+NAME\s+RUN ID\s+STATE\s+PID\s+MEM\s+PEAK\s+CPU\s+LIMITS\s+STARTED\s+LOG\s+COMMAND$`, lines[0])
	assert.Regexp(t, `^\S+\s+mem\s+\S+\s+running\s+\d+\s+\d+\.\dM\s+\d+\.\dM\s+\S+s\s+-\s`, lines[1])
}

// A run that ended and left processes behind (a server a script started)
// shows what they use now, not what the leader used: the leftovers that
// eat a box are seen, with and without limits.
func TestUsageOfWhatARunLeftBehind(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	left := `python3 -c "import time; b = bytearray(30 << 20); b[::4096] = b'x' * len(b[::4096]); open('$0', 'w').close(); time.sleep(600)" & exit 0`
	for _, tc := range []struct {
		name, from string
		limits     map[string]any
	}{{"free", "proc", nil}, {"capped", "cgroup", map[string]any{"memory_mb": 256}}} {
		ready := filepath.Join(t.TempDir(), "ready")
		args := map[string]any{"name": tc.name, "argv": []string{"sh", "-c", left, ready}}
		if tc.limits != nil {
			args["limits"] = tc.limits
		}
		s.OK("process_start", args)
		t.Cleanup(func() { s.Call("process_kill", map[string]any{"name": tc.name, "signal": "KILL"}) })
		abtest.WaitFor(t, "the leftover to be ready", 30*time.Second, func() bool {
			_, err := os.Stat(ready)
			return err == nil
		})
		w := s.OK("process_wait", map[string]any{"name": tc.name, "timeout_ms": 30000})
		run := w.Data["run"].(map[string]any)
		require.Equal(t, int64(0), abtest.Num(run["exit_code"]), w.Text)
		require.NotEmpty(t, run["survivors"], w.Text)
		u, ok := run["usage"].(map[string]any)
		require.True(t, ok, "no usage: %s", w.Text)
		assert.Equal(t, tc.from, u["from"], w.Text)
		assert.Equal(t, float64(1), u["procs"], w.Text)
		assert.GreaterOrEqual(t, u["memory_bytes"].(float64), float64(30<<20), w.Text)
		assert.Regexp(t, ` mem=\d+M `, w.Text)
	}
}
