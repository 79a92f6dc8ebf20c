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
//
// A write can fail after part of the data went in (the child stops reading
// and the write times out, or it exits): the error then says how many
// bytes of how many were written, and the result's Written is that count.
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
		return WriteResult{}, stdinGone(run)
	}
	reply, err := supervisor.WriteStdin(m.Store.RunDir(name, run.RunID), run.rec.SupervisorPID, data, closeIt, m.waitPolicy().StdinWrite)
	res := WriteResult{Run: run, Written: reply.Written, Closed: reply.Closed}
	if err != nil {
		if errors.Is(err, supervisor.ErrStdinUnreachable) || errors.Is(err, supervisor.ErrStdinNoReply) {
			// The run may have ended between the read of its record and
			// the request: the supervisor stops listening only after the
			// record that says so.
			if now, gerr := m.Get(name, run.RunID); gerr == nil && (now.Ended() || !now.supAlive) {
				gone := stdinGone(now)
				if errors.Is(err, supervisor.ErrStdinNoReply) {
					// Sent, and not answered: it may have gone in before.
					gone = fmt.Errorf("%w; it is not known whether the %d bytes reached it before that", gone, len(data))
				}
				return WriteResult{Run: now}, gone
			}
		}
		if errors.Is(err, supervisor.ErrStdinClosed) {
			return res, fmt.Errorf("%w: stdin of run %q (run id %s) was closed by an earlier process_write; nothing was written", ErrNoStdin, name, run.RunID)
		}
		var we *supervisor.WriteError
		if errors.As(err, &we) {
			return res, partialWriteError(name, we)
		}
		return res, fmt.Errorf("writing to stdin of run %q: %w", name, err)
	}
	return res, nil
}

func stdinGone(run Run) error {
	return fmt.Errorf("%w: run %q (run id %s) is %s (%s); its stdin is gone", ErrNoStdin, run.Name, run.RunID, run.State, run.Reason)
}

// partialWriteError says, for the agent, exactly which part of the data is
// in the run's stdin and which is not, so that it resends only the rest.
// It wraps the supervisor's error (and its sentinel) and, when nobody
// reads the pipe any more, ErrNoStdin.
func partialWriteError(name string, we *supervisor.WriteError) error {
	var msg string
	switch {
	case we.Total == 0:
		msg = fmt.Sprintf("stdin of run %q: %v", name, we.Err)
	case we.Written == 0:
		msg = fmt.Sprintf("wrote none of the %d bytes to stdin of run %q: %v", we.Total, name, we.Err)
	default:
		msg = fmt.Sprintf("wrote %d of %d bytes to stdin of run %q before %v; the remaining %d bytes were not written",
			we.Written, we.Total, name, we.Err, we.Total-we.Written)
	}
	if we.CloseAsked {
		msg += "; stdin was not closed"
	}
	errs := []error{we}
	if errors.Is(we, supervisor.ErrStdinBroken) {
		errs = append(errs, ErrNoStdin)
	}
	return &writeError{msg: msg, errs: errs}
}

type writeError struct {
	msg  string
	errs []error
}

func (e *writeError) Error() string   { return e.msg }
func (e *writeError) Unwrap() []error { return e.errs }
