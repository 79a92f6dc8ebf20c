package doctor

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/runs"
)

// healthy is a box on which every check passes.
func healthy() Facts {
	b := Build{Version: "v1", Go: "go1.26"}
	return Facts{
		Exe: "/home/u/.local/bin/agent-box", Self: b,
		SupervisorPath: "/home/u/.local/bin/agent-box-supervisor", Supervisor: b,
		StateDir: "/home/u/.local/state/agent-box", StateExists: true, StateMode: fs.ModeDir | 0o700, StateFree: 10 << 30,
		Host:     runs.HostFacts{SystemdBooted: true, InSessionScope: true, KillUserProcesses: false, SystemdRun: true},
		User:     "u",
		Cgroup:   Cgroups{Version: 2, Writable: []string{"memory", "cpu", "pids"}},
		UnderSSH: true, ClientAlive: 15,
	}
}

func byName(cs []Check, name string) Check {
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	return Check{}
}

func yes() *bool { b := true; return &b }
func no() *bool  { b := false; return &b }

// TestChecks: each check's verdict for the facts that decide it; every
// warn and fail says what to do.
func TestChecks(t *testing.T) {
	cases := []struct {
		name  string
		check string
		edit  func(*Facts)
		want  Level
		say   string
	}{
		{"healthy", "binaries", func(*Facts) {}, OK, "the same build"},
		{"no lean supervisor", "binaries", func(f *Facts) { f.SupervisorPath = "" }, Warn, "agent-box supervise"},
		{"supervisor of another build", "binaries", func(f *Facts) { f.Supervisor.Version = "v0" }, Fail, "built apart"},
		{"supervisor of another Go", "binaries", func(f *Facts) { f.Supervisor.Go = "go1.25" }, Fail, "built apart"},
		{"unreadable supervisor", "binaries", func(f *Facts) { f.SupervisorErr = errors.New("not a Go binary") }, Fail, "not a Go binary"},
		{"unstamped", "binaries", func(f *Facts) { f.Self.Version, f.Supervisor.Version = "dev", "dev" }, OK, "cannot tell"},

		{"healthy", "state dir", func(*Facts) {}, OK, "persistent"},
		{"tmpfs", "state dir", func(f *Facts) { f.StateFS = "tmpfs" }, Warn, "lost at a reboot"},
		{"open to others", "state dir", func(f *Facts) { f.StateMode = fs.ModeDir | 0o755 }, Warn, "mode 0755"},
		{"not made yet", "state dir", func(f *Facts) { f.StateExists = false }, OK, "made at the first start"},
		{"not writable", "state dir", func(f *Facts) { f.StateWriteErr = fs.ErrPermission }, Fail, "not writable"},
		{"no home", "state dir", func(f *Facts) { f.StateDirErr = errors.New("no state directory") }, Fail, "no state directory"},

		{"roomy", "disk space", func(*Facts) {}, OK, "10.0 GiB free"},
		{"nearly full", "disk space", func(f *Facts) { f.StateFree = 10 << 20 }, Warn, "10 MiB free"},

		{"logind keeps processes", "runs outlive the session", func(*Facts) {}, OK, "setsid"},
		{"no systemd", "runs outlive the session", func(f *Facts) { f.Host = runs.HostFacts{} }, OK, "setsid"},
		{"logind kills, root", "runs outlive the session", func(f *Facts) { f.Host.KillUserProcesses, f.Host.Root = true, true }, OK, "own systemd scope"},
		{"logind kills, user lingers", "runs outlive the session", func(f *Facts) { f.Host.KillUserProcesses, f.Linger = true, yes() }, OK, "user scope"},
		{"logind kills, no lingering", "runs outlive the session", func(f *Facts) { f.Host.KillUserProcesses, f.Linger = true, no() }, Fail, "loginctl enable-linger u"},
		{"logind kills, lingering unknown", "runs outlive the session", func(f *Facts) { f.Host.KillUserProcesses = true }, Warn, "loginctl enable-linger u"},
		{"logind kills, no systemd-run", "runs outlive the session", func(f *Facts) { f.Host.KillUserProcesses, f.Host.SystemdRun = true, false }, Fail, "die with the SSH session"},

		{"present", "systemd-run", func(*Facts) {}, OK, "on PATH"},
		{"missing, not needed", "systemd-run", func(f *Facts) { f.Host.SystemdRun = false }, OK, "not needed"},
		{"missing, needed", "systemd-run", func(f *Facts) { f.Host.SystemdRun, f.Host.KillUserProcesses = false, true }, Fail, "package systemd"},

		{"v2 delegated", "resource limits", func(*Facts) {}, OK, "cgroup v2 with memory, cpu, pids"},
		{"v1 without pids", "resource limits", func(f *Facts) {
			f.Cgroup = Cgroups{Version: 1, Writable: []string{"memory", "cpu"}, Missing: []string{"pids"}}
		}, Warn, "cannot make groups with pids"},
		{"none", "resource limits", func(f *Facts) { f.Cgroup = Cgroups{} }, Warn, "cannot be enforced"},

		{"sshd probes", "ssh keep-alive", func(*Facts) {}, OK, "every 15 s"},
		{"sshd does not probe", "ssh keep-alive", func(f *Facts) { f.ClientAlive = 0 }, Warn, "ClientAliveInterval 0"},
		{"not over ssh", "ssh keep-alive", func(f *Facts) { f.UnderSSH, f.ClientAlive = false, -1 }, OK, "ServerAliveInterval 15"},
	}
	for _, tc := range cases {
		t.Run(tc.check+"/"+tc.name, func(t *testing.T) {
			f := healthy()
			tc.edit(&f)
			c := byName(Checks(f), tc.check)
			require.Equal(t, tc.check, c.Name)
			assert.Equal(t, tc.want, c.Level, "%+v", c)
			assert.Contains(t, c.Detail+" "+c.Fix, tc.say)
			if c.Level != OK {
				assert.NotEmpty(t, c.Fix, "a %s must say what to do", c.Level)
			}
			assert.Equal(t, tc.want == Fail, Failed(Checks(f)))
		})
	}
}

func TestTextAndJSON(t *testing.T) {
	f := healthy()
	f.StateFS = "tmpfs"
	cs := Checks(f)
	var b strings.Builder
	Text(&b, cs)
	assert.Contains(t, b.String(), "warn  state dir: ")
	assert.Contains(t, b.String(), "      fix: keep state on a disk")
	assert.True(t, strings.HasSuffix(b.String(), "0 failed, 1 warnings, 7 checks\n"), b.String())
	b.Reset()
	require.NoError(t, JSON(&b, cs))
	assert.Contains(t, b.String(), `"ok": true`)
}

func write(t *testing.T, path, data string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(data), 0o644))
}

// TestCgroups reads fake hierarchies: a v2 tree with the own group's
// controllers, a v1 tree, and none.
func TestCgroups(t *testing.T) {
	v2 := t.TempDir()
	write(t, filepath.Join(v2, "cgroup.controllers"), "cpuset cpu io memory pids\n")
	write(t, filepath.Join(v2, "user.slice/u.scope/cgroup.controllers"), "memory pids\n")
	self := filepath.Join(t.TempDir(), "cgroup")
	write(t, self, "0::/user.slice/u.scope\n")
	c := cgroups(v2, self)
	assert.Equal(t, 2, c.Version)
	assert.Equal(t, []string{"memory", "pids"}, c.Writable)
	assert.Equal(t, []string{"cpu"}, c.Missing)

	v1 := t.TempDir()
	for _, d := range []string{"memory", "pids", "devices"} {
		require.NoError(t, os.Mkdir(filepath.Join(v1, d), 0o755))
	}
	c = cgroups(v1, self)
	assert.Equal(t, 1, c.Version)
	assert.Equal(t, []string{"memory", "pids"}, c.Writable)
	assert.Equal(t, []string{"cpu"}, c.Missing)

	c = cgroups(t.TempDir(), self)
	assert.Equal(t, Cgroups{}, c)
}

func TestClientAliveInterval(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "sshd_config")
	assert.Equal(t, -1, clientAliveInterval(cfg), "no config")
	write(t, cfg, "#ClientAliveInterval 0\nPort 22\n")
	assert.Equal(t, 0, clientAliveInterval(cfg), "only commented out")
	write(t, cfg, "Port 22\nclientaliveinterval 30\n")
	assert.Equal(t, 30, clientAliveInterval(cfg))
	// Debian's sshd_config includes sshd_config.d/*.conf at its top, and
	// sshd keeps the first value it reads.
	write(t, filepath.Join(dir, "sshd_config.d", "10-keepalive.conf"), "ClientAliveInterval 15\n")
	assert.Equal(t, 15, clientAliveInterval(cfg))
}

// TestGatherStateDir: a state dir on tmpfs is found so; one that cannot
// be written says why; a missing one is looked at where it would be made.
func TestGatherStateDir(t *testing.T) {
	f := Facts{StateDir: filepath.Join(t.TempDir(), "a", "b")}
	gatherStateDir(&f)
	assert.False(t, f.StateExists)
	assert.NoError(t, f.StateWriteErr)
	assert.Greater(t, f.StateFree, int64(0))

	file := filepath.Join(t.TempDir(), "file")
	write(t, file, "x")
	f = Facts{StateDir: file}
	gatherStateDir(&f)
	assert.ErrorContains(t, f.StateWriteErr, "not a directory")

	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		shm, err := os.MkdirTemp("/dev/shm", "doctor-test-")
		require.NoError(t, err)
		defer os.RemoveAll(shm)
		f = Facts{StateDir: shm}
		gatherStateDir(&f)
		assert.Equal(t, "tmpfs", f.StateFS)
		assert.Contains(t, byName(Checks(f), "state dir").Detail, "lost at a reboot")
	}
}
