package runs

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/supervisor"
)

// LiveSystem is System on the real /proc.
type LiveSystem struct {
	Boot string       // read once at start-up: it cannot change while we run
	Me   outcome.Self // this process, read once: its pid, group and session do not change while we run
	// Supervisors are the files genuine supervisors run (the
	// installation's agent-box and agent-box-supervisor).
	Supervisors *supervisor.Executables
}

// NewLiveSystem reads the boot id and this process's ids; supervisors are
// the executables a supervisor of this installation runs.
func NewLiveSystem(supervisors *supervisor.Executables) (*LiveSystem, error) {
	b, err := proc.BootID()
	if err != nil {
		return nil, err
	}
	pgid, err := unix.Getpgid(0)
	if err != nil {
		return nil, fmt.Errorf("reading own process group: %w", err)
	}
	sid, err := unix.Getsid(0)
	if err != nil {
		return nil, fmt.Errorf("reading own session: %w", err)
	}
	return &LiveSystem{Boot: b, Me: outcome.Self{PID: os.Getpid(), PGID: pgid, SID: sid}, Supervisors: supervisors}, nil
}

func (s *LiveSystem) BootID() string { return s.Boot }

func (s *LiveSystem) Self() outcome.Self { return s.Me }

func (s *LiveSystem) Probe(pid int, start uint64) (outcome.Liveness, proc.Stat) {
	return proc.ProbeStat(pid, start)
}

func (s *LiveSystem) CarriesRunID(pid int, name, runID string) bool {
	ok, err := proc.EnvironHas(pid, RunIDEnv+"="+runID, NameEnv+"="+name)
	return err == nil && ok
}

func (s *LiveSystem) IsSupervisor(p proc.Stat) bool { return s.Supervisors.IsSupervisor(p) }

func (s *LiveSystem) Signal(pid int, sig unix.Signal) error { return unix.Kill(pid, sig) }

func (s *LiveSystem) Processes() ([]proc.Stat, error) { return proc.Processes() }

func (s *LiveSystem) Usage(pid int, start uint64) (proc.Usage, error) {
	return proc.ReadUsage(pid, start)
}

func (s *LiveSystem) Children(pid int) ([]int, error) { return proc.Children(pid) }

func (s *LiveSystem) GroupAlive(pgid int) bool {
	return pgid > 0 && !errors.Is(unix.Kill(-pgid, 0), unix.ESRCH)
}

func (s *LiveSystem) SupervisorOf(p proc.Stat, name, runID string) outcome.Liveness {
	argv, err := proc.Cmdline(p.PID)
	if err != nil || len(argv) == 0 {
		return outcome.Gone // exited since p was read: a zombie has no command line
	}
	if supervisor.IsSupervisorOf(p, argv, name, runID) {
		return outcome.Same
	}
	return outcome.Foreign
}

var _ System = (*LiveSystem)(nil)
