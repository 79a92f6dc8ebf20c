package runs

import (
	"errors"
	"fmt"

	"github.com/agent-box/agent-box/supervisor"
)

// WriteResult says what process_write did.
type WriteResult struct {
	Run     Run  `json:"run"`
	Written int  `json:"written"`
	Closed  bool `json:"closed"`
}

// Write sends data to a piped run's stdin through its supervisor, which is
// reachable from any agent-box, not only the one that started the run.
func (m *Manager) Write(name, runID string, data []byte, closeIt bool) (WriteResult, error) {
	if len(data) == 0 && !closeIt {
		return WriteResult{}, invalid("nothing to do: give data, close=true, or both")
	}
	run, err := m.Get(name, runID)
	if err != nil {
		return WriteResult{}, err
	}
	if run.rec == nil {
		return WriteResult{}, fmt.Errorf("%w: %s", ErrNotFound, run.Reason)
	}
	if run.rec.Stdin != "pipe" {
		return WriteResult{}, fmt.Errorf("%w: run %q (run id %s) was started with stdin %q; start it with stdin: \"pipe\" to write to it",
			ErrNoStdin, name, run.RunID, run.rec.Stdin)
	}
	if run.Ended() || !run.supAlive {
		return WriteResult{}, fmt.Errorf("%w: run %q (run id %s) is %s (%s); its stdin is gone", ErrNoStdin, name, run.RunID, run.State, run.Reason)
	}
	reply, err := supervisor.WriteStdin(m.Store.RunDir(name, run.RunID), run.rec.SupervisorPID, data, closeIt)
	if err != nil {
		if errors.Is(err, supervisor.ErrStdinClosed) {
			return WriteResult{}, fmt.Errorf("%w: stdin of run %q (run id %s) was closed by an earlier process_write", ErrNoStdin, name, run.RunID)
		}
		return WriteResult{}, fmt.Errorf("writing to stdin of run %q: %w", name, err)
	}
	return WriteResult{Run: run, Written: reply.Written, Closed: reply.Closed}, nil
}
