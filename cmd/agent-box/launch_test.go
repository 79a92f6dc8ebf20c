//go:build linux

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
	"github.com/agent-box/agent-box/runs"
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
	t.Parallel()
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
	s.OK("process_wait", map[string]any{"name": "b", "timeout_ms": 30000}) // before the state dir's cleanup

	require.Contains(t, stderr.String(), "supervisors: setsid (AGENT_BOX_LAUNCH=systemd but systemd-run is not on PATH")
	assert.Equal(t, 1, strings.Count(stderr.String(), "supervisors:"), "the choice is logged once per server:\n%s", stderr.String())
}

// connectWithFakeSystemdRun starts agent-box with AGENT_BOX_LAUNCH=systemd
// and the stand-in systemd-run first on its PATH (the launch finds
// systemd-run by PATH lookup, as ProbeHost does).
func connectWithFakeSystemdRun(t *testing.T, state string, fake fakeSystemdRunDir) (*abtest.Server, *lockedBuffer) {
	t.Helper()
	cmd := exec.Command(binary, "--state-dir", state)
	cmd.Env = fake.Env()
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	s := abtest.ConnectCmd(t, cmd)
	t.Cleanup(func() { t.Logf("server stderr:\n%s", stderr.String()) })
	return s, stderr
}

// supervisorCommand is how the server under test starts supervisors: it
// finds them beside its own executable, which it knows by its real path.
func supervisorCommand(t *testing.T) []string {
	t.Helper()
	exe, err := filepath.EvalSymlinks(binary)
	require.NoError(t, err)
	return runs.SupervisorCommand(exe)
}

// On a box where logind kills the session's processes, supervisors start
// through systemd-run --scope, which runs the command in its own process
// once the scope exists: same pid, same session, fd 3 (the supervisor's
// channel) passed through. The stand-in systemd-run checks its
// options and execs as the real one does, so the whole path runs here: the
// run starts, its supervisor is the process systemd-run was (exec kept the
// pid, the start time and the session), and it captures output, passes
// stdin and records the exit code.
func TestSystemdScopeLaunchRunsSupervisorInPlace(t *testing.T) {
	t.Parallel()
	fake := installFakeSystemdRun(t)
	state := t.TempDir()
	s, stderr := connectWithFakeSystemdRun(t, state, fake)

	st := s.OK("process_start", map[string]any{"name": "scoped", "stdin": "pipe",
		"command": `echo "hello from the scope"; read line; echo "got $line"; exit 7`})
	runID := abtest.Str(st.Run()["run_id"])
	require.Len(t, runID, len("20261202T141701.123456789Z-3f9a1c"), st.Text)
	t.Cleanup(func() { s.Call("process_kill", map[string]any{"name": "scoped", "signal": "KILL"}) })
	require.Equal(t, "running", st.Run()["state"], st.Text)

	calls := fake.Calls(t)
	require.Len(t, calls, 1, "systemd-run is called once per start")
	c := calls[0]
	require.Empty(t, c.Refused, "systemd-run would not take these arguments: %q", c.Argv)
	sup := append(supervisorCommand(t), "scoped", runID)
	want := []string{"systemd-run"}
	if os.Geteuid() != 0 {
		want = append(want, "--user")
	}
	want = append(want, "--scope", "--collect", "--quiet", "--unit", "agent-box-scoped-"+runID[len(runID)-6:])
	assert.Equal(t, append(want, sup...), c.Argv)
	assert.Equal(t, "socket", c.Fd3, "the supervisor's channel reaches systemd-run without close-on-exec")

	store, _, err := runrecord.Open(state)
	require.NoError(t, err)
	rec, err := store.Read("scoped", runID)
	require.NoError(t, err)
	assert.Equal(t, c.PID, rec.SupervisorPID, "the recorded supervisor is the process systemd-run was")
	assert.Equal(t, abtest.Num(st.Run()["pid"]), int64(rec.PID))
	// The process systemd-run was is now the supervisor itself, still
	// leading the session agent-box made for it, with the start time the
	// record vouches for.
	argv, err := proc.Cmdline(c.PID)
	require.NoError(t, err)
	assert.Equal(t, sup, argv, "systemd-run's process runs the supervisor")
	exe, err := os.Readlink("/proc/" + strconv.Itoa(c.PID) + "/exe")
	require.NoError(t, err)
	assert.Equal(t, sup[0], exe, "exec replaced systemd-run's image")
	ps, err := proc.ReadStat(c.PID)
	require.NoError(t, err)
	assert.Equal(t, c.PID, ps.SID, "the supervisor leads its own session")
	assert.Equal(t, rec.SupervisorStartTime, ps.StartTime)
	child, err := proc.ReadStat(rec.PID)
	require.NoError(t, err)
	assert.Equal(t, c.PID, child.PPID, "the run's process is the supervisor's child")

	s.OK("process_write", map[string]any{"name": "scoped", "data": "ping\n", "close": true})
	w := s.OK("process_wait", map[string]any{"name": "scoped", "timeout_ms": 30000})
	run := w.Data["run"].(map[string]any)
	assert.Equal(t, "exited", run["state"], w.Text)
	assert.Equal(t, int64(7), abtest.Num(run["exit_code"]), w.Text)
	all, _, _ := s.ReadAll("scoped", 4096, false)
	assert.Equal(t, "hello from the scope\ngot ping\n", string(all))
	assert.Contains(t, stderr.String(), "supervisors: systemd (AGENT_BOX_LAUNCH=systemd)")
}

// systemd-run that cannot make the scope (no user manager, a unit of that
// name already loaded, polkit says no) prints why and exits without
// running the command. process_start must then fail at once, not after
// the start timeout, and leave nothing that holds the run's name.
func TestSystemdRunFailureFailsStartAndFreesName(t *testing.T) {
	t.Parallel()
	fake := installFakeSystemdRun(t)
	require.NoError(t, os.WriteFile(fake.Fail, nil, 0o600))
	state := t.TempDir()
	s, _ := connectWithFakeSystemdRun(t, state, fake)

	began := time.Now()
	r := s.Call("process_start", map[string]any{"name": "scoped", "command": "echo hi"})
	took := time.Since(began)
	t.Logf("process_start answered in %s: %s", took, r.Text)
	require.True(t, r.IsError, "process_start succeeded although systemd-run failed: %s", r.Text)
	// Not a timing assertion on a loaded machine: the failure is known the
	// moment systemd-run exits; only waiting out the 15 s start timeout
	// would take this long.
	assert.Less(t, took, 10*time.Second, "process_start waited for the start timeout instead of seeing systemd-run exit")
	assert.Contains(t, r.Text, "supervisor", "the error says the supervisor did not start")
	assert.Contains(t, r.Text, "Failed to start transient scope unit", "the error quotes systemd-run's own message")
	calls := fake.Calls(t)
	require.Len(t, calls, 1)
	require.Empty(t, calls[0].Refused, "systemd-run was given arguments it would refuse: %q", calls[0].Argv)
	require.True(t, calls[0].Failed)

	// What is left is a record of a start that never happened, which does
	// not hold the name; systemd-run's message is in its supervisor.log.
	l := s.OK("process_list", map[string]any{"name": "scoped", "all": true})
	left := abtest.RunOf(t, l, "scoped")
	assert.Equal(t, "unknown", left["state"], l.Text)
	assert.Contains(t, abtest.Str(left["reason"]), "start", l.Text)
	failedID := abtest.Str(left["run_id"])
	store, _, err := runrecord.Open(state)
	require.NoError(t, err)
	supLog, err := os.ReadFile(filepath.Join(store.RunDir("scoped", failedID), "supervisor.log"))
	require.NoError(t, err)
	assert.Contains(t, string(supLog), "Failed to start transient scope unit")

	require.NoError(t, os.Remove(fake.Fail))
	st := s.OK("process_start", map[string]any{"name": "scoped", "command": "echo hi"})
	assert.NotEqual(t, failedID, st.Run()["run_id"])
	w := s.OK("process_wait", map[string]any{"name": "scoped", "timeout_ms": 30000})
	run := w.Data["run"].(map[string]any)
	assert.Equal(t, "exited", run["state"], w.Text)
	assert.Equal(t, int64(0), abtest.Num(run["exit_code"]), w.Text)
	assert.Len(t, fake.Calls(t), 2)
}
