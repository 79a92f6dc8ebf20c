package runs

import (
	"errors"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/proc"
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

func (s *LiveSystem) Processes() ([]proc.Stat, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	out := make([]proc.Stat, 0, len(names))
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		st, err := proc.ReadStat(pid)
		if err != nil || st.State == 'Z' || st.State == 'X' {
			continue // gone meanwhile, or dead
		}
		out = append(out, st)
	}
	return out, nil
}

func (s *LiveSystem) GroupAlive(pgid int) bool {
	return pgid > 0 && !errors.Is(unix.Kill(-pgid, 0), unix.ESRCH)
}

var _ System = (*LiveSystem)(nil)
