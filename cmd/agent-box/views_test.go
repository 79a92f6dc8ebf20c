//go:build linux

package main

import (
	"encoding/base64"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
	"github.com/agent-box/agent-box/logframe"
)

// The views of tail_log through MCP: invalid UTF-8 is replaced and flagged
// in text and exact in base64; a framed run's text comes as chunks in the
// order read; raw returns the frames as stored.
func TestTailLogViews(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	s := connect(t, state)

	s.OK("process_start", map[string]any{"name": "bin", "command": `printf 'ok \377\376 end\n'`})
	s.OK("process_wait", map[string]any{"name": "bin", "timeout_ms": 30000})
	r := s.OK("tail_log", map[string]any{"name": "bin"})
	assert.Equal(t, true, r.Data["lossy"], r.Text)
	assert.Equal(t, "ok \ufffd\ufffd end\n", r.Data["content"])
	assert.Contains(t, r.Text, "lossy")
	r = s.OK("tail_log", map[string]any{"name": "bin", "encoding": "base64"})
	assert.Nil(t, r.Data["lossy"])
	assert.Equal(t, "ok \xff\xfe end\n", string(abtest.B64(t, abtest.Str(r.Data["content"]))))

	s.OK("process_start", map[string]any{"name": "fr", "capture_mode": "framed",
		"command": abtest.InOrder(state, "echo out1", "echo err1 >&2", "echo out2")})
	s.OK("process_wait", map[string]any{"name": "fr", "timeout_ms": 30000})
	r = s.OK("tail_log", map[string]any{"name": "fr"})
	// The chunks are the text, once: not also stdout, stderr and their
	// interleaving.
	for _, k := range []string{"stdout", "stderr", "content"} {
		assert.Nil(t, r.Data[k], k)
	}
	assert.Equal(t, "out1\nout2\n", abtest.Chunks(r.Data, "stdout"))
	assert.Equal(t, "err1\n", abtest.Chunks(r.Data, "stderr"))
	assert.Equal(t, "out1\nerr1\nout2\n", abtest.Chunks(r.Data, ""), "interleaved in the order read")
	assert.Contains(t, r.Text, "out1\n[stderr] err1\nout2\n")
	chunks, _ := r.Data["chunks"].([]any)
	require.Len(t, chunks, 3, "%v", r.Data["chunks"])
	for i, want := range [][2]string{{"stdout", "out1\n"}, {"stderr", "err1\n"}, {"stdout", "out2\n"}} {
		c := chunks[i].(map[string]any)
		assert.Equal(t, want[0], c["stream"], "chunk %d", i)
		assert.Equal(t, want[1], c["text"], "chunk %d", i)
	}

	r = s.OK("tail_log", map[string]any{"name": "fr", "raw": true})
	raw := abtest.Str(r.Data["content"])
	lines := strings.Split(strings.TrimSuffix(raw, "\n"), "\n")
	require.Len(t, lines, 3, "%q", raw)
	var got []string
	for _, l := range lines {
		f := strings.SplitN(l, " ", 2)
		require.Len(t, f, 2, "frame %q", l)
		p, err := base64.StdEncoding.DecodeString(f[1])
		require.NoError(t, err, "frame %q", l)
		got = append(got, f[0]+":"+string(p))
	}
	// Frames name their stream by number (logframe: 1 stdout, 2 stderr).
	out, errs := strconv.Itoa(int(logframe.Stdout)), strconv.Itoa(int(logframe.Stderr))
	assert.Equal(t, []string{out + ":out1\n", errs + ":err1\n", out + ":out2\n"}, got)
	assert.Equal(t, abtest.Num(r.Data["log_bytes"]), abtest.Num(r.Data["end_offset"]))
}
