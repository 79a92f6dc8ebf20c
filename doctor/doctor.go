//go:build linux

package doctor

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/agent-box/agent-box/live"
	"github.com/agent-box/agent-box/runs"
)

// Level is a check's verdict. Only a fail makes doctor exit non-zero.
type Level string

const (
	OK   Level = "ok"
	Warn Level = "warn" // works, but not as well as it could, or advice
	Fail Level = "fail" // a promise agent-box makes will not hold here
)

// Check is one line of doctor's answer.
type Check struct {
	Name   string `json:"name"`
	Level  Level  `json:"level"`
	Detail string `json:"detail"`        // what was found
	Fix    string `json:"fix,omitempty"` // what to do about a warn or fail
}

// Facts are what the checks read from the machine.
type Facts struct {
	Exe  string // this agent-box
	Self Build
	// SupervisorPath is the lean supervisor beside Exe, "" when there is
	// none; SupervisorErr says why its build could not be read.
	SupervisorPath string
	Supervisor     Build
	SupervisorErr  error

	StateDir    string
	StateDirErr error // the default could not be found (no HOME)
	StateExists bool  // false: made at the first use
	// StateRefused is why agent-box would refuse the existing dir (a
	// symlink, not a directory, another user's: runrecord.InspectDir).
	StateRefused  error
	StateMode     fs.FileMode // when it exists
	StateFS       string      // "tmpfs", "ramfs", or "" for a disk
	StateWriteErr error       // creating a file in it (or in the parent it would be made in)
	StateFree     int64       // bytes free to us on its file system, -1 unknown

	Host live.HostFacts
	// Launch is the operator's AGENT_BOX_LAUNCH.
	Launch string
	// User and Linger: the account, and whether logind keeps its user
	// manager after its last session (nil: unknown).
	User   string
	Linger *bool

	Cgroup Cgroups

	// UnderSSH: this agent-box runs in an SSH session (SSH_CONNECTION).
	// ClientAlive is sshd's ClientAliveInterval in seconds, -1 unknown.
	UnderSSH    bool
	ClientAlive int
}

// Cgroups says which cgroup hierarchy the box has and which controllers
// this user can make cgroups in.
type Cgroups struct {
	Version  int      // 2, 1, or 0 for none
	Where    string   // v2: the group runs' groups are made under
	Writable []string // controllers a run's limits can use here
	Missing  []string // of memory, cpu, pids: those a limit of is refused
	Why      string   // the first refusal: why, and what would enable it
	// Untraced (v1): why a child cannot be started stopped at its exec
	// here (cgroup.Traceable), so that a capped run is uncapped for a
	// moment at its start; "" when it can.
	Untraced string
}

// minFree is the free space under which the state dir's file system is a
// warning: logs stop when the disk is full.
const minFree = 256 << 20

// Checks decides every check from f, in the order they are shown.
func Checks(f Facts) []Check {
	return []Check{
		binaries(f),
		stateDir(f),
		stateSpace(f),
		session(f),
		systemdRun(f),
		limits(f),
		keepAlive(f),
	}
}

// Failed reports whether any check failed.
func Failed(cs []Check) bool {
	for _, c := range cs {
		if c.Level == Fail {
			return true
		}
	}
	return false
}

func binaries(f Facts) Check {
	c := Check{Name: "binaries"}
	self := fmt.Sprintf("agent-box %s (%s, %s)", f.Self.Version, f.Exe, f.Self.Go)
	switch {
	case f.SupervisorPath == "":
		c.Level, c.Detail = Warn, self+"; no "+runs.SupervisorBinary+" beside it: runs start as \"agent-box supervise\", slower and larger"
		c.Fix = "install both: make install (or go install ./cmd/agent-box ./cmd/agent-box-supervisor)"
	case f.SupervisorErr != nil:
		c.Level, c.Detail = Fail, fmt.Sprintf("%s; %s cannot be read: %v", self, f.SupervisorPath, f.SupervisorErr)
		c.Fix = "reinstall both from one checkout: make install"
	case !f.Self.SameSource(f.Supervisor):
		c.Level = Fail
		c.Detail = fmt.Sprintf("%s, but %s is %s: they were built apart, and the supervisor a run starts may not speak this agent-box's launch protocol", self, f.SupervisorPath, f.Supervisor)
		c.Fix = "reinstall both from one checkout: make install"
	case f.Self.Go != f.Supervisor.Go:
		c.Level = Warn
		c.Detail = fmt.Sprintf("%s; %s is of the same source but built with %s", self, f.SupervisorPath, f.Supervisor.Go)
		c.Fix = "reinstall both with one toolchain: make install"
	case f.Self.Version == "dev" && f.Self.Revision == "" && f.Self.Module == "":
		c.Level, c.Detail = OK, self+"; "+runs.SupervisorBinary+" beside it; neither carries a version stamp, module version or commit (go install from a checkout, or -trimpath), so doctor cannot tell whether they are one build"
	case f.Self.Modified:
		c.Level, c.Detail = OK, self+"; "+runs.SupervisorBinary+" beside it, of the same commit with uncommitted changes (which doctor cannot compare)"
	default:
		c.Level, c.Detail = OK, self+"; "+runs.SupervisorBinary+" beside it, the same build"
	}
	return c
}

func stateDir(f Facts) Check {
	c := Check{Name: "state dir", Level: OK}
	switch {
	case f.StateDirErr != nil:
		c.Level, c.Detail = Fail, f.StateDirErr.Error()
		c.Fix = "pass --state-dir DIR, or set AGENT_BOX_STATE_DIR"
		return c
	case f.StateRefused != nil:
		c.Level, c.Detail = Fail, "agent-box refuses it: "+f.StateRefused.Error()
		c.Fix = "pass --state-dir DIR naming a directory of this user's (agent-box makes it if it does not exist)"
		return c
	case f.StateWriteErr != nil:
		c.Level, c.Detail = Fail, fmt.Sprintf("%s is not writable: %v", f.StateDir, f.StateWriteErr)
		c.Fix = "make it writable by this user, or pass --state-dir DIR"
		return c
	}
	var notes []string
	if f.StateExists {
		notes = append(notes, f.StateDir)
	} else {
		notes = append(notes, f.StateDir+" (made at the first start)")
	}
	if f.StateExists && f.StateMode.Perm()&0o077 != 0 {
		c.Level = Warn
		notes = append(notes, fmt.Sprintf("mode %04o: others can read the logs and records", f.StateMode.Perm()))
		c.Fix = "chmod 700 " + f.StateDir + " (agent-box also tightens it when it opens it)"
	} else {
		notes = append(notes, "private (0700)")
	}
	if f.StateFS != "" {
		c.Level = Warn
		notes = append(notes, "on "+f.StateFS+": every run, record and log is lost at a reboot")
		c.Fix = "keep state on a disk: --state-dir DIR or AGENT_BOX_STATE_DIR"
	} else {
		notes = append(notes, "persistent")
	}
	c.Detail = strings.Join(notes, ", ")
	return c
}

func stateSpace(f Facts) Check {
	c := Check{Name: "disk space", Level: OK}
	switch {
	case f.StateFree < 0:
		c.Detail = "unknown"
	case f.StateFree < minFree:
		c.Level = Warn
		c.Detail = fmt.Sprintf("%s free where the logs go: a full disk stops every run's log (the runs go on)", sizeWords(f.StateFree))
		c.Fix = "free space there, or pass --state-dir on a roomier file system"
	default:
		c.Detail = sizeWords(f.StateFree) + " free where the logs go"
	}
	return c
}

// session: will a run outlive the SSH session that started it?
func session(f Facts) Check {
	c := Check{Name: "runs outlive the session", Level: OK}
	launch, reason := runs.ChooseLaunch(f.Launch, f.Host)
	c.Detail = "supervisors start with " + launch + ": " + reason
	linger := "loginctl enable-linger " + f.User
	switch {
	case runs.EndsWithSession(launch, f.Host) && f.Launch == runs.LaunchSetsid:
		c.Level = Fail
		c.Fix = "unset AGENT_BOX_LAUNCH (it says setsid): logind kills the session's processes, and only a systemd scope survives that"
	case runs.EndsWithSession(launch, f.Host):
		c.Level = Fail
		c.Fix = "install systemd-run (package systemd), or set KillUserProcesses=no in /etc/systemd/logind.conf"
	case launch == runs.LaunchSystemd && !f.Host.Root && f.Linger == nil:
		// A --user scope belongs to the user's manager, which logind
		// stops with the last session unless the user lingers.
		c.Level = Warn
		c.Detail += "; whether the user manager outlives the last session (lingering) could not be read"
		c.Fix = strings.TrimSpace(linger) + " (if loginctl show-user says Linger=no)"
	case launch == runs.LaunchSystemd && !f.Host.Root && !*f.Linger:
		c.Level = Fail
		c.Detail += "; lingering is off for " + f.User + ", so the user manager, and its scopes, end with the last session"
		c.Fix = strings.TrimSpace(linger)
	case f.Launch == runs.LaunchSystemd && launch != runs.LaunchSystemd:
		c.Level = Warn
		c.Fix = "unset AGENT_BOX_LAUNCH: setsid is enough here"
	}
	return c
}

// systemdRun says whether the launch that keeps runs past logind can be
// made; whether it is needed, and the fail when it is, are session's.
func systemdRun(f Facts) Check {
	c := Check{Name: "systemd-run", Level: OK}
	launch, _ := runs.ChooseLaunch(f.Launch, f.Host)
	switch {
	case f.Host.SystemdRun && f.Host.SystemdBooted:
		c.Detail = "on PATH; used when logind would kill a session's processes"
	case f.Host.SystemdRun:
		c.Detail = "on PATH, but systemd is not running here: not needed"
	case runs.EndsWithSession(launch, f.Host):
		c.Level, c.Detail = Warn, "not on PATH, and needed here (see runs outlive the session)"
		c.Fix = "install systemd's systemd-run (package systemd)"
	default:
		c.Detail = "not on PATH; not needed here (no logind that kills sessions)"
	}
	return c
}

// limits reports which of process_start's limits this box enforces: a
// limit it cannot enforce is refused, so a missing controller is a
// warning with the refusal's reason, not a failure (runs without limits
// work).
func limits(f Facts) Check {
	c := Check{Name: "resource limits", Level: OK}
	switch {
	case f.Cgroup.Version == 0:
		c.Level, c.Detail = Warn, "no cgroup hierarchy: runs with limits are refused"
	case len(f.Cgroup.Writable) == 0:
		c.Level, c.Detail = Warn, fmt.Sprintf("cgroup v%d, but runs with limits are refused (%s)", f.Cgroup.Version, strings.Join(f.Cgroup.Missing, ", "))
	default:
		c.Detail = fmt.Sprintf("cgroup v%d: runs can be capped by %s", f.Cgroup.Version, strings.Join(f.Cgroup.Writable, ", "))
		if f.Cgroup.Where != "" {
			c.Detail += " under " + f.Cgroup.Where
		}
		if len(f.Cgroup.Missing) > 0 {
			c.Level = Warn
			c.Detail += "; limits of " + strings.Join(f.Cgroup.Missing, ", ") + " are refused"
		}
		if f.Cgroup.Untraced != "" {
			c.Level = Warn
			c.Detail += "; a capped run starts uncapped for a moment here, as the kernel refuses to stop it at its exec until its caps are written (" + f.Cgroup.Untraced + ")"
		}
	}
	if c.Level == Warn {
		c.Fix = f.Cgroup.Why
	}
	if f.Cgroup.Untraced != "" && len(f.Cgroup.Writable) > 0 {
		c.Fix = strings.TrimPrefix(c.Fix+"; allow a process to trace its own children (sysctl kernel.yama.ptrace_scope=1, a seccomp profile that permits ptrace), or move to cgroup v2, where a run is born in its capped group", "; ")
	}
	return c
}

func keepAlive(f Facts) Check {
	c := Check{Name: "ssh keep-alive", Level: OK}
	advice := "set ServerAliveInterval 15 for this host in the client's ~/.ssh/config (or ssh -o ServerAliveInterval=15), so a dead link ends the session in under a minute; runs survive it either way"
	switch {
	case f.ClientAlive > 0:
		c.Detail = fmt.Sprintf("sshd probes idle clients every %d s", f.ClientAlive)
	case !f.UnderSSH:
		c.Detail = "not run over ssh here; " + advice
	case f.ClientAlive < 0:
		c.Detail = "sshd's ClientAliveInterval could not be read (sshd -T as root shows it); " + advice
	default:
		c.Level = Warn
		c.Detail = "sshd does not probe idle clients (ClientAliveInterval 0): a dropped link leaves the session until TCP gives up"
		c.Fix = advice
	}
	return c
}

func sizeWords(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

// supervisorBeside is where the lean supervisor of exe would be.
func supervisorBeside(exe string) string {
	return filepath.Join(filepath.Dir(exe), runs.SupervisorBinary)
}
