//go:build linux

package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A call without the name it needs says so in the words of a missing
// argument, whichever tool it is.
func TestNameIsRequired(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	for tool, args := range map[string]map[string]any{
		"process_start":   {"command": "true"},
		"process_restart": {},
		"process_kill":    {},
		"process_wait":    {},
		"tail_log":        {},
		"process_write":   {"data": "x"},
		"process_resize":  {"cols": 80, "rows": 24},
		"process_remove":  {},
	} {
		r := s.Call(tool, args)
		assert.True(t, r.IsError, "%s: %s", tool, r.Text)
		assert.Contains(t, r.Text, "name is required", tool)
		assert.NotContains(t, r.Text, "invalid run name", tool)
	}
}
