package supervisor

import (
	"errors"
	"io/fs"
	"path/filepath"

	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
)

// BinaryName is the name of the lean supervisor executable.
const BinaryName = "agent-box-supervisor"

// Executables are the programs a genuine supervisor runs: the lean
// agent-box-supervisor and agent-box itself ("agent-box supervise"), known
// by file identity, not by name.
//
// A run may start other runs (an agent's script calling agent-box start):
// their supervisors end up below the run's own supervisor, its subreaper,
// yet each is a run of its own, with its own record, which a kill or a
// timeout of the outer run must not touch. A command line can say
// anything, though: a run's own descendant started as
// "setsid perl -e 'sleep 178' x <run id>" looks like a supervisor by its
// arguments and would hide from the outer run's kills with everything
// below it. The file a process runs is a fact it cannot fake without
// running that very file, and then it is a supervisor.
type Executables struct {
	files []exeFile
}

type exeFile struct {
	path string // as given, made absolute and free of symlinks
	file proc.File
}

// NewExecutables knows the files at paths (missing ones are left out).
func NewExecutables(paths ...string) *Executables {
	e := &Executables{}
	for _, p := range paths {
		if abs, err := filepath.EvalSymlinks(p); err == nil {
			p = abs
		}
		if f, err := proc.FileOf(p); err == nil {
			e.files = append(e.files, exeFile{path: p, file: f})
		}
	}
	return e
}

// InstalledWith returns the Executables of the installation whose agent-box
// or agent-box-supervisor binary is exe: both, beside each other, as make
// install puts them, plus any further files (a test's stand-in).
func InstalledWith(exe string, more ...string) *Executables {
	dir := filepath.Dir(exe)
	return NewExecutables(append([]string{exe, filepath.Join(dir, BinaryName), filepath.Join(dir, "agent-box")}, more...)...)
}

// runs reports whether pid runs one of the files. A supervisor started
// before an upgrade replaced its binary runs a file that is gone; the
// kernel still names the path it was started from, which only whoever can
// write the installation can have put there.
func (e *Executables) runs(pid int) bool {
	if e == nil {
		return false
	}
	f, path, deleted, err := proc.Exe(pid)
	if errors.Is(err, fs.ErrPermission) {
		// A supervisor is non-dumpable (package nodump): to any process
		// of its user without CAP_SYS_PTRACE its /proc/PID/exe is closed.
		// Its command line, already checked, is then the fact left. A
		// run's own process that makes itself non-dumpable and takes a
		// supervisor's command line hides from its run's kill this way;
		// it escapes no more than one started by systemd-run --user or
		// over ssh (limits.md), and root, which reads the file, is not
		// fooled.
		return true
	}
	if err != nil {
		return false
	}
	for _, k := range e.files {
		if f == k.file || deleted && path == k.path {
			return true
		}
	}
	return false
}

// IsSupervisor reports whether p is the supervisor of some run: a session
// leader (every supervisor has a session of its own) running one of the
// known executables with a supervisor's command line,
// "agent-box-supervisor NAME RUN_ID" or "agent-box supervise NAME RUN_ID".
// A nil e knows no supervisor.
func (e *Executables) IsSupervisor(p proc.Stat) bool {
	if p.SID != p.PID {
		return false
	}
	argv, err := proc.Cmdline(p.PID)
	if err != nil {
		return false
	}
	if _, _, ok := supervisorArgs(argv); !ok {
		return false
	}
	return e.runs(p.PID)
}

// IsSupervisorOf reports whether p, running argv, is the supervisor of the
// run name/runID.
//
// A record's supervisor pid and start time say which process it was, but
// a record can be planted or copied: a live supervisor vouches for every
// descendant as the run's (process_kill signals them), so before it does,
// the process must also say it supervises this very run.
func IsSupervisorOf(p proc.Stat, argv []string, name, runID string) bool {
	n, id, ok := supervisorArgs(argv)
	return p.SID == p.PID && ok && n == name && id == runID
}

// supervisorArgs parses a supervisor's command line. Launch ends
// every supervisor command ("agent-box-supervisor", "agent-box supervise",
// or a test's stand-in) with the run's name and run id; a run id has a
// shape no ordinary argument has by chance.
func supervisorArgs(argv []string) (name, runID string, ok bool) {
	n := len(argv)
	if n < 3 {
		return "", "", false
	}
	name, runID = argv[n-2], argv[n-1]
	if runrecord.ValidName(name) != nil || runrecord.ValidRunID(runID) != nil {
		return "", "", false
	}
	return name, runID, true
}
