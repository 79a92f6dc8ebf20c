package supervisor

import (
	"errors"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/capture"
	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
)

// statusEvery is how often the supervisor checks the log's status while the
// child runs, so a write error or the cap shows in the record promptly.
const statusEvery = 500 * time.Millisecond

func (s *supervisor) supervise(pid int, outs []output, stdin *stdinServer) error {
	sp := &s.spec
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

	exited := make(chan unix.WaitStatus, 1)
	go reap(pid, exited)

	var timeout, grace <-chan time.Time
	timedOut := false
	if sp.TimeoutS > 0 {
		timeout = time.After(time.Duration(sp.TimeoutS) * time.Second)
	}
	tick := time.NewTicker(statusEvery)
	defer tick.Stop()
	var lastStatus capture.Status

	// The deadline is the whole group's, not only the leader's: a member
	// that ignores the TERM outlives a leader that dies of it, and is
	// killed when the grace ends, even when it let go of the output (the
	// supervisor stays for the grace while the group has members).
	childDone, outputDone := false, false
	for !childDone || !outputDone || (grace != nil && groupInSession(pid)) {
		select {
		case ws := <-exited:
			childDone = true
			s.recordExit(ws, timedOut)
			if stdin != nil {
				stdin.Close()
			}
		case <-drained:
			outputDone = true
			drained = nil
		case <-timeout:
			timedOut = true
			timeout = nil
			signalGroup(pid, unix.SIGTERM, childDone)
			g := time.Duration(sp.KillGraceMS) * time.Millisecond
			if g <= 0 {
				g = DefaultKillGrace
			}
			grace = time.After(g)
		case <-grace:
			grace = nil
			signalGroup(pid, unix.SIGKILL, childDone)
		case <-tick.C:
			if st := s.log.Status(); st != lastStatus {
				lastStatus = st
				s.writeRecord(func(r *runrecord.Record) { applyStatus(r, st) })
			}
		}
	}
	cerr := s.log.Close()
	if s.reserve != "" {
		os.Remove(s.reserve)
	}
	st := s.log.Status()
	return errors.Join(cerr, s.writeRecord(func(r *runrecord.Record) {
		applyStatus(r, st)
		r.OutputClosed = true
	}))
}

func applyStatus(r *runrecord.Record, st capture.Status) {
	r.LogBytes = st.Bytes
	r.LogDropped = st.Dropped
	r.LogCapped = st.Capped
	if st.Err != nil && !errors.Is(st.Err, capture.ErrCapped) {
		r.LogError = st.Err.Error()
	}
}

func (s *supervisor) recordExit(ws unix.WaitStatus, timedOut bool) {
	now := time.Now().UTC()
	exit := &runrecord.Exit{At: now, TimedOut: timedOut}
	switch {
	case ws.Signaled():
		// runrecord owns the field's format: it names every signal,
		// real-time ones too (unix.SignalName has no name for them).
		exit.Signal = runrecord.SignalName(ws.Signal())
	default:
		code := ws.ExitStatus()
		exit.Code = &code
	}
	st := s.log.Status()
	s.writeRecord(func(r *runrecord.Record) {
		r.Exit = exit
		r.FinishedAt = &now
		applyStatus(r, st)
	})
}

// drain copies r to w until EOF. w never fails (capture's writers swallow
// errors), so the child's pipe is always emptied. capture's writers drain
// a pipe themselves (with splice(2) where they can).
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

// signalGroup sends sig to the run's process group, whose id is the
// leader's pid. Once the leader is reaped that pid may be handed out again,
// and the group id with it once the group is empty: then the group is ours
// only if it still has members in our session (a process group never spans
// sessions, and no process can join ours).
func signalGroup(pgid int, sig unix.Signal, leaderReaped bool) {
	if leaderReaped && !groupInSession(pgid) {
		return
	}
	unix.Kill(-pgid, sig)
}

// groupInSession reports whether process group pgid has a live member in
// the supervisor's session.
func groupInSession(pgid int) bool {
	sid, err := unix.Getsid(0)
	if err != nil {
		return false
	}
	members, _ := proc.GroupMembers(pgid)
	for _, m := range members {
		if st, err := proc.ReadStat(m); err == nil && st.SID == sid && !st.Dead() {
			return true
		}
	}
	return false
}

// reap waits for every child of the supervisor — as a subreaper it also
// inherits orphaned descendants — and sends the leader's status on exited.
func reap(leader int, exited chan<- unix.WaitStatus) {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			// ECHILD: nothing left to wait for.
			return
		}
		if pid == leader && (ws.Exited() || ws.Signaled()) {
			exited <- ws
		}
	}
}
