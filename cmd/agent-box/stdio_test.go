//go:build linux

package main

import (
	"fmt"
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The MCP stream lives on its own descriptor and fd 1 points at stderr for
// the server's whole life: a stray write to fd 1 reaches the diagnostics,
// never the protocol, and fd 1 is never closed and handed to a record or
// lock file opened later.
func TestServerFD1IsStderr(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	state := t.TempDir()
	s := spawn(t, state)
	// Enough work that the server opens run files and collects garbage.
	for i := range 3 {
		name := fmt.Sprintf("r%d", i)
		s.OK("process_start", map[string]any{"name": name, "command": "echo hi"})
		s.OK("process_wait", map[string]any{"name": name, "timeout_ms": 30000})
		s.OK("process_list", map[string]any{"all": true})
	}
	fd := func(n int) string {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", s.Cmd.Process.Pid, n))
		require.NoError(t, err, "fd %d of the server", n)
		return l
	}
	assert.Equal(t, fd(2), fd(1), "fd 1 of the server is not its stderr")
	// And the protocol still works on its own descriptor.
	s.OK("process_list", nil)
}
