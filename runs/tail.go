package runs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/agent-box/agent-box/logframe"
	"github.com/agent-box/agent-box/logread"
	"github.com/agent-box/agent-box/runrecord"
)

// MaxWait bounds tail_log's wait_ms.
const MaxWait = 60 * time.Second

// TailRequest is tail_log's arguments.
type TailRequest struct {
	Name  string
	RunID string
	logread.Request
	Wait time.Duration // block this long for output past Offset
}

// TailResult is a window of the log and the run as of reading it.
type TailResult struct {
	Window logread.Window
	Run    Run
	EOF    bool // the log can no longer grow and the window reached its end
}

// emptyLog stands in for a log that was never created (start failed).
type emptyLog struct{}

func (emptyLog) ReadAt(p []byte, off int64) (int, error) { return 0, io.EOF }

// openLog opens a run's log for reading: what the store's OpenFile
// allows (a regular file, no symlink, never blocking in open), or nothing
// when the run never made one.
func openLog(run Run) (io.ReaderAt, func(), int64, error) {
	what := fmt.Sprintf("the log of run %s/%s", run.Name, run.RunID)
	f, err := runrecord.OpenFile(run.LogPath, os.O_RDONLY, 0, what)
	if errors.Is(err, os.ErrNotExist) {
		return emptyLog{}, func() {}, 0, nil
	}
	if err != nil {
		return nil, nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, 0, fmt.Errorf("opening %s: %w", what, err)
	}
	return f, func() { f.Close() }, fi.Size(), nil
}

// Tail reads one window of a run's log, waiting up to req.Wait for output
// past req.Offset while the run can still write: the first window of a
// follower, as Follow's are.
func (m *Manager) Tail(ctx context.Context, req TailRequest) (TailResult, error) {
	if err := inRange("wait_ms", req.Wait, time.Millisecond, MaxWait); err != nil {
		return TailResult{}, err
	}
	f, err := m.follow(req.Name, req.RunID, req.Request)
	if err != nil {
		return TailResult{}, err
	}
	defer f.close()
	return f.next(ctx, req.Wait)
}

func mapReadErr(err error, run Run) error {
	switch {
	case errors.Is(err, logread.ErrBadOffset), errors.Is(err, logread.ErrBadMaxBytes), errors.Is(err, logread.ErrBadRequest):
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	case errors.Is(err, logframe.ErrMalformed):
		return fmt.Errorf("log of run %s is damaged: %w", run.RunID, err)
	}
	return fmt.Errorf("reading log of run %s: %w", run.RunID, err)
}
