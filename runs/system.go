package runs

import (
	"errors"

	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/supervisor"
)

// LiveSystem is System on the real /proc.
type LiveSystem struct {
	Boot string // read once at start-up: it cannot change while we run
}

// NewLiveSystem reads the boot id.
func NewLiveSystem() (*LiveSystem, error) {
	b, err := proc.BootID()
	if err != nil {
		return nil, err
	}
	return &LiveSystem{Boot: b}, nil
}

func (s *LiveSystem) BootID() string { return s.Boot }

func (s *LiveSystem) Probe(pid int, start uint64) outcome.Liveness { return proc.Probe(pid, start) }

func (s *LiveSystem) Processes() ([]proc.Stat, error) { return proc.Processes() }

func (s *LiveSystem) Children(pid int) ([]int, error) { return proc.Children(pid) }

func (s *LiveSystem) GroupAlive(pgid int) bool {
	return pgid > 0 && !errors.Is(unix.Kill(-pgid, 0), unix.ESRCH)
}

func (s *LiveSystem) SupervisorOf(pid int, name, runID string) outcome.Liveness {
	st, err := proc.ReadStat(pid)
	if err != nil || st.Dead() {
		return outcome.Gone
	}
	argv, err := proc.Cmdline(pid)
	if err != nil || len(argv) == 0 {
		return outcome.Gone // exited between the two reads: a zombie has no command line
	}
	if supervisor.IsSupervisorOf(st, argv, name, runID) {
		return outcome.Same
	}
	return outcome.Foreign
}

var _ System = (*LiveSystem)(nil)
