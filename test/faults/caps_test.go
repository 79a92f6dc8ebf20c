package faults

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
)

// TestCapKeepsTheFirstBytesInBothModes: max_log_bytes keeps the output's
// first bytes up to the cap in framed mode as in combined. Before (issue
// 9), seq 1 5000 framed under a 4096-byte cap kept nothing (combined kept
// 4096), because only whole frames of up to 48 KiB were written.
func TestCapKeepsTheFirstBytesInBothModes(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	out := seqOutput(5000)
	for _, tc := range []struct {
		mode string
		cap  int
		keep int // bytes of output kept: framed frames cost 3 + 4/3 per byte
	}{
		{"combined", 4096, 4096},
		{"framed", 4096, (4096 - 3) / 4 * 3},
		{"framed", 10, 3},
	} {
		name := fmt.Sprintf("%s-%d", tc.mode, tc.cap)
		s.OK("process_start", map[string]any{"name": name, "argv": []any{"seq", "1", "5000"},
			"capture_mode": tc.mode, "max_log_bytes": tc.cap})
		w := s.OK("process_wait", map[string]any{"name": name, "timeout_ms": 20000})
		run := w.Data["run"].(map[string]any)
		require.Equal(t, "exited", run["state"], w.Text)
		assert.Equal(t, true, run["log_capped"], name)
		assert.LessOrEqual(t, run["log_bytes"], float64(tc.cap), name)
		all, stdout, _ := s.ReadAll(name, 1<<20, tc.mode == "framed")
		if tc.mode == "framed" {
			all = stdout
		}
		assert.Equal(t, string(out[:tc.keep]), string(all), "%s: the output's first %d bytes", name, tc.keep)
	}
}

// TestWaitTailIsWhatTheChildWrote: process_wait's output_tail and
// stderr_tail add no newline the child never wrote. Before (issue 9), a
// framed run's stderr "lateerr" read "lateerr\n".
func TestWaitTailIsWhatTheChildWrote(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	s := connect(t, state)
	for _, mode := range []string{"combined", "framed"} {
		s.OK("process_start", map[string]any{"name": mode, "capture_mode": mode,
			"command": abtest.InOrder(state, "echo out", "printf lateerr >&2")})
		w := s.OK("process_wait", map[string]any{"name": mode, "timeout_ms": 20000})
		assert.Equal(t, "out\nlateerr", w.Data["output_tail"], mode)
		if mode == "framed" {
			assert.Equal(t, "lateerr", w.Data["stderr_tail"])
		}
	}
}
