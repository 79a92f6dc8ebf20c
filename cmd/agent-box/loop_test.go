package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
)

func comm(t *testing.T, pid int64) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.FormatInt(pid, 10) + "/comm")
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

// A lone command is the run's leader, so its pid and exit status are the
// program's: dash does not exec it by itself (issue 10).
func TestLoneCommandIsTheProgram(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())

	r := s.OK("process_start", map[string]any{"name": "sleeper", "command": "sleep 30"})
	assert.Equal(t, "sleep", comm(t, abtest.Num(r.Data["pid"])), "the reported pid is sleep's")
	assert.Equal(t, "program", r.Data["status_of"])

	r = s.OK("process_start", map[string]any{"name": "compound", "command": "sleep 30; true"})
	assert.Equal(t, "sh", comm(t, abtest.Num(r.Data["pid"])))
	assert.Equal(t, "shell", r.Data["status_of"])
	assert.Contains(t, r.Text, "status_of=shell")
	for _, name := range []string{"sleeper", "compound"} {
		s.OK("process_kill", map[string]any{"name": name, "signal": "KILL"})
	}

	if _, err := exec.LookPath("python3"); err != nil {
		abtest.Missing(t, "python3 is not installed")
	}
	// http.server catches KeyboardInterrupt and exits 0: the run must say
	// exit code 0, not the shell's "killed by SIGINT".
	s.OK("process_start", map[string]any{"name": "web", "command": "python3 -u -m http.server 0 --bind 127.0.0.1"})
	abtest.WaitFor(t, "the server to serve", 20*time.Second, func() bool {
		return strings.Contains(s.OK("tail_log", map[string]any{"name": "web", "wait_ms": 1000}).Text, "Serving HTTP")
	})
	s.OK("process_kill", map[string]any{"name": "web", "signal": "INT"})
	w := s.OK("process_wait", map[string]any{"name": "web", "timeout_ms": 20000})
	run := w.Data["run"].(map[string]any)
	assert.Equal(t, "exited", run["state"], w.Text)
	assert.EqualValues(t, 0, run["exit_code"], w.Text)
	assert.Nil(t, run["signal"], w.Text)
}
