//go:build linux

package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
	"github.com/agent-box/agent-box/supervisor"

	"github.com/agent-box/agent-box/internal/abtest"
)

// plant writes a record as an earlier agent-box on some boot would have.
func plant(t *testing.T, state string, mut func(r *runrecord.Record)) *runrecord.Record {
	t.Helper()
	store, _, err := runrecord.Open(state)
	require.NoError(t, err)
	boot, err := proc.BootID()
	require.NoError(t, err)
	now := time.Now().UTC().Add(-time.Hour)
	r := &runrecord.Record{
		Version: runrecord.Version, Name: "planted", RunID: runrecord.NewRunID(now), LogFormat: "raw",
		BootID: boot, StartedAt: now,
		Spec: runrecord.Spec{Command: "sleep 1000", Cwd: "/", CaptureMode: "combined", Stdin: "null"},
	}
	r.LogPath = store.LogPath(r.Name, r.RunID)
	mut(r)
	require.NoError(t, store.Create(r))
	return r
}

func TestForeignBootAndReusedPidAreUnknownAndNotSignalled(t *testing.T) {
	t.Parallel()
	self := os.Getpid()
	st, err := proc.ReadStat(self)
	require.NoError(t, err)
	cases := []struct {
		name   string
		mut    func(r *runrecord.Record)
		reason string
	}{
		{"rebooted", func(r *runrecord.Record) {
			// A live pid, even the right start time: on another boot it
			// means nothing.
			r.Name = "rebooted"
			r.BootID = "00000000-0000-0000-0000-000000000000"
			r.PID, r.PIDStartTime = self, st.StartTime
			r.SupervisorPID, r.SupervisorStartTime = self, st.StartTime
		}, "another boot"},
		{"reused", func(r *runrecord.Record) {
			// This test process stands in for an unrelated process that
			// got the recorded pid: its start time differs.
			r.Name = "reused"
			r.PID, r.PIDStartTime = self, st.StartTime+12345
			r.SupervisorPID, r.SupervisorStartTime = self, st.StartTime+12345
		}, "supervisor are gone"},
	}
	state := t.TempDir()
	for _, c := range cases {
		plant(t, state, c.mut)
	}
	s := connect(t, state)
	l := s.OK("process_list", nil)
	for _, c := range cases {
		run := abtest.RunOf(t, l, c.name)
		assert.Equal(t, "unknown", run["state"], c.name)
		assert.Contains(t, run["reason"], c.reason, c.name)
		k := s.Call("process_kill", map[string]any{"name": c.name, "signal": "KILL"})
		assert.True(t, k.IsError, "kill of %s must be refused: %s", c.name, k.Text)
		assert.Contains(t, k.Text, "nothing was signalled")
		// Still alive: we are the "victim".
		assert.NoError(t, syscallKill0(self))
	}
	// Neither blocks its name: their processes are provably not running.
	s.OK("process_start", map[string]any{"name": "rebooted", "command": "true"})
	// Its supervisor writes the run dir until the run has ended: the
	// state dir's cleanup must not race it.
	s.OK("process_wait", map[string]any{"name": "rebooted", "timeout_ms": 20000})
}

func TestCorruptRecordIsListedUnknown(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	r := plant(t, state, func(r *runrecord.Record) { r.Name = "torn" })
	store, _, err := runrecord.Open(state)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(store.RunDir(r.Name, r.RunID)+"/record.json", []byte(`{"version":1,"name":"to`), 0o600))
	s := connect(t, state)
	run := abtest.RunOf(t, s.OK("process_list", nil), "torn")
	assert.Equal(t, "unknown", run["state"])
	assert.Contains(t, run["reason"], "corrupt")
}

func syscallKill0(pid int) error { return syscall.Kill(pid, 0) }

// With agent-box-supervisor installed beside agent-box (as make install
// and abtest do) runs are supervised by it; test/e2e/ builds agent-box alone
// and so covers the "agent-box supervise" fallback.
func TestLeanSupervisorIsUsed(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	s := connect(t, state)
	r := s.OK("process_start", map[string]any{"name": "lean", "argv": []any{"sleep", "30"}})
	store, _, err := runrecord.Open(state)
	require.NoError(t, err)
	rec, err := store.Read("lean", abtest.Str(r.Run()["run_id"]))
	require.NoError(t, err)
	argv, err := proc.Cmdline(rec.SupervisorPID)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(argv), 3)
	assert.Equal(t, supervisor.BinaryName, filepath.Base(argv[0]))
	assert.Equal(t, []string{"lean", rec.RunID}, argv[len(argv)-2:], "it names its run")
	s.OK("process_kill", map[string]any{"name": "lean", "signal": "KILL"})
}
