package supervisor

import (
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/proc"
)

// timeout is the run's timeout_s as an actor: when it comes, it tells the
// escalation, which sends the TERM and holds the run to the grace. It is
// an order the run gives itself, beside process_kill's.
type timeout struct {
	after   time.Duration
	expired chan struct{} // closed when the timeout comes
	stop    chan struct{}
}

// newTimeout is the run's timeout, nil when it has none.
func (s *supervisor) newTimeout() *timeout {
	if s.spec.Run.TimeoutS <= 0 {
		return nil
	}
	return &timeout{
		after:   time.Duration(s.spec.Run.TimeoutS) * time.Second,
		expired: make(chan struct{}),
		stop:    make(chan struct{}),
	}
}

// expiry is the channel closed when the timeout comes; nil (never ready)
// for a run without one.
func (t *timeout) expiry() <-chan struct{} {
	if t == nil {
		return nil
	}
	return t.expired
}

// execute waits for the timeout, and then for its interrupt: a service of
// the run ends only with it.
func (t *timeout) execute() error {
	timer := time.NewTimer(t.after)
	defer timer.Stop()
	select {
	case <-timer.C:
		close(t.expired)
	case <-t.stop:
		return nil
	}
	<-t.stop
	return nil
}

func (t *timeout) interrupt(error) { close(t.stop) }

// escalation holds the whole run, not only its leader, to the run's
// timeout and to the grace of a process_kill: a process that ignores the
// TERM outlives a leader that dies of it, and is killed when the grace
// ends, even when it let go of the output. One grace runs at a time, the
// one that ends first.
//
// It alone signals the run, and it is the first to hear of the leader's
// exit: so it knows, whenever it signals, whether the leader is reaped
// (and its pid free for reuse), and the exit it passes on says whether the
// timeout came first.
type escalation struct {
	// signal sends sig to the run (signalRun, with the run's group).
	signal   func(sig unix.Signal, leaderReaped bool) (group bool, outside []int)
	pgid     int
	graceFor time.Duration // the grace at the timeout
	expired  <-chan struct{}
	orders   <-chan killOrder  // process_kill's; nil without a control socket
	reaped   <-chan leaderExit // the reaper's word of the leader's exit
	exits    chan leaderExit   // the same, stamped, for the recorder
	stop     chan struct{}
	stopped  chan struct{}

	// The rest is execute's own.
	grace        <-chan time.Time // nil when not armed
	graceEnds    time.Time        // when grace fires
	fired        bool             // the timeout came
	leaderReaped bool
	// waiting are the kill orders told when the grace ends or the run is
	// gone.
	waiting []chan<- KillOutcome
}

func (s *supervisor) newEscalation(pgid int, expired <-chan struct{}, reaped <-chan leaderExit) *escalation {
	e := &escalation{
		pgid: pgid, expired: expired, reaped: reaped, orders: s.control.ordersOf(),
		signal: func(sig unix.Signal, leaderReaped bool) (bool, []int) {
			return s.signalRun(pgid, sig, leaderReaped)
		},
		graceFor: time.Duration(s.spec.KillGraceMS) * time.Millisecond,
		exits:    make(chan leaderExit, 1),
		stop:     make(chan struct{}), stopped: make(chan struct{}),
	}
	if e.graceFor <= 0 {
		e.graceFor = DefaultKillGrace
	}
	return e
}

func (e *escalation) execute() error {
	defer close(e.stopped)
	for {
		select {
		case le := <-e.reaped:
			e.leaderGone(le)
		case <-e.expired:
			e.takeExit()
			e.expire()
		case <-e.grace:
			e.takeExit()
			e.kill()
		case o := <-e.orders:
			e.takeExit()
			e.order(o)
		case <-e.stop:
			// Interrupted once every process of the run is reaped.
			e.tell(KillOutcome{})
			return nil
		}
	}
}

// interrupt stops the escalation and returns once it has told the kills
// in their grace, so that the control socket closes only after.
func (e *escalation) interrupt(error) {
	close(e.stop)
	<-e.stopped
}

// takeExit takes the leader's exit if the reaper has told it, before the
// run is signalled: select picks at random among ready cases, and a leader
// reaped just now, its pid free for reuse, is not signalled as if it
// lived. A leader that exited just as the timeout came did so on its own:
// its exit says so, and only what it left behind is signalled (its group,
// once it is reaped, only while one of the run's is in it).
func (e *escalation) takeExit() {
	select {
	case le := <-e.reaped:
		e.leaderGone(le)
	default:
	}
}

// leaderGone passes on the leader's exit, saying whether the timeout came
// first.
func (e *escalation) leaderGone(le leaderExit) {
	e.reaped, e.leaderReaped = nil, true
	le.timedOut = e.fired
	e.exits <- le // buffered, the one exit
}

// expire sends SIGTERM to the run and starts the grace.
func (e *escalation) expire() {
	e.fired, e.expired = true, nil
	e.signal(unix.SIGTERM, e.leaderReaped)
	e.startGrace(e.graceFor)
}

// startGrace arms the grace to end g from now, unless one already armed
// ends sooner: a second TERM does not put off a SIGKILL already due.
func (e *escalation) startGrace(g time.Duration) {
	ends := time.Now().Add(g)
	if e.grace != nil && !ends.Before(e.graceEnds) {
		return
	}
	e.grace, e.graceEnds = time.After(g), ends
}

// kill sends SIGKILL to what is left of the run when the grace ends.
func (e *escalation) kill() {
	e.grace = nil
	group, outside := e.signal(unix.SIGKILL, e.leaderReaped)
	e.tell(KillOutcome{Escalated: group || len(outside) > 0})
}

// order carries out a process_kill: sig to the run now and, with a grace,
// SIGKILL to what is left when it ends, by the timer of the timeout.
func (e *escalation) order(o killOrder) {
	group, outside := e.signal(o.sig, e.leaderReaped)
	r := KillReply{Outside: outside}
	if group {
		r.Group = e.pgid
	}
	if o.grace > 0 && o.sig != unix.SIGKILL && r.Signalled() {
		e.startGrace(o.grace)
		e.waiting = append(e.waiting, o.outcome)
		r.Armed = true
	}
	o.reply <- r
}

func (e *escalation) tell(out KillOutcome) {
	for _, w := range e.waiting {
		w <- out // buffered, one outcome per order
	}
	e.waiting = nil
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
