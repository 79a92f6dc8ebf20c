package faults

import (
	"os/exec"
	"slices"
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

// deadProcess returns the pid and start time of a process that has
// exited and been reaped: a supervisor that is gone.
func deadProcess(t *testing.T) (int, uint64) {
	t.Helper()
	cmd := exec.Command("sleep", "30")
	require.NoError(t, cmd.Start())
	st, err := proc.ReadStat(cmd.Process.Pid)
	require.NoError(t, err)
	cmd.Process.Kill()
	cmd.Wait()
	return st.PID, st.StartTime
}

// TestRecordNamingALiveProcessWithItsStartTime: a planted record that names
// an unrelated live process (a "setsid sleep", in a session of its own)
// with its real start time, and a supervisor that is gone, is listed
// unknown with a reason and never signalled; before, it read "running"
// ("supervisor is gone") and process_kill signalled the sleep's group
// (issue 9). A record naming pid 1 the same way reads unknown too (the
// kill of that one is asserted in runs' TestPlantedRecordsNeverSignal...,
// through a system that only records signals: here a wrong answer would
// be kill(-1)).
func TestRecordNamingALiveProcessWithItsStartTime(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	_, st, gone := victimWith(t, &syscall.SysProcAttr{Setsid: true})
	init, err := proc.ReadStat(1)
	require.NoError(t, err)
	supPID, supStart := deadProcess(t)

	plant(t, state, "sleeper", func(r *runrecord.Record) {
		r.PID, r.PIDStartTime = st.PID, st.StartTime
		r.SupervisorPID, r.SupervisorStartTime = supPID, supStart
	})
	// The record names the sleep's session as its supervisor's: the
	// sleep leads it, so it is the "supervisor", alive, and not one.
	plant(t, state, "leader", func(r *runrecord.Record) {
		r.PID, r.PIDStartTime = st.PID, st.StartTime
		r.SupervisorPID, r.SupervisorStartTime = st.SID, st.StartTime
	})
	plant(t, state, "init", func(r *runrecord.Record) {
		r.PID, r.PIDStartTime = 1, init.StartTime
		r.SupervisorPID, r.SupervisorStartTime = supPID, supStart
	})
	s := connect(t, state)
	l := s.OK("process_list", nil)
	for _, name := range []string{"sleeper", "leader", "init"} {
		run := abtest.RunOf(t, l, name)
		assert.Equal(t, "unknown", run["state"], "%s: %v", name, run["reason"])
		assert.Contains(t, run["reason"], "the record is not this run's", name)
		// The process it names is alive and has a use, none of it the run's.
		assert.Nil(t, run["usage"], name)
	}
	assert.NotContains(t, l.Text, "mem=")
	for _, name := range []string{"sleeper", "leader"} {
		for _, args := range []map[string]any{
			{"name": name, "signal": "KILL"},
			{"name": name, "signal": "TERM", "grace_ms": 100},
			{"name": name, "signal": "STOP"},
		} {
			bad("live process of another session")
			r := s.Call("process_kill", args)
			assert.True(t, r.IsError, "%s: kill must be refused: %s", name, r.Text)
			assert.Contains(t, r.Text, "nothing was signalled")
			assert.True(t, alive(gone), "%s: the unrelated process was killed", name)
		}
		// Nor does it hold its name.
		s.OK("process_start", map[string]any{"name": name, "command": "true"})
	}
	st2, err := proc.ReadStat(st.PID)
	require.NoError(t, err)
	assert.NotEqual(t, byte('T'), st2.State, "the unrelated process was stopped")
}

// processWith returns the pid of the live process whose command line
// ends with marker, or 0.
func processWith(t *testing.T, marker string) int {
	t.Helper()
	procs, err := proc.Processes()
	require.NoError(t, err)
	for _, p := range procs {
		if argv, err := proc.Cmdline(p.PID); err == nil && len(argv) > 0 && argv[len(argv)-1] == marker && !slices.Contains(argv, "-c") {
			return p.PID
		}
	}
	return 0
}

// TestBorrowedSupervisorCommandLineHidesNothing: a run's descendant that
// makes a session of its own and ends its command line with a name and a
// run id, as a supervisor's does, is still the run's: process_list shows
// it and process_kill and timeout_s reach it. Before (issue 9) it was
// taken for the supervisor of a nested run and left alone with
// everything below it.
func TestBorrowedSupervisorCommandLineHidesNothing(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("perl"); err != nil {
		abtest.Missing(t, "perl")
	}
	s := connect(t, t.TempDir())
	for _, tc := range []struct {
		name string
		args map[string]any
	}{
		{"killed", nil},
		{"timed-out", map[string]any{"timeout_s": 1}},
	} {
		id := runrecord.NewRunID(time.Now())
		args := map[string]any{"name": tc.name,
			"command": "setsid perl -e 'sleep 178' x " + id + " & sleep 300"}
		for k, v := range tc.args {
			args[k] = v
		}
		s.OK("process_start", args)
		var pid int
		// Until setsid(1) has made its session, the process is still in
		// the leader's group and would die of the group's signal, never
		// named on its own: wait for the session too.
		abtest.WaitFor(t, "the borrowed command line in a session of its own", 10*time.Second, func() bool {
			pid = processWith(t, id)
			st, err := proc.ReadStat(pid)
			return pid != 0 && err == nil && st.SID == pid
		})
		t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
		if tc.name == "killed" {
			r := s.OK("process_kill", map[string]any{"name": tc.name})
			assert.Contains(t, r.Data["signalled_pids"], float64(pid), r.Text)
		}
		abtest.WaitFor(t, tc.name+": the process with the borrowed command line gone", 15*time.Second, func() bool {
			return processWith(t, id) == 0
		})
		w := s.OK("process_wait", map[string]any{"name": tc.name, "timeout_ms": 15000})
		assert.Equal(t, "exited", w.Data["run"].(map[string]any)["state"], w.Text)
		assert.False(t, strings.Contains(w.Text, "still running"), w.Text)
	}
}

// TestAgentBoxInsideARunSeesItTruly: agent-box called from a run's own
// script shares the run's session (its supervisor's) and the leader's
// group, ids that a planted record naming them could not be told from.
// With the run's supervisor alive and verified, the record is believed:
// the run reads running, and only the kill of agent-box's own group is
// refused.
func TestAgentBoxInsideARunSeesItTruly(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	s := connect(t, state)
	s.OK("process_start", map[string]any{"name": "outer",
		"command": `'` + binary + `' --state-dir '` + state + `' ps --json; printf '\075\075\075\n'; '` + binary + `' --state-dir '` + state + `' kill outer; printf 'KILL-%s=%s\n' RC $?; sleep 300`})
	t.Cleanup(func() { s.Call("process_kill", map[string]any{"name": "outer", "signal": "KILL"}) })
	var out string
	abtest.WaitFor(t, "the inner agent-box's answers", 20*time.Second, func() bool {
		out = abtest.Str(s.OK("tail_log", map[string]any{"name": "outer", "offset": 0}).Data["content"])
		return strings.Contains(out, "KILL-RC=")
	})
	ps, kill, _ := strings.Cut(out, "===\n")
	assert.Contains(t, ps, `"state": "running"`, out)
	assert.NotContains(t, ps, "not this run's", out)
	assert.Contains(t, kill, "KILL-RC=1", "its own group is never signalled: %s", out)
	assert.Equal(t, "running", abtest.RunOf(t, s.OK("process_list", nil), "outer")["state"])
}
