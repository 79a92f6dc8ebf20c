//go:build linux

package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
)

// tail_log without an offset reads the end of a big log, not its start:
// the last whole lines, at most 16 KB of text, with structured content
// about the size of the text (each byte of output once), combined or
// framed; the header says where the window starts, so earlier output is
// known to exist.
func TestTailLogReadsTheEndOfABigLog(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"combined", "framed"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			s := connect(t, t.TempDir())
			// About 2 MB, a stderr line first (where in a framed log
			// stdout's lines and stderr's meet is the supervisor's order).
			s.OK("process_start", map[string]any{"name": "big", "capture_mode": mode,
				"command": `echo 'building' >&2; i=0; while [ $i -lt 40000 ]; do echo "line $i of the build log, padded to fifty bytes"; i=$((i+1)); done`})
			s.OK("process_wait", map[string]any{"name": "big", "timeout_ms": 60000})
			r := s.OK("tail_log", map[string]any{"name": "big"})
			text := abtest.Str(r.Data["content"]) + abtest.Chunks(r.Data, "")
			assert.True(t, strings.HasSuffix(text, "line 39999 of the build log, padded to fifty bytes\n"), "%.200q", text)
			assert.True(t, strings.HasPrefix(text, "line "), "whole lines: %.50q", text)
			assert.LessOrEqual(t, len(text), 16384)
			assert.Greater(t, len(text), 16000)
			size := abtest.Num(r.Data["log_bytes"])
			require.Greater(t, size, int64(2_000_000))
			off := abtest.Num(r.Data["offset"])
			assert.Positive(t, off)
			assert.Contains(t, r.Text, "skipped")
			structured, err := json.Marshal(r.Data)
			require.NoError(t, err)
			assert.Less(t, len(structured), 32<<10, "structured content about the size of the text (%d bytes)", len(text))
			assert.Less(t, len(r.Text), 17<<10)
			t.Logf("%s: text %d bytes, structured %d bytes, of a %d-byte log", mode, len(r.Text), len(structured), size)

			start := s.OK("tail_log", map[string]any{"name": "big", "offset": 0})
			first := abtest.Str(start.Data["content"]) + abtest.Chunks(start.Data, "")
			assert.True(t, strings.HasPrefix(first, "building\n") || strings.HasPrefix(first, "line 0 of"), "offset 0 reads the start: %.50q", first)
			assert.Equal(t, int64(0), abtest.Num(start.Data["offset"]))
			if mode == "combined" {
				// A framed window holds whole frames, at least one.
				assert.Equal(t, int64(16384), abtest.Num(start.Data["end_offset"]), "16 KB from an offset too")
			}
		})
	}
}

// tail_log with wait_ms and no offset waits while the log is empty, as a
// read from its start would, and then returns its end.
func TestTailLogEndWaitsForTheFirstOutput(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	s.OK("process_start", map[string]any{"name": "late", "stdin": "pipe", "command": "read x; echo late; sleep 30"})
	done := make(chan abtest.Result, 1)
	go func() { done <- s.Call("tail_log", map[string]any{"name": "late", "wait_ms": 30000}) }()
	s.OK("process_write", map[string]any{"name": "late", "data": "go\n"})
	r := <-done
	require.False(t, r.IsError, r.Text)
	assert.Equal(t, "late\n", r.Data["content"], r.Text)
	s.OK("process_kill", map[string]any{"name": "late", "signal": "KILL"})
}
