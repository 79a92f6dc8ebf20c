//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
)

func syscallKill(pid int) { syscall.Kill(pid, syscall.SIGKILL) }

func dead(pid int) bool {
	st, err := proc.ReadStat(pid)
	return err != nil || st.Dead()
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	var pid int
	abtest.WaitFor(t, "the child to write its pid", 10*time.Second, func() bool {
		b, err := os.ReadFile(path)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pid
}

// A process that leaves the run's process group and session (setsid) is
// still the run's: it is reported as running after the leader's exit, and
// process_kill reaches it.
func TestProcessInASessionOfItsOwnIsReportedAndKilled(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	s := connect(t, state)
	pidFile := filepath.Join(t.TempDir(), "pid")
	st := s.OK("process_start", map[string]any{"name": "d",
		"command": `setsid sleep 1001 >/dev/null 2>&1 & echo $! > ` + pidFile + `; exit 0`})
	pid := readPID(t, pidFile)
	t.Cleanup(func() { syscallKill(pid) })
	// $! is known before setsid(1) has made its session: still in the
	// group at the kill, it would die of the group's signal and never be
	// named on its own (as in TestKillReachesProcessesOutsideTheGroup).
	abtest.WaitFor(t, "the background process to lead a session of its own", 10*time.Second, func() bool {
		st, err := proc.ReadStat(pid)
		return err == nil && st.SID == pid
	})

	w := s.OK("process_wait", map[string]any{"name": "d", "timeout_ms": 30000})
	run := w.Data["run"].(map[string]any)
	assert.Equal(t, "exited", run["state"], w.Text)
	assert.Equal(t, int64(0), abtest.Num(run["exit_code"]))
	require.Equal(t, []any{float64(pid)}, run["survivors"], "the setsid'd process is reported: %s", w.Text)
	assert.Contains(t, run["reason"], "still running")

	k := s.OK("process_kill", map[string]any{"name": "d"})
	assert.Equal(t, []any{float64(pid)}, k.Data["signalled_pids"], k.Text)
	abtest.WaitFor(t, "the setsid'd process to die of the kill", 10*time.Second, func() bool { return dead(pid) })
	rec, err := (&runrecord.Store{Root: state}).Read("d", abtest.Str(st.Run()["run_id"]))
	require.NoError(t, err)
	abtest.WaitFor(t, "the supervisor to leave with the run's last process", 10*time.Second, func() bool { return dead(rec.SupervisorPID) })
	l := abtest.RunOf(t, s.OK("process_list", nil), "d")
	assert.Equal(t, "exited", l["state"])
	assert.Nil(t, l["survivors"])
}

// process_kill of a running run reaches the processes that left its group.
func TestKillReachesProcessesOutsideTheGroup(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	pidFile := filepath.Join(t.TempDir(), "pid")
	s.OK("process_start", map[string]any{"name": "d",
		"command": `setsid sleep 1001 & echo $! > ` + pidFile + `; sleep 1000`})
	pid := readPID(t, pidFile)
	t.Cleanup(func() { syscallKill(pid) })
	// $! is known before setsid(1) has made its session: killed while
	// still in the group, it would die of the group's signal and never be
	// named on its own.
	abtest.WaitFor(t, "the background process to lead a session of its own", 10*time.Second, func() bool {
		st, err := proc.ReadStat(pid)
		return err == nil && st.SID == pid
	})
	k := s.OK("process_kill", map[string]any{"name": "d", "grace_ms": 5000})
	assert.Contains(t, k.Data["signalled_pids"], float64(pid), k.Text)
	abtest.WaitFor(t, "the setsid'd process to die of the kill", 10*time.Second, func() bool { return dead(pid) })
	w := s.OK("process_wait", map[string]any{"name": "d", "timeout_ms": 30000})
	run := w.Data["run"].(map[string]any)
	assert.Equal(t, "SIGTERM", run["signal"], w.Text)
	assert.Nil(t, run["survivors"], w.Text)
}

// A run may start other runs (an agent's script calling agent-box start).
// Their supervisors end up below the outer run's supervisor, its
// subreaper, but each is a run of its own: killing the outer run leaves
// the inner one running, and the inner one does not keep the outer one's
// name in use.
func TestKillingARunSparesARunItStarted(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	script := fmt.Sprintf("%s --state-dir %s start inner -- sleep 60; exec sleep 60", binary, state)
	_, errOut, code := agentBox(t, state, "start", "outer", "--", "sh", "-c", script)
	require.Equal(t, 0, code, errOut)
	t.Cleanup(func() {
		agentBox(t, state, "kill", "-s", "KILL", "inner")
		agentBox(t, state, "kill", "-s", "KILL", "outer")
	})
	s := connect(t, state)
	// Started, not starting: a run whose supervisor has not yet recorded
	// the pid lists as running too, and killing the outer run then kills
	// the inner "agent-box start" (in the outer run's group) mid-start,
	// which rightly leaves the inner run's start interrupted.
	abtest.WaitFor(t, "the inner run to start", 10*time.Second, func() bool {
		l := s.Call("process_list", map[string]any{"name": "inner"})
		if l.IsError {
			return false
		}
		run := abtest.RunOf(t, l, "inner")
		return run["state"] == "running" && abtest.Num(run["pid"]) > 0
	})
	k := s.OK("process_kill", map[string]any{"name": "outer", "grace_ms": 5000})
	assert.Nil(t, k.Data["signalled_pids"], "nothing outside the outer run's group: %s", k.Text)
	w := s.OK("process_wait", map[string]any{"name": "outer", "timeout_ms": 30000})
	outer := w.Data["run"].(map[string]any)
	assert.Equal(t, "SIGTERM", outer["signal"], w.Text)
	assert.Nil(t, outer["survivors"], "the inner run is not the outer run's survivor: %s", w.Text)
	inner := abtest.RunOf(t, s.OK("process_list", map[string]any{"name": "inner"}), "inner")
	assert.Equal(t, "running", inner["state"], "inner run after killing the outer one: %v", inner)
	s.OK("process_start", map[string]any{"name": "outer", "command": "true"})
}
