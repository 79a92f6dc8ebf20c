//go:build linux

package main

import (
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
)

// A REPL driven as an agent drives it: one process_write per prompt,
// whose reply holds the answer and ends at the next prompt, on one
// connection and again on the next one after the first is closed. Python
// writes its prompt to stderr: combined capture holds both streams.
func TestProcessWriteUntilDrivesARepl(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	state := t.TempDir()
	s := connect(t, state)
	s.OK("process_start", map[string]any{"name": "py", "argv": []any{"python3", "-i", "-u"}, "stdin": "pipe"})
	// The first prompt, before the first write: what follows the write is
	// its answer, not this prompt.
	r := s.OK("tail_log", map[string]any{"name": "py", "wait_ms": 30000, "until": ">>> $"})
	require.Equal(t, true, r.Data["matched"], r.Text)
	assert.Contains(t, r.Text, "(until matched)")

	ask := func(s *abtest.Server, expr, want string) {
		t.Helper()
		before := abtest.Num(s.OK("tail_log", map[string]any{"name": "py", "offset": -1}).Data["end_offset"])
		r := s.OK("process_write", map[string]any{"name": "py", "data": expr + "\n", "wait_ms": 30000, "until": ">>> $"})
		assert.Equal(t, true, r.Data["matched"], r.Text)
		assert.Equal(t, want+"\n>>> ", r.Data["output"], r.Text)
		assert.Equal(t, before, abtest.Num(r.Data["offset"]), "the output starts where the log ended before the write")
		assert.Equal(t, abtest.Num(r.Data["offset"])+int64(len(want)+5), abtest.Num(r.Data["end_offset"]))
		assert.Contains(t, r.Text, "(until matched):\n"+want+"\n>>> ")
	}
	ask(s, "2**64", "18446744073709551616")
	ask(s, "2**10", "1024")
	s.Close()

	s2 := connect(t, state)
	ask(s2, "2**64", "18446744073709551616")
	r = s2.OK("process_write", map[string]any{"name": "py", "close": true, "wait_ms": 30000, "until": "never"})
	assert.Equal(t, false, r.Data["matched"], r.Text)
	assert.Contains(t, r.Text, "eof", "the REPL ends at EOF, and so does the wait")
}

// idle_ms returns after a burst of output, long before wait_ms; until that
// never matches returns at wait_ms, with matched false.
func TestTailIdleAndUnmatchedUntil(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	s.OK("process_start", map[string]any{"name": "burst", "command": "read x; printf 'a\\nb\\nc\\n'; sleep 30", "stdin": "pipe"})
	start := time.Now()
	r := s.OK("process_write", map[string]any{"name": "burst", "data": "go\n", "wait_ms": 20000, "idle_ms": 200})
	took := time.Since(start)
	assert.Equal(t, "a\nb\nc\n", r.Data["output"], r.Text)
	assert.Nil(t, r.Data["matched"], "no until, no matched")
	assert.Less(t, took, 15*time.Second, "idle_ms returned it, not wait_ms")

	start = time.Now()
	r = s.OK("tail_log", map[string]any{"name": "burst", "wait_ms": 500, "until": "never"})
	assert.GreaterOrEqual(t, time.Since(start), 500*time.Millisecond)
	assert.Equal(t, false, r.Data["matched"], r.Text)
	assert.Equal(t, "a\nb\nc\n", r.Data["content"])
	assert.Contains(t, r.Text, "(until not matched)")

	r = s.Call("process_write", map[string]any{"name": "burst", "data": "x", "until": "x"})
	require.True(t, r.IsError)
	assert.Contains(t, r.Text, "give wait_ms too")
	r = s.Call("tail_log", map[string]any{"name": "burst", "wait_ms": 10, "until": "(("})
	require.True(t, r.IsError)
	assert.Contains(t, r.Text, "until is not a valid RE2 regular expression")
	s.OK("process_kill", map[string]any{"name": "burst", "signal": "KILL"})
}

// An answer longer than a window says where the rest is.
func TestProcessWriteLongAnswerSaysMore(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	s.OK("process_start", map[string]any{"name": "long", "command": "read x; head -c 100000 /dev/zero | tr '\\0' a; echo; echo END; sleep 30", "stdin": "pipe"})
	r := s.OK("process_write", map[string]any{"name": "long", "data": "go\n", "wait_ms": 20000, "until": "^END$"})
	assert.Equal(t, true, r.Data["matched"], r.Text)
	assert.Equal(t, true, r.Data["truncated"], r.Text)
	end := abtest.Num(r.Data["end_offset"])
	assert.Equal(t, int64(16384), end, "the default window")
	assert.Contains(t, r.Text, "more: tail_log offset=16384")
	s.OK("process_kill", map[string]any{"name": "long", "signal": "KILL"})
}
