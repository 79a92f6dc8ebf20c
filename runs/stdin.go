package runs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agent-box/agent-box/supervisor"
)

// WriteRequest is process_write's arguments.
type WriteRequest struct {
	Name  string
	RunID string // "" is the newest run of Name
	Data  []byte
	Close bool
	// Wait, when not 0, reads the output that follows the write: from the
	// log's end as it was just before it, waiting as tail_log's wait_ms
	// does, and for Await as tail_log's until and idle_ms do.
	Wait  time.Duration
	Await Await
}

// MaxWriteBytes bounds the data of one process_write.
const MaxWriteBytes = supervisor.MaxWrite

// WriteResult says what process_write did.
type WriteResult struct {
	Run     Run  `json:"run"`
	Written int  `json:"written"`
	Closed  bool `json:"closed"`
	// Output is the output that followed the write, when Wait asked.
	Output *TailResult `json:"-"`
}

// Write sends data to a piped run's stdin through its supervisor, which is
// reachable from any agent-box, not only the one that started the run.
//
// A write can fail after part of the data went in (the child stops reading
// and the write times out, or it exits): the error then says how many
// bytes of how many were written, and the result's Written is that count.
//
// With Wait, the output that followed the write is read as tail_log reads
// it, so that one call answers one prompt. A repeat (Once) whose first
// try's wait was cut writes nothing: it reads the output since that try's
// write, for what is left of Wait (wroteBefore).
func (m *Manager) Write(ctx context.Context, req WriteRequest) (WriteResult, error) {
	if len(req.Data) == 0 && !req.Close {
		return WriteResult{}, invalid("nothing to do: give data, close=true, or both")
	}
	if len(req.Data) > MaxWriteBytes {
		return WriteResult{}, invalid("data is %d bytes, at most %d per call; nothing was written", len(req.Data), MaxWriteBytes)
	}
	if err := inRange(m.arg("wait_ms"), req.Wait, time.Millisecond, MaxWait); err != nil {
		return WriteResult{}, err
	}
	until, err := req.Await.check(m, req.Wait)
	if err != nil {
		return WriteResult{}, err
	}
	var res WriteResult
	var from int64
	c, began := resumed(ctx)
	if c != nil {
		res, from, err = m.wroteBefore(req, c)
	} else {
		res, from, err = m.write(req)
		if err != nil || req.Wait <= 0 {
			return res, err
		}
		began = time.Now()
	}
	if err != nil {
		return res, err
	}
	lr, err := TailRequest{Offset: &from}.window()
	if err != nil {
		return res, err
	}
	f, err := m.follow(res.Run.Name, res.Run.RunID, lr)
	if err != nil {
		return res, fmt.Errorf("wrote %d bytes, then reading the output: %w", res.Written, err)
	}
	defer f.close()
	out, err := f.read(ctx, timeLeft(req.Wait, began, time.Now()), req.Await, until, nil)
	if err != nil {
		return res, fmt.Errorf("wrote %d bytes, then reading the output: %w", res.Written, err)
	}
	if out.cut {
		cutShort(ctx, cut{RunID: res.Run.RunID, From: from, Written: res.Written, Closed: res.Closed})
	}
	res.Output = &out
	return res, nil
}

// wroteBefore answers a repeat of a write whose first try's wait for
// output was cut: nothing is written again; the run is read anew, and the
// output is read from where it began after that try's write (c.From).
func (m *Manager) wroteBefore(req WriteRequest, c *cut) (WriteResult, int64, error) {
	run, err := m.Get(req.Name, c.RunID)
	if err != nil {
		return WriteResult{}, 0, err
	}
	return WriteResult{Run: run, Written: c.Written, Closed: c.Closed}, c.From, nil
}

// write sends req's data, and says where the log ended just before.
func (m *Manager) write(req WriteRequest) (WriteResult, int64, error) {
	name, data, closeIt := req.Name, req.Data, req.Close
	run, err := m.Get(name, req.RunID)
	if err != nil {
		return WriteResult{}, 0, err
	}
	if run.rec == nil {
		return WriteResult{}, 0, fmt.Errorf("%w: %s", ErrNotFound, run.Reason)
	}
	if run.rec.Stdin != "pipe" {
		return WriteResult{}, 0, fmt.Errorf("%w: run %q (run id %s) was started with stdin %q; start it with stdin: \"pipe\" to write to it",
			ErrNoStdin, name, run.RunID, run.rec.Stdin)
	}
	if run.Ended() || !run.supAlive {
		return WriteResult{}, 0, stdinGone(run)
	}
	var from int64
	if req.Wait > 0 {
		if from, err = logEnd(run); err != nil {
			return WriteResult{}, 0, err
		}
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
					gone = fmt.Errorf("%w; it is not known whether the %d bytes reached it before that%w", gone, len(data), silent{ErrUnknownOutcome})
				}
				return WriteResult{Run: now}, 0, gone
			}
		}
		if errors.Is(err, supervisor.ErrStdinClosed) {
			return res, 0, fmt.Errorf("%w: stdin of run %q (run id %s) was closed by an earlier process_write; nothing was written%w", ErrNoStdin, name, run.RunID, silent{ErrNotRunning})
		}
		var we *supervisor.WriteError
		if errors.As(err, &we) {
			return res, 0, partialWriteError(name, we)
		}
		return res, 0, fmt.Errorf("writing to stdin of run %q: %w", name, supervisorError(err))
	}
	return res, from, nil
}

// logEnd is the size of run's log now.
func logEnd(run Run) (int64, error) {
	_, closeLog, size, err := openLog(run)
	if err != nil {
		return 0, err
	}
	closeLog()
	return size, nil
}

func stdinGone(run Run) error {
	return fmt.Errorf("%w: run %q (run id %s) is %s (%s); its stdin is gone%w", ErrNoStdin, run.Name, run.RunID, run.State, run.Reason, silent{ErrNotRunning})
}

// silent wraps a sentinel for errors.Is without adding to the message.
type silent struct{ err error }

func (s silent) Error() string { return "" }
func (s silent) Unwrap() error { return s.err }

// supervisorError adds to err, an error of a request to a run's
// supervisor (stdin.sock), the sentinel of runs it stands for: the
// supervisor's sentinels stay wrapped, but callers of runs branch on
// runs' own.
func supervisorError(err error) error {
	switch {
	case errors.Is(err, supervisor.ErrStdinImpostor):
		return fmt.Errorf("%w%w", err, silent{ErrRefused})
	case errors.Is(err, supervisor.ErrStdinUnreachable):
		return fmt.Errorf("%w%w", err, silent{ErrUnreachable})
	case errors.Is(err, supervisor.ErrStdinNoReply):
		return fmt.Errorf("%w%w", err, silent{ErrUnknownOutcome})
	}
	return err
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
		errs = append(errs, ErrNoStdin, ErrNotRunning)
	}
	return &writeError{msg: msg, errs: errs}
}

type writeError struct {
	msg  string
	errs []error
}

func (e *writeError) Error() string   { return e.msg }
func (e *writeError) Unwrap() []error { return e.errs }
