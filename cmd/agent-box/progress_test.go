//go:build linux

package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
)

// A process_wait that carries a progress token gets progress
// notifications while it blocks (every 3 s; 300 ms here), with increasing
// progress, so that clients which reset their timeout on progress keep
// waiting; one without a token gets none.
func TestWaitSendsProgress(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir(), "AGENT_BOX_PROGRESS_MS=300")
	// The run ends when the test lets it, once two notifications came: a
	// fixed sleep would be short on a loaded machine.
	s.OK("process_start", map[string]any{"name": "slow", "command": "read line", "stdin": "pipe"})
	done := make(chan abtest.Result, 1)
	go func() {
		done <- s.CallWithProgress("process_wait", map[string]any{"name": "slow", "timeout_ms": 60000}, "tok-1")
	}()
	abtest.WaitFor(t, "two progress notifications", 30*time.Second, func() bool { return len(s.Progress("tok-1")) >= 2 })
	s.OK("process_write", map[string]any{"name": "slow", "data": "go\n"})
	var w abtest.Result
	select {
	case w = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("process_wait did not answer after the run ended")
	}
	require.False(t, w.IsError, w.Text)
	require.Equal(t, "exited", w.Data["run"].(map[string]any)["state"], w.Text)

	got := s.Progress("tok-1")
	require.GreaterOrEqual(t, len(got), 2)
	for i, p := range got {
		assert.NotEmpty(t, p.Message, "notification %d says what it waits for", i)
		if i > 0 {
			assert.Greater(t, p.Progress, got[i-1].Progress, "progress must increase")
		}
	}

	s.OK("process_start", map[string]any{"name": "slow2", "argv": []any{"sleep", "1"}})
	s.OK("process_wait", map[string]any{"name": "slow2", "timeout_ms": 60000})
	assert.Len(t, s.Progress(""), 0, "no token, no notifications")
}
