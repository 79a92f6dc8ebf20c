//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
	"github.com/agent-box/agent-box/proc"
)

// shortGrace is the grace from SIGTERM to SIGKILL at timeout_s in these
// tests (5 s in production): their processes ignore TERM, so each would
// sit out the whole grace.
const shortGrace = "AGENT_BOX_TIMEOUT_GRACE_MS=500"

// timeout_s kills the whole group: a member that ignores TERM outlives the
// leader that died of it, and still gets the KILL when the grace ends, even
// though it let go of the output and the run's exit is already recorded.
func TestTimeoutKillsGroupMemberThatOutlivesTheLeader(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	pidFile := filepath.Join(t.TempDir(), "pid")
	s := connect(t, state, shortGrace)
	s.OK("process_start", map[string]any{"name": "to", "timeout_s": 1,
		"command": `sh -c 'trap "" TERM; exec sleep 60' >/dev/null 2>&1 & echo $! > ` + pidFile + `; sleep 100`})
	w := s.OK("process_wait", map[string]any{"name": "to", "timeout_ms": 30000})
	run := w.Data["run"].(map[string]any)
	require.Equal(t, "SIGTERM", run["signal"], w.Text)
	require.Equal(t, true, run["timed_out"], w.Text)
	b, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	// The grace is 500 ms; the member would live for 60 s.
	abtest.WaitFor(t, "the TERM-ignoring member to be killed after the grace", 30*time.Second, func() bool {
		st, err := proc.ReadStat(pid)
		return err != nil || st.Dead() // a zombie is dead, whoever reaps it
	})
}

// The deadline holds for the run's processes that outlive its leader, also
// one in a session of its own that let go of the output: the leader exits
// at once, with code 0, and the deadline still ends the rest.
func TestTimeoutEndsProcessesThatOutliveTheLeader(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pid")
	s := connect(t, t.TempDir(), shortGrace)
	s.OK("process_start", map[string]any{"name": "to", "timeout_s": 1,
		"command": `setsid sh -c 'trap "" TERM; exec sleep 60' >/dev/null 2>&1 </dev/null & echo $! > ` + pidFile + `; exit 0`})
	w := s.OK("process_wait", map[string]any{"name": "to", "timeout_ms": 30000})
	run := w.Data["run"].(map[string]any)
	require.Equal(t, int64(0), abtest.Num(run["exit_code"]), w.Text)
	b, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	abtest.WaitFor(t, "the deadline (1 s, then the grace) to end the process that outlived the leader", 30*time.Second, func() bool {
		st, err := proc.ReadStat(pid)
		return err != nil || st.Dead()
	})
	l := abtest.RunOf(t, s.OK("process_list", nil), "to")
	require.Nil(t, l["survivors"], "%v", l)
}
