//go:build linux

package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
)

// tail_log's screen is a pty run's terminal as the user would see it: a
// program that redraws in place (here a top-like display, three frames,
// each shorter than the one before, then the cursor parked) reads as its
// last frame, where its clean text is a collage of all three.
func TestTailLogScreenShowsTheLastRedraw(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	frame := func(load string, pids ...string) string {
		f := `printf '\033[H\033[Jtop - load ` + load + `\nPID CMD\n'; `
		for _, p := range pids {
			f += `printf '` + p + ` sleep\n'; `
		}
		return f
	}
	script := `printf 'banner\n'; ` + frame("9.99", "101", "102", "103") + frame("5.0", "201", "202") + frame("1", "301") +
		`printf '\033[2;5H'; read x`
	s.OK("process_start", map[string]any{"name": "top", "pty": true, "cols": 40, "rows": 10, "command": script})
	// The screen is drawn once the last frame's row is in the log.
	s.OK("tail_log", map[string]any{"name": "top", "offset": 0, "wait_ms": 20000, "until": "301 sleep"})

	r := s.OK("tail_log", map[string]any{"name": "top", "screen": true, "wait_ms": 5000, "offset": 0, "until": `\x1b\[2;5H`})
	sc, ok := r.Data["screen"].(map[string]any)
	require.True(t, ok, r.Text)
	assert.Equal(t, []any{"top - load 1", "PID CMD", "301 sleep"}, sc["lines"], r.Text)
	assert.Equal(t, map[string]any{"row": float64(2), "col": float64(5)}, sc["cursor"])
	assert.Equal(t, float64(40), sc["cols"])
	assert.Equal(t, float64(10), sc["rows"])
	assert.Nil(t, sc["partial"], "the whole log was replayed")
	assert.Nil(t, r.Data["content"], "the screen instead of the text")
	assert.Equal(t, int64(0), abtest.Num(r.Data["offset"]))
	assert.Equal(t, abtest.Num(r.Data["log_bytes"]), abtest.Num(r.Data["end_offset"]))
	assert.Contains(t, r.Text, "screen 40x10 cursor row 2 col 5; rows 1..3 of 10 follow (the rest empty)")
	assert.True(t, strings.HasSuffix(r.Text, "]\ntop - load 1\nPID CMD\n301 sleep\n"), r.Text)

	// The text, even clean, holds every frame.
	text := abtest.Str(s.OK("tail_log", map[string]any{"name": "top", "offset": 0}).Data["content"])
	assert.Contains(t, text, "101 sleep")
	assert.Contains(t, text, "banner")

	bad := s.Call("tail_log", map[string]any{"name": "top", "screen": true, "grep": "x"})
	require.True(t, bad.IsError)
	assert.Contains(t, bad.Text, "screen shows the terminal as it is now; leave out grep")
	s.OK("process_kill", map[string]any{"name": "top", "signal": "KILL"})

	s.OK("process_start", map[string]any{"name": "plain", "command": "echo hi"})
	bad = s.Call("tail_log", map[string]any{"name": "plain", "screen": true})
	require.True(t, bad.IsError)
	assert.Contains(t, bad.Text, "invalid argument")
	assert.Contains(t, bad.Text, "it was started without pty: true")
}

// A screen of a long log replays its end: a program that scrolls past
// ScreenReplayBytes shows its last rows, and says the screen may miss
// rows drawn before the replay when nothing in it cleared the screen.
func TestTailLogScreenOfALongLog(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	s.OK("process_start", map[string]any{"name": "long", "pty": true, "cols": 30, "rows": 5,
		"command": `i=0; while [ $i -lt 8000 ]; do echo "line $i"; i=$((i+1)); done`})
	s.OK("process_wait", map[string]any{"name": "long", "timeout_ms": 30000})
	r := s.OK("tail_log", map[string]any{"name": "long", "screen": true})
	sc := r.Data["screen"].(map[string]any)
	assert.Equal(t, []any{"line 7996", "line 7997", "line 7998", "line 7999"}, sc["lines"], r.Text)
	assert.Equal(t, true, sc["partial"])
	assert.Positive(t, abtest.Num(r.Data["offset"]))
	assert.Contains(t, r.Text, "partial: replayed from offset")
}
