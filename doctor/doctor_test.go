//go:build linux

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

	"github.com/agent-box/agent-box/cgroup"
	"github.com/agent-box/agent-box/live"
)

// healthy is a box on which every check passes.
func healthy() Facts {
	b := Build{Version: "v1", Go: "go1.26"}
	return Facts{
		Exe: "/home/u/.local/bin/agent-box", Self: b,
		SupervisorPath: "/home/u/.local/bin/agent-box-supervisor", Supervisor: b,
		StateDir: "/home/u/.local/state/agent-box", StateExists: true, StateMode: fs.ModeDir | 0o700, StateFree: 10 << 30,
		Host:     live.HostFacts{SystemdBooted: true, InSessionScope: true, KillUserProcesses: false, SystemdRun: true},
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
		{"supervisor of another Go", "binaries", func(f *Facts) { f.Supervisor.Go = "go1.25" }, Warn, "built with go1.25"},
		{"supervisor of another commit", "binaries", func(f *Facts) { f.Self.Revision, f.Supervisor.Revision = "a", "b" }, Fail, "built apart"},
		{"modified tree", "binaries", func(f *Facts) { f.Self.Modified, f.Supervisor.Modified = true, true }, OK, "uncommitted changes"},
		{"unreadable supervisor", "binaries", func(f *Facts) { f.SupervisorErr = errors.New("not a Go binary") }, Fail, "not a Go binary"},
		{"unstamped", "binaries", func(f *Facts) { f.Self.Version, f.Supervisor.Version = "dev", "dev" }, OK, "cannot tell"},
		{"go install of a release", "binaries", func(f *Facts) {
			f.Self.Version, f.Supervisor.Version, f.Self.Module, f.Supervisor.Module = "dev", "dev", "v1.2.0", "v1.2.0"
		}, OK, "the same build"},

		{"healthy", "state dir", func(*Facts) {}, OK, "persistent"},
		{"tmpfs", "state dir", func(f *Facts) { f.StateFS = "tmpfs" }, Warn, "lost at a reboot"},
		{"open to others", "state dir", func(f *Facts) { f.StateMode = fs.ModeDir | 0o755 }, Warn, "mode 0755"},
		{"not made yet", "state dir", func(f *Facts) { f.StateExists = false }, OK, "made at the first start"},
		{"not writable", "state dir", func(f *Facts) { f.StateWriteErr = fs.ErrPermission }, Fail, "not writable"},
		{"another user's", "state dir", func(f *Facts) { f.StateRefused = errors.New("owned by uid 1234") }, Fail, "agent-box refuses it: owned by uid 1234"},
		{"no home", "state dir", func(f *Facts) { f.StateDirErr = errors.New("no state directory") }, Fail, "no state directory"},

		{"roomy", "disk space", func(*Facts) {}, OK, "10.0 GiB free"},
		{"nearly full", "disk space", func(f *Facts) { f.StateFree = 10 << 20 }, Warn, "10 MiB free"},

		{"logind keeps processes", "runs outlive the session", func(*Facts) {}, OK, "setsid"},
		{"no systemd", "runs outlive the session", func(f *Facts) { f.Host = live.HostFacts{} }, OK, "setsid"},
		{"logind kills, root", "runs outlive the session", func(f *Facts) { f.Host.KillUserProcesses, f.Host.Root = true, true }, OK, "own systemd scope"},
		{"logind kills, user lingers", "runs outlive the session", func(f *Facts) { f.Host.KillUserProcesses, f.Linger = true, yes() }, OK, "user scope"},
		{"logind kills, no lingering", "runs outlive the session", func(f *Facts) { f.Host.KillUserProcesses, f.Linger = true, no() }, Fail, "loginctl enable-linger u"},
		{"logind kills, lingering unknown", "runs outlive the session", func(f *Facts) { f.Host.KillUserProcesses = true }, Warn, "could not be read"},
		{"logind kills, lingering and user unknown", "runs outlive the session", func(f *Facts) { f.Host.KillUserProcesses, f.User = true, "" }, Warn, "loginctl enable-linger (if"},
		{"logind kills, forced setsid", "runs outlive the session", func(f *Facts) { f.Host.KillUserProcesses, f.Host.Root, f.Launch = true, true, "setsid" }, Fail, "unset AGENT_BOX_LAUNCH"},
		{"forced systemd, none here", "runs outlive the session", func(f *Facts) { f.Host.SystemdRun, f.Launch = false, "systemd" }, Warn, "setsid is enough here"},
		{"logind kills, no systemd-run", "runs outlive the session", func(f *Facts) { f.Host.KillUserProcesses, f.Host.SystemdRun = true, false }, Fail, "die with the SSH session"},

		{"present", "systemd-run", func(*Facts) {}, OK, "on PATH"},
		{"missing, not needed", "systemd-run", func(f *Facts) { f.Host.SystemdRun = false }, OK, "not needed"},
		{"missing, needed", "systemd-run", func(f *Facts) { f.Host.SystemdRun, f.Host.KillUserProcesses = false, true }, Warn, "package systemd"},

		{"v2 delegated", "resource limits", func(*Facts) {}, OK, "cgroup v2: runs can be capped by memory, cpu, pids"},
		{"v1 without pids", "resource limits", func(f *Facts) {
			f.Cgroup = Cgroups{Version: 1, Writable: []string{"memory", "cpu"}, Missing: []string{"pids"}, Why: "the pids cgroup controller is not mounted"}
		}, Warn, "limits of pids are refused"},
		{"v1, no trace", "resource limits", func(f *Facts) {
			f.Cgroup = Cgroups{Version: 1, Writable: limitControllers, Untraced: "fork/exec /usr/bin/agent-box: operation not permitted"}
		}, Warn, "a capped run starts uncapped for a moment here"},
		{"v2, nothing delegated", "resource limits", func(f *Facts) { f.Cgroup = Cgroups{Version: 2, Missing: limitControllers, Why: "not delegated"} }, Warn, "runs with limits are refused"},
		{"none", "resource limits", func(f *Facts) { f.Cgroup = Cgroups{Why: "none mounted"} }, Warn, "no cgroup hierarchy"},

		{"sshd probes", "ssh keep-alive", func(*Facts) {}, OK, "every 15 s"},
		{"sshd does not probe", "ssh keep-alive", func(f *Facts) { f.ClientAlive = 0 }, Warn, "ClientAliveInterval 0"},
		{"not over ssh", "ssh keep-alive", func(f *Facts) { f.UnderSSH, f.ClientAlive = false, -1 }, OK, "ServerAliveInterval 15"},
		{"sshd config unreadable", "ssh keep-alive", func(f *Facts) { f.ClientAlive = -1 }, OK, "could not be read"},
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
			if tc.want == Fail {
				assert.True(t, Failed(Checks(f)), "a fail fails the whole")
			}
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

// cgroupFacts asks what process_start asks (runs.Enforceable), per
// controller; a refusal keeps its reason for the Fix.
func TestCgroupFacts(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "cgroup.controllers"), "cpuset cpu io memory pids\n")
	write(t, filepath.Join(root, "user.slice/user-1000.slice/user@1000.service/cgroup.controllers"), "memory pids\n")
	v2 := &cgroup.Hierarchy{V2: true, Root: root, Dirs: map[string]string{"": filepath.Join(root, "user.slice")}}
	systemd := func() error { return nil }
	c := cgroupFacts(v2, nil, systemd, 1000)
	assert.Equal(t, 2, c.Version)
	assert.Equal(t, []string{"memory", "pids"}, c.Writable)
	assert.Equal(t, []string{"cpu"}, c.Missing)
	assert.Contains(t, c.Why, "not given the cpu controller")
	c = cgroupFacts(v2, nil, func() error { return errors.New("systemd is not running here") }, 0)
	assert.Equal(t, limitControllers, c.Missing)
	assert.Contains(t, c.Why, "systemd is not running here")

	c = cgroupFacts(&cgroup.Hierarchy{Dirs: map[string]string{"memory": t.TempDir(), "pids": t.TempDir()}}, nil, systemd, 0)
	assert.Equal(t, 1, c.Version)
	assert.Equal(t, []string{"memory", "pids"}, c.Writable)
	assert.Equal(t, []string{"cpu"}, c.Missing)

	c = cgroupFacts(nil, cgroup.ErrUnavailable, systemd, 0)
	assert.Equal(t, 0, c.Version)
	assert.Equal(t, cgroup.ErrUnavailable.Error(), c.Why)
}

func TestClientAliveInterval(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "sshd_config")
	assert.Equal(t, -1, clientAliveInterval(cfg), "no config")
	write(t, cfg, "#ClientAliveInterval 0\nPort 22\n")
	assert.Equal(t, 0, clientAliveInterval(cfg), "only commented out")
	write(t, cfg, "Port 22\nclientaliveinterval 30\n")
	assert.Equal(t, 30, clientAliveInterval(cfg))
	write(t, cfg, "ClientAliveInterval=45\n")
	assert.Equal(t, 45, clientAliveInterval(cfg), "sshd takes Keyword=value too")
	write(t, cfg, "ClientAliveInterval 1m30s\n")
	assert.Equal(t, 90, clientAliveInterval(cfg), "sshd's time format")
	write(t, cfg, "ClientAliveInterval soon\n")
	assert.Equal(t, -1, clientAliveInterval(cfg))
	write(t, cfg, "Match User other\n\tClientAliveInterval 30\n")
	assert.Equal(t, 0, clientAliveInterval(cfg), "a Match block's value is not global")
	// An Include is read where it stands, and sshd keeps the first value
	// it reads (Debian includes sshd_config.d/*.conf at the top).
	write(t, filepath.Join(dir, "sshd_config.d", "10-keepalive.conf"), "ClientAliveInterval 15\n")
	assert.Equal(t, 0, clientAliveInterval(cfg), "not included: not read")
	write(t, cfg, "Include sshd_config.d/*.conf\nClientAliveInterval 60\n")
	assert.Equal(t, 15, clientAliveInterval(cfg))
	write(t, cfg, "ClientAliveInterval 60\nInclude sshd_config.d/*.conf\n")
	assert.Equal(t, 60, clientAliveInterval(cfg))
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
	assert.ErrorContains(t, f.StateRefused, "not a directory")
	link := filepath.Join(t.TempDir(), "link")
	require.NoError(t, os.Symlink(t.TempDir(), link))
	f = Facts{StateDir: link}
	gatherStateDir(&f)
	assert.ErrorContains(t, f.StateRefused, "symlink")

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
