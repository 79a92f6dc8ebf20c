//go:build linux

package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agent-box/agent-box/internal/abtest"
)

// Every answer about a run repeats its line; a generated script as the
// command must not put its 20 KB into each of them. Structured content
// keeps it whole.
func TestTextDoesNotEchoLongCommands(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	script := "cat >/dev/null <<'EOF'\n" + strings.Repeat("some line of a generated script\n", 600) + "EOF\n"
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		r := s.OK("process_start", map[string]any{"name": n, "command": script})
		assert.Less(t, len(r.Text), 1024, "process_start text")
		assert.Equal(t, script, r.Run()["command"], "structured content has the whole command")
		w := s.OK("process_wait", map[string]any{"name": n, "timeout_ms": 30000})
		assert.Less(t, len(w.Text), 1024, "process_wait text")
	}
	l := s.OK("process_list", nil)
	assert.Less(t, len(l.Text), 5*1024, "process_list text")
	assert.Equal(t, script, abtest.RunOf(t, l, "c")["command"])
}

// An answer about one act on a run (a start, a wait) says what changed
// and what to do next; the run's id, command, cwd and start time are the
// caller's own or process_list's. A wait for a run that wrote three
// bytes was 480 bytes of text, 370 of them the run's line.
func TestAnswersAboutOneRunAreLean(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	cwd := t.TempDir()
	r := s.OK("process_start", map[string]any{"name": "hi", "command": "echo hi", "cwd": cwd})
	assert.NotContains(t, r.Text, cwd, "process_start text")
	w := s.OK("process_wait", map[string]any{"name": "hi", "timeout_ms": 30000})
	assert.Contains(t, w.Text, "exited (code 0)")
	assert.True(t, strings.HasSuffix(w.Text, "\nhi\n"), "the output ends the text: %q", w.Text)
	assert.LessOrEqual(t, len(w.Text), 160, "process_wait text: %q", w.Text)
	run := w.Data["run"].(map[string]any)
	assert.Equal(t, cwd, run["cwd"], "structured content keeps every fact")
	assert.NotEmpty(t, run["started_at"])
}
