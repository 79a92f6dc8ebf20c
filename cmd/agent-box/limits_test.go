//go:build linux

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/cgroup"
	"github.com/agent-box/agent-box/internal/abtest"
	"github.com/agent-box/agent-box/runs"
)

// allocate500MB touches 500 MB, 10 MB at a time, and says so if it lives.
const allocate500MB = `import sys
b = []
for i in range(50):
    b.append(bytearray(10 << 20))
print("allocated 500 MB", flush=True)`

// A run that goes over memory_mb is killed by the kernel, and the run says
// so: from the cgroup's own OOM counter, not guessed from the SIGKILL.
func TestLimitMemoryOutOfMemory(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	st := s.OK("process_start", map[string]any{"name": "hog", "argv": []string{"python3", "-c", allocate500MB},
		"limits": map[string]any{"memory_mb": 64}})
	assert.Equal(t, map[string]any{"memory_mb": float64(64)}, st.Run()["limits"], st.Text)
	w := s.OK("process_wait", map[string]any{"name": "hog", "timeout_ms": 30000})
	run := w.Data["run"].(map[string]any)
	require.Equal(t, "SIGKILL", run["signal"], w.Text)
	assert.Equal(t, "killed by SIGKILL: out of memory (limit 64 MiB)", run["reason"], w.Text)
	assert.Equal(t, true, run["oom_killed"], w.Text)
	assert.Contains(t, w.Text, "hog exited (killed by SIGKILL: out of memory, limit 64 MiB)")
	log := s.OK("tail_log", map[string]any{"name": "hog", "offset": 0})
	assert.NotContains(t, abtest.Str(log.Data["content"]), "allocated", "it never got its 500 MB")

	// A shell whose child the cap killed goes on, and says so at its end.
	script := "python3 -c '" + allocate500MB + "'; echo status=$?; exit 3"
	s.OK("process_start", map[string]any{"name": "shell", "command": script, "limits": map[string]any{"memory_mb": 64}})
	w = s.OK("process_wait", map[string]any{"name": "shell", "timeout_ms": 30000})
	run = w.Data["run"].(map[string]any)
	require.Equal(t, int64(3), abtest.Num(run["exit_code"]), w.Text)
	assert.Equal(t, "exit code 3; out of memory: the kernel killed a process of the run (limit 64 MiB)", run["reason"], w.Text)
	assert.Contains(t, w.Text, "status=137")

	// A kill of a limited run is not called out of memory.
	s.OK("process_start", map[string]any{"name": "slept", "argv": []string{"sleep", "60"}, "limits": map[string]any{"memory_mb": 64}})
	s.OK("process_kill", map[string]any{"name": "slept", "signal": "KILL"})
	w = s.OK("process_wait", map[string]any{"name": "slept", "timeout_ms": 30000})
	run = w.Data["run"].(map[string]any)
	require.Equal(t, "SIGKILL", run["signal"], w.Text)
	assert.Equal(t, "killed by SIGKILL", run["reason"], w.Text)
	assert.Nil(t, run["oom_killed"], w.Text)
}

// forkSleepers forks up to 100 sleepers and says how many it got.
const forkSleepers = `import os, time
n = 0
for i in range(100):
    try:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        n += 1
    except OSError as e:
        print("fork failed:", e.strerror, flush=True)
        break
print("forked", n, flush=True)`

// pids caps the run's processes: its forks fail past the cap (the cap is
// its group's alone; the cgroup tests see who is in the group).
func TestLimitPidsStopsAForkLoop(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	s.OK("process_start", map[string]any{"name": "forker", "argv": []string{"python3", "-c", forkSleepers},
		"limits": map[string]any{"pids": 20}})
	w := s.OK("process_wait", map[string]any{"name": "forker", "timeout_ms": 30000})
	require.Contains(t, w.Text, "fork failed: Resource temporarily unavailable", w.Text)
	require.Contains(t, w.Text, "forked 19", "the leader and 19 sleepers make the 20 the cap allows")
	// The run says that its cap refused a fork: the cgroup's count.
	run := w.Data["run"].(map[string]any)
	assert.GreaterOrEqual(t, abtest.Num(run["pids_max_hit"]), int64(1), w.Text)
	assert.Contains(t, run["reason"], " refused at its pids cap of 20", w.Text)
	assert.Contains(t, w.Text, " refused at its pids cap of 20", w.Text)
	kill := s.OK("process_kill", map[string]any{"name": "forker", "signal": "KILL"})
	assert.NotContains(t, kill.Text, "still alive", kill.Text)
}

// The box's defaults cap every run; a run's own limits replace them field
// by field; the server's instructions say what the budget is. The group is
// made where the run's processes are: the leader is in it.
func TestLimitDefaults(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir(), "AGENT_BOX_DEFAULT_LIMITS=memory_mb=256,pids=64")
	assert.Contains(t, s.Session().InitializeResult().Instructions, "capped by default at memory_mb=256,pids=64")
	st := s.OK("process_start", map[string]any{"name": "d", "argv": []string{"sleep", "60"}})
	assert.Equal(t, map[string]any{"memory_mb": float64(256), "pids": float64(64)}, st.Run()["limits"], st.Text)
	assert.Contains(t, st.Text, " limits=memory_mb=256,pids=64")
	st = s.OK("process_start", map[string]any{"name": "own", "argv": []string{"sleep", "60"}, "limits": map[string]any{"pids": 10, "cpu_percent": 50}})
	assert.Equal(t, map[string]any{"memory_mb": float64(256), "pids": float64(10), "cpu_percent": float64(50)}, st.Run()["limits"], st.Text)
	cg, err := os.ReadFile(filepath.Join("/proc", strconv.FormatInt(abtest.Num(st.Run()["pid"]), 10), "cgroup"))
	require.NoError(t, err)
	assert.Contains(t, string(cg), "/"+cgroup.Leaf("own", abtest.Str(st.Run()["run_id"]))+"\n", "the leader is in the run's group:\n%s", cg)
}

// A limit this machine cannot enforce is refused, with why and what would
// enable it; the run does not start. Here the cgroup hierarchies are
// unmounted for the server (in a mount namespace of its own),
// so the test runs the same on every machine.
func TestLimitRefusedWhereNoCgroups(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	args := []string{"--mount", "--propagation", "private"}
	if os.Geteuid() != 0 {
		args = append([]string{"--user", "--map-root-user"}, args...)
	}
	script := `umount -R /sys/fs/cgroup && exec "$0" --state-dir "$1"`
	cmd := exec.Command("unshare", append(args, "sh", "-c", script, binary, state)...)
	cmd.Env = append(os.Environ(), "AGENT_BOX_DEFAULT_LIMITS=pids=500")
	s := abtest.ConnectCmd(t, cmd)
	assert.Contains(t, s.Session().InitializeResult().Instructions, "to be capped at pids=500, which this machine cannot enforce, so process_start refuses every run: limit cannot be enforced here")
	r := s.Call("process_start", map[string]any{"name": "capped", "argv": []string{"true"}, "limits": map[string]any{"memory_mb": 64}})
	require.True(t, r.IsError, r.Text)
	assert.Contains(t, r.Text, "limit cannot be enforced here: memory_mb=64,pids=500: cannot enforce the limit on this machine: no cgroup hierarchy is mounted")
	l := s.OK("process_list", nil)
	assert.Contains(t, l.Text, "no runs", "nothing started")
	r = s.Call("process_start", map[string]any{"name": "free", "argv": []string{"true"}})
	require.True(t, r.IsError, "the default limits cannot be enforced either: %s", r.Text)
	assert.Contains(t, r.Text, "pids=500")
}

// Without root, a v1 box's cgroups are not the user's to write: refused,
// saying so.
func TestLimitRefusedWithoutPermission(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("this test drops from root to nobody; run the suite as root (make test does)")
	}
	dir, err := os.MkdirTemp("", "agent-box-nobody-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, name := range []string{"agent-box", "agent-box-supervisor"} {
		require.NoError(t, abtest.CopyFile(filepath.Join(filepath.Dir(binary), name), filepath.Join(dir, name), 0o755))
	}
	state := filepath.Join(dir, "state")
	require.NoError(t, os.Mkdir(state, 0o700))
	require.NoError(t, os.Chown(state, 65534, 65534))
	require.NoError(t, os.Chmod(dir, 0o755))
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", filepath.Join(dir, "agent-box"), "--state-dir", state)
	cmd.Env = append(os.Environ(), "HOME="+state)
	s := abtest.ConnectCmd(t, cmd)
	r := s.Call("process_start", map[string]any{"name": "capped", "argv": []string{"true"}, "limits": map[string]any{"pids": 10}})
	require.True(t, r.IsError, r.Text)
	assert.Contains(t, r.Text, "is not writable by uid 65534")
	assert.True(t, strings.Contains(r.Text, "run agent-box as root") || strings.Contains(r.Text, "delegated"), r.Text)
}

// A supervisor's crash leaves the run's processes in their group, still
// capped; once they are gone, removing the run removes the group the
// supervisor could not.
func TestLimitSupervisorCrash(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	s := connect(t, state)
	st := s.OK("process_start", map[string]any{"name": "orphan", "argv": []string{"sleep", "60"}, "limits": map[string]any{"pids": 10}})
	pid, runID := int(abtest.Num(st.Run()["pid"])), abtest.Str(st.Run()["run_id"])
	rec, err := os.ReadFile(filepath.Join(state, "runs", "orphan", runID, "record.json"))
	require.NoError(t, err)
	var r struct {
		SupervisorPID int `json:"supervisor_pid"`
	}
	require.NoError(t, json.Unmarshal(rec, &r))
	require.NoError(t, syscall.Kill(r.SupervisorPID, syscall.SIGKILL))
	abtest.WaitFor(t, "the supervisor to be gone", 10*time.Second, func() bool {
		return strings.Contains(s.OK("process_list", nil).Text, "supervisor is gone")
	})
	leaf := "/" + cgroup.Leaf("orphan", runID) + "\n"
	cg, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cgroup"))
	require.NoError(t, err)
	require.Contains(t, string(cg), leaf, "the run is still in its group, capped")
	h, err := cgroup.Self()
	require.NoError(t, err)
	require.NotNil(t, h.Group(cgroup.Leaf("orphan", runID)))

	s.OK("process_kill", map[string]any{"name": "orphan", "signal": "KILL"})
	abtest.WaitFor(t, "the run to be over", 10*time.Second, func() bool {
		return !strings.Contains(s.OK("process_list", nil).Text, "state=running")
	})
	s.OK("process_remove", map[string]any{"name": "orphan"})
	assert.Nil(t, h.Group(cgroup.Leaf("orphan", runID)), "the group is removed with the run")
}

// Under cgroup v2 the supervisor of a run with limits is started in a
// scope systemd delegates to it (--property=Delegate=yes), where it makes
// the run's group. This box is v1: the Manager is shown a v2 hierarchy,
// and systemd-run is the test's stand-in, which runs the supervisor in
// place (it then caps the run with v1).
func TestLimitV2StartsADelegatedScope(t *testing.T) {
	t.Parallel()
	fake := installFakeSystemdRun(t)
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "cgroup.controllers"), []byte("cpu memory pids\n"), 0o644))
	if uid := strconv.Itoa(os.Geteuid()); uid != "0" {
		dir := filepath.Join(root, "user.slice", "user-"+uid+".slice", "user@"+uid+".service")
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "cgroup.controllers"), []byte("cpu memory pids\n"), 0o644))
	}
	s := connectWith(t, t.TempDir(), func(m *runs.Manager) {
		m.Cgroups = func() (*cgroup.Hierarchy, error) {
			return &cgroup.Hierarchy{V2: true, Root: root, Dirs: map[string]string{"": filepath.Join(root, "session.scope")}}, nil
		}
		m.SystemdScopes = func() error { return nil }
	}, slices.DeleteFunc(fake.Env(), func(kv string) bool { return kv == "AGENT_BOX_LAUNCH=systemd" })...)
	st := s.OK("process_start", map[string]any{"name": "v2", "argv": []string{"sleep", "60"}, "limits": map[string]any{"pids": 50}})
	t.Cleanup(func() { s.Call("process_kill", map[string]any{"name": "v2", "signal": "KILL"}) })
	calls := fake.Calls(t)
	require.Len(t, calls, 1, "a scope even where setsid is the launch: %s", st.Text)
	require.Empty(t, calls[0].Refused)
	assert.Contains(t, calls[0].Argv, "--property=Delegate=yes")

	s.OK("process_start", map[string]any{"name": "free", "argv": []string{"true"}})
	assert.Len(t, fake.Calls(t), 1, "a run without limits starts as the launch says")
}

// Default limits that do not parse stop the server at once, saying why.
func TestLimitDefaultsThatDoNotParse(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binary, "--state-dir", t.TempDir())
	cmd.Env = append(os.Environ(), "AGENT_BOX_DEFAULT_LIMITS=memory=512")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	assert.Equal(t, 1, exit.ExitCode())
	assert.Contains(t, string(out), `agent-box: AGENT_BOX_DEFAULT_LIMITS: invalid argument: limits "memory=512": unknown key "memory"`)

	cmd = exec.Command(binary, "--default-limits", "pids=0x10", "--state-dir", t.TempDir())
	out, _ = cmd.CombinedOutput()
	assert.Contains(t, string(out), `agent-box: --default-limits: invalid argument: limits "pids=0x10": "pids=0x10" is not key=number`)
}

// What a run's limits say is checked against the kernel before it is
// shown (issue 30): a leader moved out of its group (any process that can
// write another group's cgroup.procs can do that), and a record edited to
// claim limits the run never had, are said, not listed as capped.
func TestLimitsThatDoNotHoldAreSaid(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	s := connect(t, state)
	st := s.OK("process_start", map[string]any{"name": "moved", "argv": []string{"sleep", "60"}, "limits": map[string]any{"pids": 10}})
	pid := int(abtest.Num(st.Run()["pid"]))
	assert.NotContains(t, st.Text, "do not hold", st.Text)
	// Into the group the supervisor is in: out of the run's.
	runID := abtest.Str(st.Run()["run_id"])
	rec, err := os.ReadFile(filepath.Join(state, "runs", "moved", runID, "record.json"))
	require.NoError(t, err)
	var r struct {
		SupervisorPID int `json:"supervisor_pid"`
	}
	require.NoError(t, json.Unmarshal(rec, &r))
	h, err := cgroup.Of(strconv.Itoa(r.SupervisorPID))
	require.NoError(t, err)
	for c, dir := range h.Dirs {
		if c == "pids" || c == "" {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0))
		}
	}
	l := s.OK("process_list", nil)
	assert.Contains(t, l.Text, "pid "+strconv.Itoa(pid)+" is not in the run's cgroup: its limits (pids=10) do not hold for it", l.Text)

	// A record of an uncapped run, edited to claim a cap.
	st = s.OK("process_start", map[string]any{"name": "claims", "argv": []string{"sleep", "60"}})
	runID = abtest.Str(st.Run()["run_id"])
	path := filepath.Join(state, "runs", "claims", runID, "record.json")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(data, &m))
	m["limits"] = map[string]any{"memory_mb": 64}
	data, err = json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o600))
	l = s.OK("process_list", map[string]any{"name": "claims"})
	assert.Contains(t, l.Text, "the run has no cgroup of its own: its limits (memory_mb=64) do not hold", l.Text)
}
