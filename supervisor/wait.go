package supervisor

import (
	"errors"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// supervise runs the run, once its leader is started, as a group of actors
// (group), and returns when every process of the run is reaped:
//
//	reaper  ─leader's exit─▶ escalation ─exit, timed out or not─▶ recorder ─said─▶ stdin
//	drain   ─drained──────────────────────────────────────────────▶ recorder, stdin
//	timeout ─expired─▶ escalation ◀─kill orders─ control socket
//
// The run's course — the reaper, the drain, the recorder and the stdin
// socket — ends on its own: once the leader's exit is recorded, the output
// has ended and the record says so (recorder: never before the drain and
// the leader's reap), stdin is closed (never before the record says the
// exit), and the last process is reaped. Nothing of it is interrupted.
// Then, in this order: the run's cgroup is removed (empty, and measured at
// the leader's exit); the timeout is interrupted; the escalation, which
// tells the kills still in their grace that the run is gone; the control
// socket last, which takes no more orders and lets its handlers send those
// outcomes.
func (s *supervisor) supervise(leader int, outs []output, stdin *stdinServer) error {
	r := &reaper{leader: leader, exited: make(chan leaderExit, 1)}
	d := &drain{outs: outs, done: make(chan struct{})}
	t := s.newTimeout()
	e := s.newEscalation(leader, t.expiry(), r.exited)
	rec := &recorder{s: s, exits: e.exits, drained: d.done, said: make(chan struct{})}
	course := all(r.execute, d.execute, rec.execute, stdinActor(stdin, s.ptyIn, rec.said, d.done))

	var g group
	g.Add(func() error { return errors.Join(course(), s.removeCgroup()) }, nil)
	if t != nil {
		g.Add(t.execute, t.interrupt)
	}
	g.Add(e.execute, e.interrupt)
	if s.control != nil {
		g.Add(s.control.execute, s.control.interrupt)
	}
	return g.Run()
}

// reaper is the children's wait. As the subreaper of the run it is also
// the parent of the processes that outlive the leader and let go of the
// output (a daemon it started, a job in a session of its own): they are
// still the run's, and agent-box finds them as the supervisor's
// descendants, reports them and kills them. It returns once the last one
// is gone (without the supervisor they would go to init, untraceable).
type reaper struct {
	leader int
	exited chan leaderExit // buffered: the leader's one exit
}

func (r *reaper) execute() error {
	reap(r.leader, r.exited)
	return nil
}

// removeCgroup removes the run's cgroup, if it has one, once it is empty.
func (s *supervisor) removeCgroup() error {
	if s.group == nil {
		return nil
	}
	return s.group.Remove()
}

// leaderExit is how the leader ended, when, and what it used: its rusage
// counts it and the descendants it waited for. timedOut is the
// escalation's word: whether the run's timeout came first.
type leaderExit struct {
	ws       unix.WaitStatus
	ru       unix.Rusage
	at       time.Time
	timedOut bool
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
			exited <- leaderExit{ws: ws, ru: ru, at: time.Now().UTC()}
		}
	}
}

type output struct {
	r *os.File
	w io.Writer
}

// drain copies each output to its log writer; done is closed once all of
// them reached EOF.
type drain struct {
	outs []output
	done chan struct{}
}

func (d *drain) execute() error {
	copies := make([]func() error, len(d.outs))
	for i, o := range d.outs {
		copies[i] = func() error {
			copyOutput(o.r, o.w)
			o.r.Close()
			return nil
		}
	}
	all(copies...)()
	close(d.done)
	return nil
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

// exitCoalesce is how long the supervisor waits, when the leader exits, for
// the output to end too, so that one record says both.
const exitCoalesce = 5 * time.Millisecond

// copyOutput copies r to w until EOF. w never fails (capture's writers
// swallow errors), so the child's pipe is always emptied. capture's
// writers drain a pipe themselves, with a read the size of the pipe.
func copyOutput(r io.Reader, w io.Writer) {
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
