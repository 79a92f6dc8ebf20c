package runs

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agent-box/agent-box/cgroup"
	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
	"github.com/agent-box/agent-box/supervisor"
)

// Manager does everything to runs in one state directory.
type Manager struct {
	Store *runrecord.Store
	Sys   System
	// Supervisor is the command that runs supervisor.Main: normally
	// {os.Executable(), "supervise"}.
	Supervisor []string
	// StartTimeout bounds the wait for the supervisor's start report.
	StartTimeout time.Duration
	// Launch says how to start supervisors: LaunchSetsid or LaunchSystemd
	// (see ChooseLaunch). It is asked at each start, not at start-up: on a
	// systemd box the answer costs a D-Bus round trip (busctl), which a
	// server that only lists and reads must not pay before its first
	// reply. Nil means LaunchSetsid.
	Launch func() string
	// Env is the environment agent-box passes on: each run's child starts
	// from it, with the run's env and secret_env laid over it, and
	// supervisors get it as it is. Nil is an empty environment, not
	// agent-box's own: main passes os.Environ().
	Env []string
	// Logf writes one line of diagnostics for the operator (main: stderr,
	// never stdout, which is the protocol's). Nil discards.
	Logf func(format string, args ...any)
	// Waits bounds process_wait, and holds the supervisors' waits given
	// with each run (TimeoutGrace) and each write (StdinWrite); zero fields
	// take DefaultWaitPolicy's.
	Waits WaitPolicy
	// Words name the operations messages point to; zero: the MCP tools.
	Words Words
	// DefaultLimits cap every run that does not set its own (main:
	// --default-limits); nil: none.
	DefaultLimits *runrecord.Limits
	// Cgroups is where this process's cgroups are, asked when a run has
	// limits (nil: cgroup.Self); tests substitute a box without them.
	Cgroups func() (*cgroup.Hierarchy, error)
	// SystemdScopes says whether systemd can give a supervisor a scope of
	// its own, which a run with limits needs under cgroup v2 (nil:
	// live.SystemdScopes); tests substitute one.
	SystemdScopes func() error

	spares   *supervisor.Spares // KeepSpare's
	requests *requests          // the request journal, once a call brings a request id
}

// KeepSpare makes m, a server's Manager, start its runs' supervisors
// ahead: once a start has been asked for, it keeps one spare supervisor
// ready (supervisor.Spares), so that the next start does not wait for a
// supervisor's exec and runtime start. A start that finds none launches
// one as before. The returned stop ends the spare; a server that exits
// without it leaves none either (a spare ends when its server's pipe
// closes).
//
// Nothing is launched before the first start: a server that only lists
// and reads (most connections, and every CLI call) must not pay for a
// supervisor it never uses, nor compete with its own start-up for the CPU.
func (m *Manager) KeepSpare() (stop func()) {
	m.spares = supervisor.NewSpares(m.Supervisor, m.Env, m.Logf)
	return m.spares.Close
}

// fillSpare launches the next spare, if m keeps one, unless supervisors
// go to systemd scopes, which a spare is not in: then it launches none
// from then on.
func (m *Manager) fillSpare() {
	switch {
	case m.spares == nil:
	case m.launchMode() == LaunchSetsid:
		m.spares.Fill()
	default:
		m.spares.Close()
	}
}

// launchMode is how supervisors are started: LaunchSetsid or
// LaunchSystemd.
func (m *Manager) launchMode() string {
	if m.Launch == nil {
		return LaunchSetsid
	}
	return m.Launch()
}

// logf writes to the Manager's Logf, if main gave it one.
func (m *Manager) logf(format string, args ...any) {
	if m.Logf != nil {
		m.Logf(format, args...)
	}
}

// Run is one run as the tools and the CLI show it.
type Run struct {
	Name        string            `json:"name"`
	RunID       string            `json:"run_id"`
	State       outcome.State     `json:"state"`
	Reason      string            `json:"reason"`
	PID         int               `json:"pid,omitempty"`
	ExitCode    *int              `json:"exit_code,omitempty" jsonschema:"exit status when the process exited normally; absent when it was killed by a signal or has not exited"` // absent, not null: one JSON type (tools/schema.go)
	Signal      string            `json:"signal,omitempty" jsonschema:"signal that killed it, e.g. SIGKILL"`
	TimedOut    bool              `json:"timed_out,omitempty" jsonschema:"the run's timeout_s killed it"`
	OOMKilled   bool              `json:"oom_killed,omitempty" jsonschema:"the kernel killed a process of the run at its memory limit"`                                                        // its cgroup's count
	PidsMaxHit  int64             `json:"pids_max_hit,omitempty" jsonschema:"forks refused at its pids limit"`                                                                                 // its cgroup's count
	StatusOf    string            `json:"status_of,omitempty" jsonschema:"whose pid and exit status these are: program, or shell (/bin/sh's, for a compound command: pipes, lists, builtins)"` // StatusOfProgram or StatusOfShell
	Survivors   []int             `json:"survivors,omitempty" jsonschema:"pids of the run's processes still alive after its leader exited (its group's members, and any that left the group)"`
	Command     string            `json:"command,omitempty"`
	Argv        []string          `json:"argv,omitempty"`
	Cwd         string            `json:"cwd,omitempty"`
	CaptureMode string            `json:"capture_mode,omitempty"`
	Stdin       string            `json:"stdin,omitempty"`
	Pty         bool              `json:"pty,omitempty" jsonschema:"runs on a terminal of cols x rows"`
	Cols        int               `json:"cols,omitempty"`
	Rows        int               `json:"rows,omitempty"`
	StartedAt   *time.Time        `json:"started_at,omitempty"`
	FinishedAt  *time.Time        `json:"finished_at,omitempty"`
	LogPath     string            `json:"log_path,omitempty"`
	LogBytes    int64             `json:"log_bytes"`
	LogDropped  int64             `json:"log_dropped,omitempty" jsonschema:"Output bytes missing from the log's end (cap or write error)."`
	LogCapped   bool              `json:"log_capped,omitempty"`
	LogError    string            `json:"log_error,omitempty"`
	Limits      *runrecord.Limits `json:"limits,omitempty" jsonschema:"the caps the run was started under"`
	Usage       *Usage            `json:"usage,omitempty" jsonschema:"what its processes use (running) or used (exited); from: cgroup (its processes; peak: the most it was charged, as memory_mb counts), proc (summed over its live processes; peak: the sum of their own peaks) or exit (recorded then)"` // filled by listings and waits (withUsage), not by Get
	Verdict     outcome.Verdict   `json:"-"`

	rec      *runrecord.Record
	supAlive bool
}

// LogFinal reports whether the log can no longer grow: the supervisor saw
// every writer close the output, or there is no supervisor left to write.
func (r *Run) LogFinal() bool {
	return r.rec == nil || r.rec.OutputClosed || !r.supAlive
}

// Ended reports whether waiting for the run is over: its exit is recorded
// or its state can no longer become "exited" (unknown).
func (r *Run) Ended() bool {
	return r.State != outcome.Running
}

// ShellStatus is the run's exit status as a shell reports it: its exit
// code, or 128+N when signal N ended it (128 for a signal whose number is
// not known here). ok is false when the run has neither (it runs, or its
// end is unknown).
func (r *Run) ShellStatus() (status int, ok bool) {
	switch {
	case r.ExitCode != nil:
		return *r.ExitCode, true
	case r.Signal != "":
		if sig, ok := proc.SignalNumber(r.Signal); ok {
			return 128 + int(sig), true
		}
		return 128, true
	}
	return 0, false
}

func (m *Manager) view(e runrecord.Entry, idx *procIndex) Run {
	run := Run{Name: e.Name, RunID: e.RunID}
	if e.Err != nil {
		run.State = outcome.Unknown
		run.Reason = string(outcome.ReasonCorrupt) + ": " + e.Err.Error()
		return run
	}
	rec := e.Record
	in, facts := m.probe(rec, &run, idx)
	if !in.ExitRecorded && in.SupervisorPID > 0 && facts.BootID == rec.BootID && facts.Supervisor != outcome.Same {
		// The record was read before the probe. A supervisor that wrote
		// the exit and then exited in between would make a finished run
		// look lost; its writes all precede its death, so a second read,
		// after the probe saw it gone, has the last word.
		if again, err := m.Store.Read(rec.Name, rec.RunID); err == nil {
			rec = again
			in, facts = m.probe(rec, &run, idx)
		}
	}
	run.rec = rec
	v := outcome.Decide(in, facts)
	if !v.Signalable {
		// Outcome did not vouch for them (a pid no run can have, a leader
		// that is someone else's): they are not the run's to show.
		run.Survivors = nil
	}
	run.Verdict = v
	run.State = v.State
	run.Reason = describe(v.Reason, rec, run.Survivors, m.words())
	if v.LeaderAlive && run.supAlive && rec.Limits != nil {
		if broken := m.capsBroken(rec, idx); broken != "" {
			run.Reason += "; " + broken
		}
	}
	run.PID = rec.PID
	if rec.Exit != nil {
		run.ExitCode = rec.Exit.Code
		run.Signal = rec.Exit.Signal
		run.TimedOut = rec.Exit.TimedOut
		run.OOMKilled = rec.Exit.OOMKilled
		run.PidsMaxHit = max(rec.Exit.PidsMaxHit, 0)
	}
	run.Command = rec.Command
	run.Argv = rec.Argv
	run.StatusOf = statusOf(rec)
	run.Cwd = rec.Cwd
	run.CaptureMode = rec.CaptureMode
	run.Stdin = rec.Stdin
	if rec.Pty {
		run.Pty, run.Cols, run.Rows = true, rec.Cols, rec.Rows
	}
	started := rec.StartedAt
	run.StartedAt = &started
	run.FinishedAt = rec.FinishedAt
	// Where the supervisor writes the log, not the path the record names:
	// a state dir that was moved or restored elsewhere still shows its own
	// logs, and a record edited to name another file is never read.
	run.LogPath = m.Store.LogPath(run.Name, run.RunID)
	run.LogBytes = rec.LogBytes
	if !rec.OutputClosed {
		// The supervisor updates log_bytes only now and then; the file
		// itself is the truth while output is still arriving.
		// Lstat: a symlink planted in place of the log is never followed.
		if fi, err := os.Lstat(run.LogPath); err == nil && fi.Mode().IsRegular() {
			run.LogBytes = fi.Size()
		}
	}
	run.LogDropped = max(rec.LogDropped, 0)
	run.LogCapped = rec.LogCapped
	run.LogError = rec.LogError
	run.Limits = rec.Limits
	return run
}

// describe turns a reason code into the sentence the agent reads.
func describe(r outcome.Reason, rec *runrecord.Record, survivors []int, w *Words) string {
	switch r {
	case outcome.ReasonExited, outcome.ReasonExitedSurvivors:
		var s string
		switch {
		case rec.Exit.Signal != "":
			s = "killed by " + rec.Exit.Signal
			if outOfMemory(rec.Exit) {
				s += ": out of memory" + memoryLimit(rec)
			}
		case rec.Exit.Code != nil:
			s = "exit code " + strconv.Itoa(*rec.Exit.Code)
		}
		if rec.Exit.TimedOut {
			s += " (timed out after " + strconv.Itoa(rec.TimeoutS) + "s)"
		}
		if rec.Exit.OOMKilled && !outOfMemory(rec.Exit) {
			s += "; out of memory: the kernel killed a process of the run" + memoryLimit(rec)
		}
		if rec.Exit.PidsMaxHit > 0 {
			s += "; " + pidsCapHits(rec)
		}
		if len(survivors) > 0 {
			s += fmt.Sprintf("; %d process(es) of the run still running: %s", len(survivors), joinInts(survivors))
		}
		if !rec.OutputClosed && len(survivors) == 0 {
			s += "; output not closed yet (the supervisor is draining it, or a descendant holds it open)"
		}
		return s
	case outcome.ReasonRebooted:
		return "recorded on another boot; the machine rebooted and the exit was never recorded"
	case outcome.ReasonRunning:
		return "running"
	case outcome.ReasonUnsupervised:
		return "running, but its supervisor is gone: its exit will not be recorded"
	case outcome.ReasonExiting:
		s := "process gone; its supervisor is about to record the exit"
		if len(survivors) > 0 {
			s += fmt.Sprintf("; %d process(es) of the run still running: %s", len(survivors), joinInts(survivors))
		}
		return s
	case outcome.ReasonSupervisorLost:
		return "process and supervisor are gone and no exit was recorded"
	case outcome.ReasonLostSurvivors:
		return fmt.Sprintf("process and supervisor are gone and no exit was recorded; %d process(es) of its group still running: %s (%s reaches them)", len(survivors), joinInts(survivors), w.Kill)
	case outcome.ReasonForeignRecord:
		return fmt.Sprintf("the record is not this run's: its supervisor pid %d is a live process that does not supervise this run (a planted or copied record); nothing it names is signalled", rec.SupervisorPID)
	case outcome.ReasonForeignProcess:
		return fmt.Sprintf("the record is not this run's: its pid %d is not a process of the run (a planted or edited record, or a pid no run can have); nothing it names is signalled", rec.PID)
	case outcome.ReasonStarting:
		return "starting"
	case outcome.ReasonStartInterrupted:
		return "start was interrupted before the process was recorded"
	case outcome.ReasonStartFailed:
		return "could not start: " + rec.StartError
	}
	return string(r)
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, " ")
}

// List returns runs sorted by name then run id, every one up to
// MaxListLimit (the newest): what process_remove and the CLI's ps walk.
// With all false only the newest run of each name is listed.
func (m *Manager) List(name string, all bool) ([]Run, error) {
	page, err := m.ListPage(ListQuery{Name: name, All: all, Limit: new(MaxListLimit)})
	sort.SliceStable(page.Runs, func(i, j int) bool {
		a, b := page.Runs[i], page.Runs[j]
		return a.Name < b.Name || a.Name == b.Name && a.RunID < b.RunID
	})
	return page.Runs, err
}

// Get returns one run: runID, or the newest run of name when runID is "".
func (m *Manager) Get(name, runID string) (Run, error) {
	if err := runrecord.ValidName(name); err != nil {
		return Run{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	var e runrecord.Entry
	idx := &procIndex{sys: m.Sys}
	if runID == "" {
		index, err := m.Store.Index(name)
		if err != nil {
			if errors.Is(err, runrecord.ErrNotFound) {
				return Run{}, fmt.Errorf("%w: no run named %q (%s shows the runs there are)", ErrNotFound, name, m.words().List)
			}
			return Run{}, err
		}
		if index[0].Err != nil { // a name dir that cannot be listed
			return Run{}, index[0].Err
		}
		id := m.standing(name, index[0].IDs, time.Now(), idx)
		rec, err := m.Store.Read(name, id)
		e = runrecord.Entry{Name: name, RunID: id, Record: rec, Err: err}
	} else {
		if err := runrecord.ValidRunID(runID); err != nil {
			return Run{}, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		rec, err := m.Store.Read(name, runID)
		e = runrecord.Entry{Name: name, RunID: runID, Record: rec, Err: err}
		if errors.Is(err, runrecord.ErrNotFound) {
			return Run{}, fmt.Errorf("%w: run %q has no run id %q (%s shows them)", ErrNotFound, name, runID, m.words().ListAll)
		}
		if err != nil && !errors.Is(err, runrecord.ErrCorrupt) && !errors.Is(err, runrecord.ErrUnsupportedVersion) {
			return Run{}, err
		}
	}
	return m.view(e, idx), nil
}

// standing returns the run id of name's ids (sorted) that stands for the
// name at now: runrecord.Newest, which passes over run ids from the
// future, unless one of those may still be alive: a run started before
// the clock was set back, which then stands for its name as it did. A
// planted record under a future id names processes it did not start, so
// it is never alive (outcome), and never stands for the name.
func (m *Manager) standing(name string, ids []string, now time.Time, idx *procIndex) string {
	id := runrecord.Newest(ids, now)
	for i := len(ids) - 1; i >= 0 && ids[i] > id; i-- {
		rec, err := m.Store.Read(name, ids[i])
		if err == nil && m.view(runrecord.Entry{Name: name, RunID: ids[i], Record: rec}, idx).Verdict.MayBeAlive {
			return ids[i]
		}
	}
	return id
}
