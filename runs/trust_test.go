package runs

import (
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/live"
	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
)

// plantedSys is a live system on which a planted record's pids are what
// the planter wanted: every recorded pid is alive with its recorded start
// time, in the session the planter named, except the supervisor, which is
// gone. procs are the processes a /proc scan finds. It records every
// signal instead of sending it, so a wrong decision kills nothing real.
type plantedSys struct {
	self    outcome.Self
	sup     int // the planted supervisor pid: gone
	sid     int // the session the live "leader" is in
	procs   []proc.Stat
	signals []int
	tagged  bool // the processes carry the run's id: the planter names processes it did not start, which do not, unless the row says they do
}

// system is s as the rules see it. Every pid a planter names is alive,
// readable and busy.
func (s *plantedSys) system() System {
	return System{
		Host: live.Host{Boot: "boot", Self: s.self},
		Procs: &fakeProcs{
			probe: func(pid int, start uint64) (outcome.Liveness, proc.Stat) {
				if pid == s.sup {
					return outcome.Gone, proc.Stat{}
				}
				return outcome.Same, proc.Stat{PID: pid, PGID: pid, SID: s.sid, StartTime: start, State: 'S'}
			},
			processes:    func() ([]proc.Stat, error) { return s.procs, nil },
			groupAlive:   func(int) bool { return true },
			supervisorOf: func(proc.Stat, string, string) outcome.Liveness { return outcome.Gone },
			environHas:   func(int, ...string) bool { return s.tagged },
			usage: func(int, uint64) (proc.Usage, error) {
				return proc.Usage{CPUMS: 5000, RSSBytes: 1 << 30, PeakRSSBytes: 2 << 30}, nil
			},
		},
		Signal: func(pid int, _ unix.Signal) error {
			s.signals = append(s.signals, pid)
			return nil
		},
	}
}

// TestPlantedRecordsNeverSignalPidsNoRunCanHave: hand-made records that
// name pid 1 (kill(-1) reaches every process of the user), or agent-box's
// own pid, group or session, are never signalled, whatever a probe of
// those pids says; before, a record naming pid 1 with its real start time
// and a dead supervisor read "running" and process_kill called
// kill(-1, SIGTERM) (issue 9). The decision is outcome's; this checks that
// runs asks it and obeys, through a system that only records signals.
func TestPlantedRecordsNeverSignalPidsNoRunCanHave(t *testing.T) {
	me := outcome.Self{PID: 4000, PGID: 4001, SID: 4002}
	code := 0
	exited := func(r *runrecord.Record) {
		now := time.Now().UTC()
		r.Exit, r.FinishedAt, r.OutputClosed = &runrecord.Exit{Code: &code, At: now, CPUMS: 9, PeakMemoryBytes: 9}, &now, true
	}
	for _, tc := range []struct {
		name     string
		pid, sup int
		sid      int // the live leader's session
		mut      func(r *runrecord.Record)
		procs    []proc.Stat
		reason   outcome.Reason
	}{
		{name: "init", pid: 1, sup: 99, sid: 99, reason: outcome.ReasonForeignProcess},
		{name: "our-group", pid: me.PGID, sup: 99, sid: 99, reason: outcome.ReasonForeignProcess},
		{name: "our-pid", pid: me.PID, sup: 99, sid: 99, reason: outcome.ReasonForeignProcess},
		// The record calls our session its supervisor's, and names a
		// process in it (as our own session's members are).
		{name: "our-session", pid: 500, sup: me.SID, sid: me.SID, reason: outcome.ReasonForeignProcess},
		// A real leader's session, but not the one the record names.
		{name: "other-session", pid: 500, sup: 99, sid: 777, reason: outcome.ReasonForeignProcess},
		// The exit is recorded and members of "its group" live: the group
		// is ours, in our session.
		{name: "exited-our-group", pid: me.PGID, sup: me.SID, sid: me.SID, mut: exited,
			procs:  []proc.Stat{{PID: 4005, PPID: 4000, PGID: me.PGID, SID: me.SID, StartTime: 2, State: 'S'}},
			reason: outcome.ReasonForeignProcess},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newStore(t)
			rec := record(store, "boot")
			rec.PID, rec.SupervisorPID = tc.pid, tc.sup
			if tc.mut != nil {
				tc.mut(rec)
			}
			require.NoError(t, store.Create(rec))
			sys := &plantedSys{self: me, sup: tc.sup, sid: tc.sid, procs: tc.procs}
			m := &Manager{Store: store, Sys: sys.system()}

			run, err := m.Get(rec.Name, "")
			require.NoError(t, err)
			assert.Equal(t, outcome.Unknown, run.State, run.Reason)
			assert.Equal(t, tc.reason, run.Verdict.Reason, run.Reason)
			assert.False(t, run.Verdict.Signalable)
			assert.False(t, run.Verdict.MayBeAlive, "a planted record must not hold its name")
			assert.Empty(t, run.Survivors)
			// The pids it names are alive and busy (plantedSys),
			// and its exit figures are a planter's: none is shown.
			page, err := m.ListPage(ListQuery{})
			require.NoError(t, err)
			assert.Nil(t, page.Runs[0].Usage)

			for _, sig := range []unix.Signal{unix.SIGTERM, unix.SIGKILL, unix.SIGSTOP} {
				_, err = m.Kill(rec.Name, "", sig, 50*time.Millisecond)
				assert.ErrorIs(t, err, ErrNotSignalable)
			}
			assert.Empty(t, sys.signals, "signalled pids %v", sys.signals)
		})
	}
}

// The same record with its pids in bounds, and the leader in the gone
// supervisor's session and carrying the run's id in its environment (as
// a real run's leader is after its supervisor was SIGKILLed: the session
// id outlives its leader), is the run's, and its group is what is
// signalled: the test above fails for the pids, not for the fake.
func TestLeaderInItsGoneSupervisorsSessionIsSignalled(t *testing.T) {
	t.Parallel() // its own store; Kill waits out its bounded waits for a record nobody writes
	store := newStore(t)
	rec := record(store, "boot")
	rec.PID, rec.SupervisorPID = 500, 99
	require.NoError(t, store.Create(rec))
	sys := &plantedSys{self: outcome.Self{PID: 4000, PGID: 4001, SID: 4002}, sup: 99, sid: 99, tagged: true}
	m := &Manager{Store: store, Sys: sys.system()}
	run, err := m.Get(rec.Name, "")
	require.NoError(t, err)
	assert.Equal(t, outcome.ReasonUnsupervised, run.Verdict.Reason, run.Reason)
	// No supervisor vouches for what the leader's pid uses: none is shown.
	page, err := m.ListPage(ListQuery{})
	require.NoError(t, err)
	assert.Nil(t, page.Runs[0].Usage)
	_, err = m.Kill(rec.Name, "", unix.SIGKILL, 0)
	require.NoError(t, err)
	assert.Equal(t, []int{-500}, sys.signals)
}

// Issue 30: a user's background job whose login shell exited (nohup
// server & in an ssh session that closed) is in a session whose leader is
// dead, and leads its group. A planted record naming the dead shell as
// its supervisor and the job as its leader, with its real start time,
// read running, and process_kill SIGKILLed the job. Its environment does
// not carry the run's id: it is nobody's run, never signalled, and its
// name is free.
func TestOrphanOfADeadSessionLeaderIsNoRun(t *testing.T) {
	t.Parallel() // its own store; Kill waits out its bounded waits
	store := newStore(t)
	rec := record(store, "boot")
	rec.PID, rec.SupervisorPID = 500, 99
	require.NoError(t, store.Create(rec))
	job := proc.Stat{PID: 500, PGID: 500, SID: 99, StartTime: rec.PIDStartTime, State: 'S'}
	member := proc.Stat{PID: 501, PGID: 500, SID: 99, StartTime: rec.PIDStartTime + 1, State: 'S'}
	sys := &plantedSys{self: outcome.Self{PID: 4000, PGID: 4001, SID: 4002}, sup: 99, sid: 99, procs: []proc.Stat{job, member}}
	m := &Manager{Store: store, Sys: sys.system()}
	run, err := m.Get(rec.Name, "")
	require.NoError(t, err)
	assert.Equal(t, outcome.ReasonForeignProcess, run.Verdict.Reason, run.Reason)
	assert.False(t, run.Verdict.MayBeAlive)
	for _, sig := range []unix.Signal{unix.SIGTERM, unix.SIGKILL} {
		_, err = m.Kill(rec.Name, "", sig, 0)
		assert.ErrorIs(t, err, ErrNotSignalable)
	}

	// The same with the exit recorded: the job and its group's member are
	// no survivors of it.
	code := 0
	now := time.Now().UTC()
	rec.Exit, rec.FinishedAt, rec.OutputClosed = &runrecord.Exit{Code: &code, At: now}, &now, true
	sys.procs = []proc.Stat{member}
	sys.sup = 99
	require.NoError(t, store.Write(rec))
	run, err = m.Get(rec.Name, "")
	require.NoError(t, err)
	assert.Empty(t, run.Survivors)
	_, _ = m.Kill(rec.Name, "", unix.SIGKILL, 0)
	assert.Empty(t, sys.signals, "signalled %v", sys.signals)
}

// Issue 30: a planted record under a run id from the future was the
// newest run of a live name, so the agent's process_kill of the name
// reached what it named and left the live run running, and process_list
// showed it in the live run's place. An id from the future never stands
// for its name while the name has another run.
func TestRunIDFromTheFutureDoesNotShadowTheName(t *testing.T) {
	store := newStore(t)
	live := record(store, "boot")
	require.NoError(t, store.Create(live))
	planted := *live
	planted.RunID = "20991231T235959.000000000Z-aaaaaa"
	planted.PID, planted.SupervisorPID = 500, 600
	planted.LogPath = store.LogPath(planted.Name, planted.RunID)
	require.NoError(t, store.Create(&planted))
	m := &Manager{Store: store, Sys: fakeSys(alive)}

	run, err := m.Get(live.Name, "")
	require.NoError(t, err)
	assert.Equal(t, live.RunID, run.RunID)
	page, err := m.ListPage(ListQuery{})
	require.NoError(t, err)
	require.Len(t, page.Runs, 1)
	assert.Equal(t, live.RunID, page.Runs[0].RunID)
	// Both are there for whoever asks for every run, or for the run id.
	page, err = m.ListPage(ListQuery{All: true})
	require.NoError(t, err)
	assert.Len(t, page.Runs, 2)
	run, err = m.Get(live.Name, planted.RunID)
	require.NoError(t, err)
	assert.Equal(t, planted.RunID, run.RunID)
}

// A record copied under another name keeps the run id it was copied
// with, and so does the leader it names: only the name and the run id
// together tie a process to a run (from the audit: a copy under another
// name, its supervisor gone, read unsupervised and was signalled).
func TestCarriesRunIDWantsTheNameToo(t *testing.T) {
	id := runrecord.NewRunID(time.Now())
	cmd := exec.Command("sleep", "60")
	cmd.Env = []string{RunIDEnv + "=" + id, NameEnv + "=a", RunIDEnv + "=" + id}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sys := System{Procs: live.Procs{}}
	// Start returns at the exec's point of no return (vfork), a moment
	// before the kernel has laid out the new image's environment.
	require.Eventually(t, func() bool { return sys.carriesRunID(cmd.Process.Pid, "a", id) }, 10*time.Second, time.Millisecond)
	assert.False(t, sys.carriesRunID(cmd.Process.Pid, "b", id), "a copy under another name")
	assert.False(t, sys.carriesRunID(cmd.Process.Pid, "a", runrecord.NewRunID(time.Now())), "another run of the name")
}

// A run started before the clock was set back has a run id from the
// future, and it still stands for its name while it may be alive: it is
// listed, killed by the name's kill, and keeps the name in use (from the
// audit: it vanished behind an older exited run, and a second run of the
// name could start beside it).
func TestRunFromBeforeTheClockWasSetBackStandsForItsName(t *testing.T) {
	store := newStore(t)
	old := record(store, "boot")
	old.PID, old.SupervisorPID = 200, 199
	code := 0
	now := time.Now().UTC()
	old.Exit, old.FinishedAt, old.OutputClosed = &runrecord.Exit{Code: &code, At: now}, &now, true
	require.NoError(t, store.Create(old))
	live := *old
	live.RunID = runrecord.NewRunID(time.Now().Add(time.Hour))
	live.PID, live.SupervisorPID = 100, 99
	live.Exit, live.FinishedAt, live.OutputClosed = nil, nil, false
	live.LogPath = store.LogPath(live.Name, live.RunID)
	require.NoError(t, store.Create(&live))
	m := &Manager{Store: store, Sys: fakeSys(func(pid int, _ uint64) outcome.Liveness {
		if pid == 100 || pid == 99 {
			return outcome.Same
		}
		return outcome.Gone
	})}

	run, err := m.Get(old.Name, "")
	require.NoError(t, err)
	assert.Equal(t, live.RunID, run.RunID)
	assert.Equal(t, outcome.Running, run.State)
	page, err := m.ListPage(ListQuery{})
	require.NoError(t, err)
	require.Len(t, page.Runs, 1)
	assert.Equal(t, live.RunID, page.Runs[0].RunID)
	_, err = m.nameFree(&StartRequest{Name: old.Name})
	assert.ErrorIs(t, err, ErrNameInUse)
}
