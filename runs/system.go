package runs

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/live"
	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/supervisor"
)

// System is the live system as the rules see it: the facts that hold while
// agent-box runs (live.Host), the processes they decide about (Procs), and
// the one thing done to them (Signal). live gathers the facts; tests give
// a fake Procs (fakeProcs) and a Signal that records.
type System struct {
	live.Host
	Procs Procs
	// Signal is kill(2): every signal agent-box sends to a run goes
	// through it, so that tests can see what would have been signalled.
	Signal func(pid int, sig unix.Signal) error
}

// Procs is the processes as the outcome matrix, kills and usage read them.
// live.Procs reads /proc.
type Procs interface {
	// Probe says whether pid is the process that started at start, and
	// when it is (Same), its stat, read in the same read.
	Probe(pid int, start uint64) (outcome.Liveness, proc.Stat)
	// Processes lists live processes (no zombies); used to find the
	// survivors of a run whose leader has exited.
	Processes() ([]proc.Stat, error)
	// GroupAlive reports whether process group pgid may have a member
	// (kill(-pgid, 0) did not say ESRCH); a cheap test before a scan.
	GroupAlive(pgid int) bool
	// Children lists pid's children; a cheap test before a scan.
	Children(pid int) ([]int, error)
	// SupervisorOf says what the process p, which Probe found to be the
	// recorded supervisor by its start time (p is the stat it read), is
	// now: Same when it says it supervises run name/runID
	// (supervisor.IsSupervisorOf), Gone when it has exited since, Foreign
	// when it is alive and says otherwise.
	SupervisorOf(p proc.Stat, name, runID string) outcome.Liveness
	// EnvironHas reports whether pid's environment from its exec holds
	// every one of kvs ("KEY=value"); false when it cannot be read.
	EnvironHas(pid int, kvs ...string) bool
	// IsSupervisor reports whether p is a genuine supervisor of some run
	// (supervisor.Executables.IsSupervisor): a run started from inside
	// another, whose processes the outer run's kill leaves alone.
	IsSupervisor(p proc.Stat) bool
	// Usage is what pid uses now, if it is the process that started at
	// start (proc.ReadUsage); an error when it is gone or another.
	Usage(pid int, start uint64) (proc.Usage, error)
}

var _ Procs = live.Procs{}

// NewLiveSystem reads the boot id and this process's ids; supervisors are
// the executables a supervisor of this installation runs.
func NewLiveSystem(supervisors *supervisor.Executables) (System, error) {
	h, err := live.ReadHost()
	if err != nil {
		return System{}, err
	}
	return System{Host: h, Procs: live.Procs{Supervisors: supervisors}, Signal: unix.Kill}, nil
}

// carriesRunID reports whether pid's environment from its exec names run
// name/runID (NameEnv, RunIDEnv): what ties a process to a run when no
// live supervisor vouches for it (outcome.Facts.ChildTagged). A run cannot
// set either itself (start.go).
func (s System) carriesRunID(pid int, name, runID string) bool {
	return s.Procs.EnvironHas(pid, RunIDEnv+"="+runID, NameEnv+"="+name)
}

// signal sends sig to pid (a negative pid: its group) through Signal. A
// System made without one (a test's) signals nothing, rather than kill(2)
// the pids a fake made up.
func (s System) signal(pid int, sig unix.Signal) error {
	if s.Signal == nil {
		return fmt.Errorf("signal %d to %d: this System has no Signal", sig, pid)
	}
	return s.Signal(pid, sig)
}
