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

func (s *LiveSystem) SupervisorOf(pid int, name, runID string) bool {
	st, err := proc.ReadStat(pid)
	return err == nil && supervisor.IsSupervisorOf(st, name, runID)
}

var _ System = (*LiveSystem)(nil)
