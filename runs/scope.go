package runs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/agent-box/agent-box/supervisor"
)

// Launch modes for the supervisor. setsid alone survives the SSH session's
// SIGHUP, but not systemd-logind with KillUserProcesses=yes, which kills
// every process of the session's cgroup scope when the session ends. There
// the supervisor is started in a transient scope of its own through
// systemd-run, outside the session's cgroup.
const (
	LaunchSetsid  = "setsid"  // new session only (containers, dropbear, no systemd)
	LaunchSystemd = "systemd" // systemd-run --scope, then setsid
)

// HostFacts are what the launch decision needs to know about the machine.
type HostFacts struct {
	SystemdBooted     bool // /run/systemd/system exists (sd_booted(3))
	InSessionScope    bool // our cgroup is a logind session-N.scope
	KillUserProcesses bool // logind will kill the session's processes at its end
	SystemdRun        bool // systemd-run is on PATH
	Root              bool // euid 0: a system scope; else a --user scope
}

// ChooseLaunch decides how to start supervisors (pure). mode is the
// operator's choice from AGENT_BOX_LAUNCH: "auto" (or ""), "setsid" or
// "systemd". The reason is logged once, at the first start, so that an operator
// can see why runs might die with the session.
func ChooseLaunch(mode string, f HostFacts) (launch, reason string) {
	switch mode {
	case LaunchSetsid:
		return LaunchSetsid, "AGENT_BOX_LAUNCH=setsid"
	case LaunchSystemd:
		if !f.SystemdRun {
			return LaunchSetsid, "AGENT_BOX_LAUNCH=systemd but systemd-run is not on PATH; using setsid, runs may die with the SSH session"
		}
		return LaunchSystemd, "AGENT_BOX_LAUNCH=systemd"
	}
	switch {
	case !f.SystemdBooted:
		return LaunchSetsid, "no systemd: setsid is enough"
	case !f.InSessionScope:
		return LaunchSetsid, "not in a logind session scope: setsid is enough"
	case !f.KillUserProcesses:
		return LaunchSetsid, "logind does not kill user processes: setsid is enough"
	case !f.SystemdRun:
		return LaunchSetsid, "logind kills this session's processes at its end and systemd-run is missing: runs will die with the SSH session"
	}
	if f.Root {
		return LaunchSystemd, "logind kills this session's processes at its end: supervisors go to their own systemd scope"
	}
	return LaunchSystemd, "logind kills this session's processes at its end: supervisors go to their own user scope (enable lingering with 'loginctl enable-linger' so the user manager outlives the session)"
}

// EndsWithSession reports whether runs whose supervisors start with
// launch die when the SSH session that started them ends: a plain setsid
// where logind kills every process of the session's scope.
func EndsWithSession(launch string, f HostFacts) bool {
	return launch == LaunchSetsid && f.SystemdBooted && f.InSessionScope && f.KillUserProcesses
}

// SystemdScopes says whether systemd-run can start a supervisor in a
// scope of its own here: systemd runs (sd_booted(3)) and systemd-run is
// on PATH.
func SystemdScopes() error {
	if fi, err := os.Stat("/run/systemd/system"); err != nil || !fi.IsDir() {
		return errors.New("systemd is not running here")
	}
	if _, err := exec.LookPath("systemd-run"); err != nil {
		return errors.New("systemd-run is not on PATH (package systemd)")
	}
	return nil
}

// ProbeHost reads HostFacts from the live system.
func ProbeHost() HostFacts {
	var f HostFacts
	if fi, err := os.Stat("/run/systemd/system"); err == nil && fi.IsDir() {
		f.SystemdBooted = true
	}
	f.InSessionScope = inSessionScope()
	_, err := exec.LookPath("systemd-run")
	f.SystemdRun = err == nil
	f.Root = os.Geteuid() == 0
	if f.SystemdBooted && f.InSessionScope {
		f.KillUserProcesses = killUserProcesses()
	}
	return f
}

func inSessionScope() bool {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return false
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "/session-") && strings.Contains(line, ".scope") {
			return true
		}
	}
	return false
}

// killUserProcesses asks logind over D-Bus; if it cannot be asked, assume
// the worst: a needless scope costs little, a killed run costs a lot.
func killUserProcesses() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "busctl", "get-property", "org.freedesktop.login1",
		"/org/freedesktop/login1", "org.freedesktop.login1.Manager", "KillUserProcesses").Output()
	if err != nil {
		return true
	}
	return strings.TrimSpace(string(out)) == "b true"
}

// SupervisorBinary is the name of the lean supervisor executable.
const SupervisorBinary = supervisor.BinaryName

// SupervisorCommand is how agent-box at exe starts supervisors: the lean
// agent-box-supervisor installed beside it when there is one (it starts
// faster and stays smaller, as it does not link the MCP server), else
// "agent-box supervise", which runs the same code.
func SupervisorCommand(exe string) []string {
	lean := filepath.Join(filepath.Dir(exe), SupervisorBinary)
	if fi, err := os.Stat(lean); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return []string{lean}
	}
	return []string{exe, "supervise"}
}
