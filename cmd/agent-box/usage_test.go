package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

	mem := regexp.MustCompile(` mem=(\d+)M peak_mem=\d+M cpu=\S+ procs=1 `)
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
	assert.Regexp(t, `^NAME\s+RUN ID\s+STATE\s+PID\s+MEM\s+PEAK\s+CPU\s+STARTED\s+LOG\s+COMMAND$`, lines[0])
	assert.Regexp(t, `^mem\s+\S+\s+running\s+\d+\s+\d+\.\dM\s+\d+\.\dM\s+\S+s\s`, lines[1])
}
