package supervisor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/agent-box/agent-box/capture"
	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
)

// statusEvery is how often the supervisor checks the log's status while the
// child runs, so a write error or the cap shows in the record promptly.
const statusEvery = 500 * time.Millisecond

// recorder is the record's writes while the run goes on, an actor of the
// run's course (supervise): the log's status while it grows, the leader's
// exit with what it used, and once the output has ended (never before the
// drain and the leader's reap) the final record. It returns once that is
// written. said is closed once the record says the leader's exit: stdin is
// let go of only then (stdinActor).
//
// Its fields are its goroutine's own; other writes of the record (a
// resize) go through s.mu, as these do.
type recorder struct {
	s       *supervisor
	exits   <-chan leaderExit // from the escalation; nil once taken
	drained <-chan struct{}   // the drain's end; nil once seen
	said    chan struct{}
	exit    *runrecord.Exit
	last    capture.Status // the log's status last recorded
}

func (r *recorder) execute() error {
	tick := time.NewTicker(statusEvery)
	defer tick.Stop()
	for r.exits != nil || r.drained != nil {
		select {
		case le := <-r.exits:
			r.exits = nil
			r.leaderExited(le)
		case <-r.drained:
			r.drained = nil
		case <-tick.C:
			if st := r.s.log.Status(); st != r.last {
				r.last = st
				r.s.writeRecord(func(rec *runrecord.Record) { applyStatus(rec, st) })
			}
		}
	}
	err := r.s.finish(r.exit)
	r.say()
	return err
}

// leaderExited records the leader's exit, with the output's end when it
// comes a moment after (awaitDrain), else alone.
func (r *recorder) leaderExited(le leaderExit) {
	r.exit = exitOf(le)
	r.s.measure(r.exit, &le.ru)
	// Before the wait for the drain: the output of a pty run can end only
	// once the supervisor lets go of the terminal.
	r.s.releaseTerminal()
	if r.drained == nil || awaitDrain(r.drained) {
		r.drained = nil
		return
	}
	// A descendant holds the output: say the exit now, and only then let
	// go of stdin, so that a process_write that finds no socket finds the
	// exit in the record.
	r.s.recordExit(r.exit)
	r.say()
}

// say closes said, once.
func (r *recorder) say() {
	select {
	case <-r.said:
	default:
		close(r.said)
	}
}

// reserveSize is kept free in the run dir for the record: on a full disk
// the log stops first, and giving this space back lets the exit still be
// written.
const reserveSize = 16 << 10

func (s *supervisor) writeRecord(mut func(r *runrecord.Record)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	mut(s.rec)
	return s.withReserve(func() error { return s.store.Write(s.rec) })
}

// writePID records the child's pid and returns once readers see it, but
// before the fsync that makes the record survive a crash (durable): the
// start report need not wait for it (see runrecord.Store.WriteVisible).
// On a full disk it spends the reserve (withReserve): the run then keeps
// no output, and the exit record has no second try, but a child whose pid
// is not recorded could never be controlled and would have to be killed.
func (s *supervisor) writePID(pid int, start uint64) (durable func() error, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rec.PID = pid
	s.rec.PIDStartTime = start
	err = s.withReserve(func() (err error) {
		durable, err = s.store.WriteVisible(s.rec)
		return err
	})
	return durable, err
}

// withReserve makes one write of the record (s.mu held) and, when it fails
// while the reserve is still there (the disk is full), gives the reserve
// back and writes once more. The record matters more than the rest of the
// log: the log is stopped first, so that it cannot eat the room given back.
func (s *supervisor) withReserve(write func() error) error {
	err := write()
	if err != nil && s.reserve != "" {
		if s.log != nil {
			s.log.Stop(fmt.Errorf("stopped writing the log: the run record could not be written (%w)", err))
			applyStatus(s.rec, s.log.Status())
		}
		os.Remove(s.reserve)
		s.reserve = ""
		err = write()
	}
	if err != nil {
		s.logf("supervise: writing record: %v", err)
	}
	return err
}

// makeReserve sets aside reserveSize bytes on the file system of runDir,
// in its ReserveFile, and says whether it did.
func makeReserve(runDir string) bool {
	path := filepath.Join(runDir, ReserveFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return false
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, reserveSize)); err != nil {
		os.Remove(path)
		return false
	}
	return true
}

// takeReserve makes runDir's reserve the supervisor's: the one
// Launched.Start set aside while this process started (off
// process_start's path), or else one made now. Only a regular file of the
// full size with one link counts (removing another name of a file frees
// nothing). The supervisor only ever removes it.
func (s *supervisor) takeReserve(runDir string) {
	path := filepath.Join(runDir, ReserveFile)
	if reserved(path) || makeReserve(runDir) {
		s.reserve = path
	}
}

func reserved(path string) bool {
	_, ok := reserveAt(path)
	return ok
}

// reserveAt is the file at path, if it is a reserve: a regular file of the
// full size with one link.
func reserveAt(path string) (os.FileInfo, bool) {
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return nil, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return fi, ok && st.Nlink == 1 && fi.Size() >= reserveSize
}

// dropReserve gives the reserve back once the run needs no more records.
func (s *supervisor) dropReserve() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reserve != "" {
		os.Remove(s.reserve)
		s.reserve = ""
	}
}

// finish closes the log and writes the record that says the run's exit
// and that its output is final.
func (s *supervisor) finish(exit *runrecord.Exit) error {
	cerr := s.log.Close()
	// Before the record, so that its room is there for it, and so that
	// once the record says the output is closed the run dir is as it
	// stays (a reserve unlinked after it measured no faster answer).
	s.dropReserve()
	st := s.log.Status()
	return errors.Join(cerr, s.writeRecord(func(r *runrecord.Record) {
		if r.Exit == nil {
			r.Exit, r.FinishedAt = exit, &exit.At
		}
		applyStatus(r, st)
		r.OutputClosed = true
	}))
}

// recordExit writes the leader's exit while its output is still open.
func (s *supervisor) recordExit(exit *runrecord.Exit) {
	st := s.log.Status()
	s.writeRecord(func(r *runrecord.Record) {
		r.Exit = exit
		r.FinishedAt = &exit.At
		applyStatus(r, st)
	})
}

func applyStatus(r *runrecord.Record, st capture.Status) {
	r.LogBytes = st.Bytes
	r.LogDropped = st.Dropped
	r.LogCapped = st.Capped
	if st.Err != nil && !errors.Is(st.Err, capture.ErrCapped) {
		r.LogError = st.Err.Error()
	}
}

// exitOf is the record's word of the leader's exit.
func exitOf(le leaderExit) *runrecord.Exit {
	exit := &runrecord.Exit{At: le.at, TimedOut: le.timedOut}
	switch ws := le.ws; {
	case ws.Signaled():
		// proc owns the field's format (proc/signal.go): it names every signal,
		// real-time ones too (unix.SignalName has no name for them).
		exit.Signal = proc.SignalName(ws.Signal())
	default:
		code := ws.ExitStatus()
		exit.Code = &code
	}
	return exit
}
