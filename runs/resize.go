package runs

import (
	"errors"
	"fmt"

	"github.com/agent-box/agent-box/supervisor"
)

// Resize sets the size of a pty run's terminal, through its supervisor,
// which holds the terminal: from any agent-box, not only the one that
// started the run. The kernel sends SIGWINCH to the terminal's foreground
// group; the record and the returned run say the new size.
func (m *Manager) Resize(name, runID string, cols, rows int) (Run, error) {
	if err := CheckSize(cols, rows); err != nil {
		return Run{}, err
	}
	run, err := m.Get(name, runID)
	if err != nil {
		return Run{}, err
	}
	if run.rec == nil {
		return Run{}, fmt.Errorf("%w: %s", ErrNotFound, run.Reason)
	}
	if !run.rec.Pty {
		return Run{}, fmt.Errorf("%w: run %q (run id %s) was not started with pty: true; only a pty run has a terminal to resize",
			ErrNoTerminal, name, run.RunID)
	}
	if run.Ended() || !run.supAlive {
		return Run{}, terminalGone(run)
	}
	err = supervisor.Resize(m.Store.RunDir(name, run.RunID), run.rec.SupervisorPID, supervisor.Size{Cols: cols, Rows: rows})
	if err != nil {
		if now, gerr := m.Get(name, run.RunID); gerr == nil && (now.Ended() || !now.supAlive) {
			return now, terminalGone(now)
		}
		if errors.Is(err, supervisor.ErrStdinNoReply) {
			// A resize is the same twice: asking again is safe.
			err = fmt.Errorf("%w%w", err, silent{ErrUnreachable})
		} else {
			err = supervisorError(err)
		}
		return run, fmt.Errorf("resizing the terminal of run %q: %w", name, err)
	}
	return m.Get(name, run.RunID)
}

func terminalGone(run Run) error {
	return fmt.Errorf("%w: run %q (run id %s) is %s (%s); its terminal is gone%w", ErrNoTerminal, run.Name, run.RunID, run.State, run.Reason, silent{ErrNotRunning})
}
