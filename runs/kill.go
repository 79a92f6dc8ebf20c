package runs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/live"
	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
)

// Signals process_kill accepts, by the names agents use.
var Signals = map[string]unix.Signal{
	"TERM": unix.SIGTERM, "INT": unix.SIGINT, "HUP": unix.SIGHUP, "QUIT": unix.SIGQUIT,
	"KILL": unix.SIGKILL, "USR1": unix.SIGUSR1, "USR2": unix.SIGUSR2,
	"STOP": unix.SIGSTOP, "CONT": unix.SIGCONT,
}

// SignalNames lists Signals' keys in a stable order, for schemas and errors.
var SignalNames = []string{"TERM", "INT", "HUP", "QUIT", "KILL", "USR1", "USR2", "STOP", "CONT"}

// ParseSignal accepts "TERM", "SIGTERM" or "sigterm"; "" is TERM.
func ParseSignal(s string) (unix.Signal, error) {
	if s == "" {
		return unix.SIGTERM, nil
	}
	up := strings.TrimPrefix(strings.ToUpper(s), "SIG")
	if sig, ok := Signals[up]; ok {
		return sig, nil
	}
	return 0, invalid("signal %q is not one of %s", s, strings.Join(SignalNames, " "))
}

// MaxGrace bounds grace_ms.
const MaxGrace = 10 * time.Minute

// checkGrace is the rule for grace_ms, of process_kill and process_restart.
func (m *Manager) checkGrace(grace time.Duration) error {
	return inRange(m.arg("grace_ms"), grace, time.Millisecond, MaxGrace)
}

// KillResult says what process_kill did.
type KillResult struct {
	Run        Run    `json:"run"`
	Signal     string `json:"signal,omitempty"`
	Signalled  []int  `json:"signalled_groups,omitempty" jsonschema:"process group ids signalled"`
	Outside    []int  `json:"signalled_pids,omitempty" jsonschema:"processes of the run outside its group, signalled one by one"`
	Escalated  bool   `json:"escalated,omitempty"` // SIGKILL followed after grace
	AlreadyEnd bool   `json:"already_exited,omitempty"`
	Message    string `json:"message"`
}

// Kill signals the run's whole process group. It refuses, signalling
// nothing, unless the outcome matrix says the group is provably the run's.
// The run's live supervisor sends the signal and the SIGKILL after the
// grace (askSupervisor), so that the SIGKILL comes even when this server
// dies during the grace.
func (m *Manager) Kill(name, runID string, sig unix.Signal, grace time.Duration) (KillResult, error) {
	if err := m.checkGrace(grace); err != nil {
		return KillResult{}, err
	}
	run, err := m.Get(name, runID)
	if err != nil {
		return KillResult{}, err
	}
	// A leader that has just died leaves the run "exiting" until its
	// supervisor writes the exit; only then is it known whether members of
	// its group live on, and whether they may be signalled.
	run = m.settled(run)
	res := KillResult{Run: run, Signal: unix.SignalName(sig)}
	v := run.Verdict
	if run.State == outcome.Exited && len(run.Survivors) == 0 {
		res.AlreadyEnd = true
		res.Message = fmt.Sprintf("run %s already exited (%s); nothing signalled", run.RunID, run.Reason)
		return res, nil
	}
	if !v.Signalable && run.PID > 1 && !m.Sys.Self.MayBeRun(run.PID) && run.State == outcome.Running {
		return KillResult{}, fmt.Errorf("%w: run %q (run id %s) is %s, but its process group %d is this agent-box's own (it runs inside the run), so nothing was signalled; kill it from outside",
			ErrNotSignalable, name, run.RunID, run.State, run.PID)
	}
	if !v.Signalable {
		return KillResult{}, fmt.Errorf("%w: run %q (run id %s) is %s: %s; its pid %d is not provably the run's process, so nothing was signalled",
			ErrNotSignalable, name, run.RunID, run.State, run.Reason, run.PID)
	}
	pgid := run.PID
	asked := m.askSupervisor(run, sig, grace)
	var group bool
	var outside []int
	if asked != nil {
		defer asked.Close()
		group, outside = asked.Group != 0, asked.Outside
	} else if group, outside, err = m.signalRun(run, sig); err != nil {
		return KillResult{}, err
	}
	if !group && len(outside) == 0 {
		res.Run, _ = m.Get(name, run.RunID)
		res.Message = fmt.Sprintf("process group %d was already gone; nothing signalled", pgid)
		return res, nil
	}
	if group {
		res.Signalled = []int{pgid}
		res.Message = fmt.Sprintf("sent %s to process group %d", res.Signal, pgid)
	} else {
		res.Message = fmt.Sprintf("sent %s", res.Signal)
	}
	if len(outside) > 0 {
		res.Outside = outside
		res.Message += fmt.Sprintf(" and to %d process(es) of the run outside it: %s", len(outside), joinInts(outside))
	}
	if grace > 0 && sig != unix.SIGKILL && m.escalated(asked, name, run.RunID, grace) {
		res.Escalated = true
		res.Message += fmt.Sprintf("; still alive after %s, sent SIGKILL", grace)
	}
	// Give the supervisor a moment to record the exit so the answer can
	// show it; not waiting would only make the state read "exiting".
	m.waitRecorded(name, run.RunID, 2*time.Second)
	res.Run, _ = m.Get(name, run.RunID)
	return res, nil
}

// signalRun sends sig to the run's processes that outcome.Targets picks:
// the leader's process group, and each process of the run outside it (one
// that made a group or a session of its own), which a live supervisor
// names as its descendants. group reports whether the group was there to
// signal.
func (m *Manager) signalRun(run Run, sig unix.Signal) (group bool, outside []int, err error) {
	pgid := run.PID
	self := m.Sys.Self
	if !run.Verdict.Signalable || !self.MayBeRun(pgid) {
		// Decide already refused these; a kill(2) of pid 0, -1 or our own
		// group must not depend on every caller having asked it.
		return false, nil, fmt.Errorf("%w: pid %d is not provably the run's", ErrNotSignalable, pgid)
	}
	group, targets := outcome.Targets(m.targetFacts(run))
	for _, pid := range targets {
		if m.Sys.signal(pid, sig) == nil {
			outside = append(outside, pid)
		}
	}
	if !group {
		return false, outside, nil
	}
	switch err := m.Sys.signal(-pgid, sig); {
	case err == nil:
		return true, outside, nil
	case errors.Is(err, unix.ESRCH):
		return false, outside, nil
	default:
		return false, outside, fmt.Errorf("signalling process group %d: %w", pgid, err)
	}
}

// targetFacts gathers what outcome.Targets decides from: the verdict, the
// record, and one snapshot of /proc. Without a snapshot only a live
// leader's group is reached.
func (m *Manager) targetFacts(run Run) outcome.TargetFacts {
	f := outcome.TargetFacts{Group: run.PID, LeaderAlive: run.Verdict.LeaderAlive, Self: m.Sys.Self}
	procs, err := m.Sys.Procs.Processes()
	if err != nil || run.rec == nil {
		return f
	}
	f.Supervisor, f.LeaderStart = run.rec.SupervisorPID, run.rec.PIDStartTime
	if run.supAlive && supervisorIn(procs, run.rec) {
		f.Descendants = proc.Facts(proc.Descendants(procs, run.rec.SupervisorPID, m.Sys.Procs.IsSupervisor))
	}
	f.Procs = make([]outcome.Proc, len(procs))
	for i, p := range procs {
		f.Procs[i] = runFact(m.Sys, p, run.rec)
	}
	return f
}

// supervisorIn reports whether the snapshot holds rec's supervisor: its
// pid with its start time.
func supervisorIn(procs []proc.Stat, rec *runrecord.Record) bool {
	for _, p := range procs {
		if p.PID == rec.SupervisorPID {
			return p.StartTime == rec.SupervisorStartTime
		}
	}
	return false
}

// waitGroupGone waits until no process of the run may be alive. A run
// that reads "exiting" (leader dead, exit not yet written) is not gone:
// its processes that ignored the signal may live on.
func (m *Manager) waitGroupGone(name, runID string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		r, err := m.Get(name, runID)
		if err != nil || !r.Verdict.MayBeAlive {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		// Survivors that die write no record: poll.
		time.Sleep(10 * time.Millisecond)
	}
}

// settleLimit bounds how long a kill waits for a supervisor to write an
// exit it has already seen.
const settleLimit = 2 * time.Second

// settled returns run once it is no longer "exiting", or as it is after
// settleLimit.
func (m *Manager) settled(run Run) Run {
	if run.Verdict.Reason != outcome.ReasonExiting {
		return run
	}
	return m.waitUntil(run.Name, run.RunID, settleLimit, func(r Run) bool { return r.Verdict.Reason != outcome.ReasonExiting }, run)
}

// waitRecorded waits until the run's exit is recorded and its output
// drained (or the supervisor is gone), at most d.
func (m *Manager) waitRecorded(name, runID string, d time.Duration) {
	m.waitUntil(name, runID, d, func(r Run) bool { return r.Ended() && r.LogFinal() }, Run{})
}

// waitUntil waits, at most d, until done holds for the run, waking on
// every replacement of its record. It returns the run as last read, or
// last if it could not be read at all.
func (m *Manager) waitUntil(name, runID string, d time.Duration, done func(Run) bool, last Run) Run {
	deadline := time.Now().Add(d)
	// Watch before reading, so that a record written in between wakes us.
	watch := live.WatchDirs(live.WatchRecord, m.Store.RunDir(name, runID))
	defer watch.Close()
	for {
		r, err := m.Get(name, runID)
		if err != nil {
			return last
		}
		last = r
		if done(r) || !time.Now().Before(deadline) {
			return last
		}
		watch.Wait(context.Background(), time.Until(deadline))
	}
}
