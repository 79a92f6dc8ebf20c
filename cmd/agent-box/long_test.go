//go:build linux && long

package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLongWaits holds process_wait to the real bounds (issue 10): the
// clients' 60 s request timeout must never fire first. It waits the real
// bounds out, so .ci/run runs it in a lane of its own (go test -tags long
// -run TestLong).
func TestLongWaits(t *testing.T) {
	state := t.TempDir()
	s := connect(t, state)
	s.CallTimeout = 3 * time.Minute
	s.OK("process_start", map[string]any{"name": "hundred", "argv": []any{"sleep", "100"}})
	t.Cleanup(func() { s.Call("process_kill", map[string]any{"name": "hundred", "signal": "KILL"}) })

	t.Run("no token, asked for 10 min", func(t *testing.T) {
		t.Parallel()
		began := time.Now()
		w := s.OK("process_wait", map[string]any{"name": "hundred", "timeout_ms": 600000})
		took := time.Since(began)
		assert.Less(t, took, 55*time.Second)
		assert.GreaterOrEqual(t, took, 45*time.Second)
		assert.Equal(t, true, w.Data["wait_shortened"], w.Text)
		assert.Contains(t, w.Text, "call process_wait again")
	})
	t.Run("no token, default", func(t *testing.T) {
		t.Parallel()
		began := time.Now()
		w := s.OK("process_wait", map[string]any{"name": "hundred"})
		took := time.Since(began)
		assert.Less(t, took, 35*time.Second)
		assert.GreaterOrEqual(t, took, 29*time.Second)
		assert.Equal(t, true, w.Data["wait_timed_out"], w.Text)
		assert.Nil(t, w.Data["wait_shortened"], "the default is no cut")
	})
	t.Run("token, 75 s", func(t *testing.T) {
		t.Parallel()
		began := time.Now()
		w := s.CallWithProgress("process_wait", map[string]any{"name": "hundred", "timeout_ms": 75000}, "long")
		require.False(t, w.IsError, w.Text)
		took := time.Since(began)
		assert.GreaterOrEqual(t, took, 75*time.Second)
		assert.Less(t, took, 80*time.Second)
		assert.Equal(t, true, w.Data["wait_timed_out"], w.Text)
		assert.GreaterOrEqual(t, len(s.Progress("long")), 20, "progress every 3 s")
	})
}
