package supervisor

import (
	"errors"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/capture"
	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
)

// statusEvery is how often the supervisor checks the log's status while the
// child runs, so a write error or the cap shows in the record promptly.
const statusEvery = 500 * time.Millisecond

// supervise waits for the leader's exit and the end of its output, records
// them, and then stays with what the leader left behind, holding it to the
// run's deadline, until every process of the run is reaped. Throughout it
// carries out process_kill's orders.
func (s *supervisor) supervise(pid int, outs []output, stdin *stdinServer) error {
	drained := drainAll(outs)
	exited := make(chan leaderExit, 1)
	allReaped := make(chan struct{})
	go func() {
		reap(pid, exited)
		close(allReaped)
	}()
	dl := s.newDeadline(pid)
	orders := s.control.ordersOf()
	tick := time.NewTicker(statusEvery)
	defer tick.Stop()
	var lastStatus capture.Status

	var exit *runrecord.Exit // recorded with the output's end, below
	outputDone := false
	leaderExited := func(le leaderExit) {
		exit = exitOf(le.ws, dl.fired) // its time is now, not after the wait
		s.measure(exit, &le.ru)
		// Before the wait for the drain: the output of a pty run can
		// end only once the supervisor lets go of the terminal.
		s.releaseTerminal()
		if !outputDone && awaitDrain(drained) {
			outputDone, drained = true, nil
		}
		if !outputDone {
			// A descendant holds the output: say the exit now, and
			// only then let go of stdin, so that a process_write that
			// finds no socket finds the exit in the record.
			s.recordExit(exit)
			stdin.Close()
		}
	}
	// reapedNow takes a leader's exit that came with another event, before
	// the run is signalled for it.
	reapedNow := func() {
		select {
		case le := <-exited:
			leaderExited(le)
		default:
		}
	}
	for exit == nil || !outputDone {
		select {
		case le := <-exited:
			leaderExited(le)
		case <-drained:
			outputDone, drained = true, nil
		case <-dl.timeout:
			// A leader that exited just as the deadline came did so on its
			// own: record that, and signal only what it left behind (its
			// group, once reaped, only while one of ours is in it).
			reapedNow()
			dl.expire(exit != nil)
		case <-dl.grace:
			// As at the timeout: select picks at random among ready
			// cases, and a leader reaped just now, its pid free for
			// reuse, is not signalled by it as if it lived.
			reapedNow()
			dl.kill(exit != nil)
		case o := <-orders:
			// As at the timeout.
			reapedNow()
			dl.order(o, exit != nil)
		case <-tick.C:
			if st := s.log.Status(); st != lastStatus {
				lastStatus = st
				s.writeRecord(func(r *runrecord.Record) { applyStatus(r, st) })
			}
		}
	}
	err := s.finish(exit)
	// Only now: a process_write that finds no socket must find the exit
	// in the record. Until here a write still reaches a descendant that
	// holds stdin, as it would have while the leader lived.
	stdin.Close()
	if s.ptyIn != nil {
		s.ptyIn.Close() // the stdin server leaves a terminal's input open
	}
	err = errors.Join(err, s.outlive(dl, allReaped))
	s.control.Close()
	return err
}

// outlive stays with the processes of the run that outlive the leader and
// let go of the output (a daemon it started, a job in a session of its
// own): they are still ours. As their subreaper we are their parent, so
// agent-box can find them as our descendants, report them and kill them.
// It returns once the last one is gone (without us they would go to init,
// untraceable), holding them to the run's deadline and carrying out
// process_kill's orders meanwhile.
func (s *supervisor) outlive(dl *deadline, allReaped <-chan struct{}) error {
	orders := s.control.ordersOf()
	for {
		select {
		case <-allReaped:
			dl.ended()
			// Empty now: the run's cgroup can go.
			if s.group != nil {
				return s.group.Remove()
			}
			return nil
		case <-dl.timeout:
			dl.expire(true)
		case <-dl.grace:
			dl.kill(true)
		case o := <-orders:
			dl.order(o, true)
		}
	}
}

// drainAll copies each output to its log writer and closes the returned
// channel once all of them reached EOF.
func drainAll(outs []output) <-chan struct{} {
	drained := make(chan struct{})
	var wg sync.WaitGroup
	for _, o := range outs {
		wg.Add(1)
		go func(o output) {
			defer wg.Done()
			drain(o.r, o.w)
			o.r.Close()
		}(o)
	}
	go func() { wg.Wait(); close(drained) }()
	return drained
}

// awaitDrain waits up to exitCoalesce for the output to end, and says
// whether it did. The leader's exit closes its end of the output; unless a
// descendant holds it too, the drain ends a moment later. Then one record
// says both, and process_wait (which answers once the log is final) waits
// for one fsynced write instead of two.
func awaitDrain(drained <-chan struct{}) bool {
	t := time.NewTimer(exitCoalesce)
	defer t.Stop()
	select {
	case <-drained:
		return true
	case <-t.C:
		return false
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

// deadline holds the whole run, not only its leader, to the run's timeout
// and to the grace of a process_kill: a process that ignores the TERM
// outlives a leader that dies of it, and is killed when the grace ends,
// even when it let go of the output. One grace runs at a time, the one
// that ends first.
type deadline struct {
	s              *supervisor
	pgid           int
	timeout, grace <-chan time.Time // nil when not armed
	graceEnds      time.Time        // when grace fires
	graceFor       time.Duration
	fired          bool // the timeout came
	// waiting are the kill orders told when the grace ends or the run is
	// gone.
	waiting []chan<- KillOutcome
}

func (s *supervisor) newDeadline(pgid int) *deadline {
	d := &deadline{s: s, pgid: pgid, graceFor: time.Duration(s.spec.KillGraceMS) * time.Millisecond}
	if d.graceFor <= 0 {
		d.graceFor = DefaultKillGrace
	}
	if s.spec.TimeoutS > 0 {
		d.timeout = time.After(time.Duration(s.spec.TimeoutS) * time.Second)
	}
	return d
}

// expire sends SIGTERM to the run and starts the grace.
func (d *deadline) expire(leaderReaped bool) {
	d.fired, d.timeout = true, nil
	d.s.signalRun(d.pgid, unix.SIGTERM, leaderReaped)
	d.startGrace(d.graceFor)
}

// startGrace arms the grace to end g from now, unless one already armed
// ends sooner: a second TERM does not put off a SIGKILL already due.
func (d *deadline) startGrace(g time.Duration) {
	ends := time.Now().Add(g)
	if d.grace != nil && !ends.Before(d.graceEnds) {
		return
	}
	d.grace, d.graceEnds = time.After(g), ends
}

// kill sends SIGKILL to what is left of the run when the grace ends.
func (d *deadline) kill(leaderReaped bool) {
	d.grace = nil
	group, outside := d.s.signalRun(d.pgid, unix.SIGKILL, leaderReaped)
	d.tell(KillOutcome{Escalated: group || len(outside) > 0})
}

// order carries out a process_kill: sig to the run now and, with a grace,
// SIGKILL to what is left when it ends, by the timer of the timeout.
func (d *deadline) order(o killOrder, leaderReaped bool) {
	group, outside := d.s.signalRun(d.pgid, o.sig, leaderReaped)
	r := KillReply{Outside: outside}
	if group {
		r.Group = d.pgid
	}
	if o.grace > 0 && o.sig != unix.SIGKILL && r.Signalled() {
		d.startGrace(o.grace)
		d.waiting = append(d.waiting, o.outcome)
		r.Armed = true
	}
	o.reply <- r
}

// ended tells the kills still in their grace that the run is gone.
func (d *deadline) ended() { d.tell(KillOutcome{}) }

func (d *deadline) tell(out KillOutcome) {
	for _, w := range d.waiting {
		w <- out // buffered, one outcome per order
	}
	d.waiting = nil
}

func applyStatus(r *runrecord.Record, st capture.Status) {
	r.LogBytes = st.Bytes
	r.LogDropped = st.Dropped
	r.LogCapped = st.Capped
	if st.Err != nil && !errors.Is(st.Err, capture.ErrCapped) {
		r.LogError = st.Err.Error()
	}
}

// exitCoalesce is how long the supervisor waits, when the leader exits, for
// the output to end too, so that one record says both.
const exitCoalesce = 5 * time.Millisecond

func exitOf(ws unix.WaitStatus, timedOut bool) *runrecord.Exit {
	exit := &runrecord.Exit{At: time.Now().UTC(), TimedOut: timedOut}
	switch {
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

// recordExit writes the leader's exit while its output is still open.
func (s *supervisor) recordExit(exit *runrecord.Exit) {
	st := s.log.Status()
	s.writeRecord(func(r *runrecord.Record) {
		r.Exit = exit
		r.FinishedAt = &exit.At
		applyStatus(r, st)
	})
}

// drain copies r to w until EOF. w never fails (capture's writers swallow
// errors), so the child's pipe is always emptied. capture's writers drain
// a pipe themselves, with a read the size of the pipe.
func drain(r io.Reader, w io.Writer) {
	if rf, ok := w.(io.ReaderFrom); ok {
		rf.ReadFrom(r)
		return
	}
	buf := make([]byte, copyBuf)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			w.Write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// descendants are the live processes of the run: every descendant of the
// supervisor, which as a child subreaper inherits the orphans among them.
func (s *supervisor) descendants() []outcome.Proc {
	procs, err := proc.Processes()
	if err != nil {
		return nil
	}
	return proc.Facts(proc.Descendants(procs, os.Getpid(), s.nested.IsSupervisor))
}

// signalRun sends sig to every process of the run that outcome.Targets
// picks: the leader's process group, and each descendant outside it (one
// that made a group or a session of its own). Once the leader is reaped
// its pid, the group's id, may be handed out again when the group is
// empty, so the group is signalled only while one of our descendants is
// in it. It reports whether the group was signalled, and which of the
// others were.
func (s *supervisor) signalRun(pgid int, sig unix.Signal, leaderReaped bool) (group bool, signalled []int) {
	me := os.Getpid()
	sid, _ := unix.Getsid(0)
	group, outside := outcome.Targets(outcome.TargetFacts{
		Group:       pgid,
		LeaderAlive: !leaderReaped,
		Supervisor:  me,
		Self:        outcome.Self{PID: me, PGID: unix.Getpgrp(), SID: sid},
		Descendants: s.descendants(),
	})
	for _, pid := range outside {
		if unix.Kill(pid, sig) == nil {
			signalled = append(signalled, pid)
		}
	}
	return group && unix.Kill(-pgid, sig) == nil, signalled
}

// leaderExit is how the leader ended and what it used: its rusage counts
// it and the descendants it waited for.
type leaderExit struct {
	ws unix.WaitStatus
	ru unix.Rusage
}

// reap waits for every child of the supervisor — as a subreaper it also
// inherits orphaned descendants — and sends the leader's status on exited.
func reap(leader int, exited chan<- leaderExit) {
	for {
		var ws unix.WaitStatus
		var ru unix.Rusage
		pid, err := unix.Wait4(-1, &ws, 0, &ru)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			// ECHILD: nothing left to wait for.
			return
		}
		if pid == leader && (ws.Exited() || ws.Signaled()) {
			exited <- leaderExit{ws, ru}
		}
	}
}
