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
