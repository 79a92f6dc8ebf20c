package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
)

// lockedBuffer collects a server's stderr, which its reader goroutine
// writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The launch decision is taken at the first process_start, not at
// start-up (on a systemd box it asks logind over D-Bus, which a server
// that only lists must not pay for). Asked for systemd where systemd-run
// cannot be found, agent-box says so and starts the run with setsid, the
// path every box without systemd takes.
func TestLaunchChosenAtFirstStart(t *testing.T) {
	state := t.TempDir()
	cmd := exec.Command(binary, "--state-dir", state)
	// A PATH without systemd-run, whatever this machine has installed.
	cmd.Env = append(os.Environ(), "AGENT_BOX_LAUNCH=systemd", "PATH="+t.TempDir())
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	s := abtest.ConnectCmd(t, cmd)

	s.OK("process_list", nil)
	assert.NotContains(t, stderr.String(), "supervisors:", "the launch was probed before any start")

	s.OK("process_start", map[string]any{"name": "a", "command": "echo hi"})
	w := s.OK("process_wait", map[string]any{"name": "a", "timeout_ms": 30000})
	run := w.Data["run"].(map[string]any)
	assert.Equal(t, "exited", run["state"], w.Text)
	assert.Equal(t, int64(0), abtest.Num(run["exit_code"]), w.Text)
	s.OK("process_start", map[string]any{"name": "b", "command": "echo hi"})

	require.Contains(t, stderr.String(), "supervisors: setsid (AGENT_BOX_LAUNCH=systemd but systemd-run is not on PATH")
	assert.Equal(t, 1, strings.Count(stderr.String(), "supervisors:"), "the choice is logged once per server:\n%s", stderr.String())
}
