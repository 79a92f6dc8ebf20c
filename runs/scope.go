package runs

import (
	"os"
	"path/filepath"

	"github.com/agent-box/agent-box/live"
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

// ChooseLaunch decides how to start supervisors (pure). mode is the
// operator's choice from AGENT_BOX_LAUNCH: "auto" (or ""), "setsid" or
// "systemd". The reason is logged once, at the first start, so that an operator
// can see why runs might die with the session.
func ChooseLaunch(mode string, f live.HostFacts) (launch, reason string) {
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
func EndsWithSession(launch string, f live.HostFacts) bool {
	return launch == LaunchSetsid && f.SystemdBooted && f.InSessionScope && f.KillUserProcesses
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
