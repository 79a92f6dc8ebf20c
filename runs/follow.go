package runs

import (
	"context"
	"fmt"
	"io"
	"iter"
	"time"

	"github.com/agent-box/agent-box/live"
	"github.com/agent-box/agent-box/logframe"
	"github.com/agent-box/agent-box/logread"
)

// A follower reads a run's log window after window, each from where the
// last ended. It is the one loop behind tail_log's wait_ms (Tail: its
// first window) and agent-box logs -f (Follow: every window), so the two
// wake, re-read and stop alike.
type follower struct {
	m    *Manager
	name string
	run  Run
	// fresh: run was just read, so the next window need not read it again.
	fresh bool
	req   logread.Request // the next window; its Offset moves on
	watch *live.Watch     // made on the first wait and kept for the next
}

// follow pins the run (name, runID) and checks that req suits its log.
func (m *Manager) follow(name, runID string, req logread.Request) (*follower, error) {
	run, err := m.Get(name, runID)
	if err != nil {
		return nil, err
	}
	if run.rec == nil {
		return nil, fmt.Errorf("%w: run %s of %q: %s", ErrNotFound, run.RunID, name, run.Reason)
	}
	req.Framed = run.rec.LogFormat == logframe.FormatName
	if req.Raw && !req.Framed {
		return nil, invalid("raw applies to framed runs only; run %s is %s", run.RunID, run.CaptureMode)
	}
	return &follower{m: m, name: name, run: run, fresh: true, req: req}, nil
}

// refresh reads the run again, unless it was just read.
func (f *follower) refresh() error {
	if !f.fresh {
		run, err := f.m.Get(f.name, f.run.RunID)
		if err != nil {
			return err
		}
		f.run = run
	}
	f.fresh = false
	return nil
}

// close releases the follower's watch.
func (f *follower) close() { f.watch.Close() }

// sight is one look at the followed log: the run as just read (the
// follower's run), its log open at size, and whether it can grow no more
// (final, decided before the size was read).
type sight struct {
	r     io.ReaderAt
	size  int64
	final bool
}

// A look decides from one sight whether the wait is over: done, with the
// answer or an error; else how long to sleep at most before the next look,
// unless the log's writes or the record's wake it sooner.
type look func(s sight) (res TailResult, done bool, sleep time.Duration, err error)

// wait is the follower's one loop, behind next and await alike: read the
// run, open its log, ask look, and sleep on the run dir's watch until the
// log grows, the record changes, the sleep passes or ctx is done. The
// watch is made on the first sleep and kept for the next wait.
func (f *follower) wait(ctx context.Context, look look) (TailResult, error) {
	for {
		if err := f.refresh(); err != nil {
			return TailResult{}, err
		}
		final := f.run.LogFinal() // decided before the size is read
		r, closeLog, size, err := openLog(f.run)
		if err != nil {
			return TailResult{}, err
		}
		res, done, sleep, err := look(sight{r: r, size: size, final: final})
		closeLog()
		if done || err != nil {
			return res, err
		}
		if f.watch == nil {
			f.watch = live.WatchDirs(live.WatchOutput, f.m.Store.RunDir(f.run.Name, f.run.RunID))
			f.fresh = true // re-read the log once: output may have landed before the watch
			continue
		}
		f.watch.Wait(ctx, sleep)
	}
}

// next reads the next window, waiting up to wait for output past its
// start while the run can still write: the first window that progressed,
// or the empty one at the deadline or once ctx is done. A window of the
// last lines (TailLines) or from the end (a negative Offset) waits only
// while the log has nothing to return, as one from its start would; the
// next one goes on from where it ended.
func (f *follower) next(ctx context.Context, wait time.Duration) (TailResult, error) {
	deadline := time.Now().Add(wait)
	return f.wait(ctx, func(s sight) (TailResult, bool, time.Duration, error) {
		lr := f.req
		lr.Final = s.final
		w, err := readWindow(s.r, s.size, lr)
		if err != nil {
			return TailResult{}, true, 0, mapReadErr(err, f.run)
		}
		// An empty window of a log that can still grow has nothing to return
		// yet: either nothing past Offset, or only bytes the writer is still
		// inside (an incomplete last frame line or character), which logread
		// holds back instead of replacing. Wait for them; Final, read again
		// after the run ends, returns whatever is left.
		progressed := w.EndOffset > w.Offset || len(w.Skipped) > 0
		left := time.Until(deadline)
		over := progressed || s.final || left <= 0
		if !over && ctx.Err() == nil {
			return TailResult{}, false, left, nil
		}
		f.req.Offset, f.req.TailLines = w.EndOffset, 0
		run := f.run
		run.LogBytes = s.size
		return TailResult{Window: w, Run: run, EOF: s.final && w.EndOffset == s.size, cut: !over}, true, 0, nil
	})
}

// FollowRequest is what Follow reads: a run's output from the start of
// its log.
type FollowRequest struct {
	Name  string
	RunID string // "" is the latest run of Name
	// Stream is "" for the output as written (a framed run's two streams
	// interleaved in the order they were written), or "stdout" or "stderr"
	// for that stream of a framed run alone.
	Stream string
	// Wait bounds each window's wait for output; a window that got none
	// by then is yielded empty, with the run as it is then. With Wait 0
	// Follow reads what is written now: it ends with the first window
	// that reaches the end of the log as it stands.
	Wait time.Duration
}

// FollowChunk is one window of a followed log.
type FollowChunk struct {
	TailResult
	// Output is the window's output, byte for byte, as Stream chose.
	Output []byte
	// Cut, at EOF of a framed log read whole, is the length of a last
	// frame a crash or a full disk cut: it is left out of Output.
	Cut int
}

// Follow yields a run's log window after window, until the log can grow
// no more and the last window reached its end (EOF), or ctx is done: each
// window waits up to req.Wait for output, as tail_log's wait_ms does.
// Windows cover at most logread.MaxWindow log bytes. An error ends it.
func (m *Manager) Follow(ctx context.Context, req FollowRequest) iter.Seq2[FollowChunk, error] {
	return func(yield func(FollowChunk, error) bool) {
		f, demux, err := m.followOutput(req)
		if err != nil {
			yield(FollowChunk{}, err)
			return
		}
		defer f.close()
		for {
			res, err := f.next(ctx, req.Wait)
			if err != nil {
				yield(FollowChunk{}, err)
				return
			}
			ch := FollowChunk{TailResult: res}
			switch w := res.Window; {
			case demux != nil:
				err = demux.Feed(w.Bytes, func(fr logframe.Frame) error {
					ch.Output = append(ch.Output, fr.Payload...)
					return nil
				})
				if err != nil {
					yield(FollowChunk{}, fmt.Errorf("log of run %s is damaged: %w", res.Run.RunID, err))
					return
				}
				if res.EOF {
					ch.Cut = demux.Pending()
				}
			case req.Stream == "stdout":
				ch.Output = w.StdoutBytes
			case req.Stream == "stderr":
				ch.Output = w.StderrBytes
			default:
				ch.Output = w.Bytes
			}
			caughtUp := req.Wait <= 0 && !res.Window.Truncated // else it would spin
			if !yield(ch, nil) || res.EOF || caughtUp || ctx.Err() != nil {
				return
			}
		}
	}
}

// followOutput makes the follower of req, and for both streams of a
// framed run the demuxer of its frames. Both streams interleaved byte for
// byte are the frames as stored, decoded here: logread's exact decoded
// windows hold each stream apart, and its text is not exact.
func (m *Manager) followOutput(req FollowRequest) (*follower, *logframe.Demuxer, error) {
	if req.Stream != "" && req.Stream != "stdout" && req.Stream != "stderr" {
		return nil, nil, invalid("%s must be stdout or stderr, not %q", m.arg("stream"), req.Stream)
	}
	f, err := m.follow(req.Name, req.RunID, logread.Request{MaxBytes: logread.MaxWindow, Exact: true})
	if err != nil {
		return nil, nil, err
	}
	switch {
	case req.Stream != "" && !f.req.Framed:
		return nil, nil, invalid("run %s is %s; only a framed run keeps stdout and stderr apart", f.run.RunID, f.run.CaptureMode)
	case req.Stream == "" && f.req.Framed:
		f.req.Raw = true
		return f, logframe.NewDemuxer(0), nil
	}
	return f, nil, nil
}
