//go:build linux

package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
	"github.com/agent-box/agent-box/runrecord"
)

// When the supervisor is killed (OOM, kill -9) and then the leader dies,
// nobody records the exit, but a job the leader backgrounded lives on in
// its group. The run says so (unknown, with the survivors), keeps its name
// in use, and process_kill still reaches the job; once it is gone the run
// is plainly lost and the name is free.
func TestLostRunSurvivorsAreReportedAndKilled(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	s := connect(t, state)
	pidFile := filepath.Join(t.TempDir(), "pid")
	st := s.OK("process_start", map[string]any{"name": "lost",
		"command": `sleep 1001 & echo $! > ` + pidFile + `; exec sleep 1000`})
	job := readPID(t, pidFile)
	t.Cleanup(func() { syscallKill(job) })
	rec, err := (&runrecord.Store{Root: state}).Read("lost", abtest.Str(st.Run()["run_id"]))
	require.NoError(t, err)

	syscallKill(rec.SupervisorPID)
	abtest.WaitFor(t, "the supervisor to die", 10*time.Second, func() bool { return dead(rec.SupervisorPID) })
	syscallKill(rec.PID)
	abtest.WaitFor(t, "the leader to die", 10*time.Second, func() bool { return dead(rec.PID) })

	run := abtest.RunOf(t, s.OK("process_list", nil), "lost")
	assert.Equal(t, "unknown", run["state"], "%v", run)
	assert.Contains(t, run["reason"], "no exit was recorded")
	require.Equal(t, []any{float64(job)}, run["survivors"], "%v", run)

	again := s.Call("process_start", map[string]any{"name": "lost", "command": "true"})
	require.True(t, again.IsError, "the name must stay in use while the job lives: %s", again.Text)
	assert.Contains(t, again.Text, "in use")

	k := s.OK("process_kill", map[string]any{"name": "lost", "signal": "TERM"})
	assert.Equal(t, []any{float64(rec.PID)}, k.Data["signalled_groups"], "the job is in the leader's group: %s", k.Text)
	abtest.WaitFor(t, "the job to die of the kill", 10*time.Second, func() bool { return dead(job) })

	run = abtest.RunOf(t, s.OK("process_list", nil), "lost")
	assert.Equal(t, "unknown", run["state"])
	assert.Nil(t, run["survivors"])
	s.OK("process_start", map[string]any{"name": "lost", "command": "true"})
}
