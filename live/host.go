package live

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"time"
)

// HostFacts are what the launch decision (runs.ChooseLaunch) needs to
// know about the machine.
type HostFacts struct {
	SystemdBooted     bool // /run/systemd/system exists (sd_booted(3))
	InSessionScope    bool // our cgroup is a logind session-N.scope
	KillUserProcesses bool // logind will kill the session's processes at its end
	SystemdRun        bool // systemd-run is on PATH
	Root              bool // euid 0: a system scope; else a --user scope
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
