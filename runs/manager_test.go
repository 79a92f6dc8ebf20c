package runs

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
)

func newStore(t *testing.T) *runrecord.Store {
	t.Helper()
	s, _, err := runrecord.Open(t.TempDir())
	require.NoError(t, err)
	return s
}

func record(store *runrecord.Store, boot string) *runrecord.Record {
	now := time.Now().UTC()
	r := &runrecord.Record{
		Version: runrecord.Version, Name: "r", RunID: runrecord.NewRunID(now), LogFormat: "raw", BootID: boot, StartedAt: now,
		PID: 100, PIDStartTime: 1, SupervisorPID: 99, SupervisorStartTime: 1,
		Spec: runrecord.Spec{Command: "true", Cwd: "/", CaptureMode: "combined", Stdin: "null"},
	}
	r.LogPath = store.LogPath(r.Name, r.RunID)
	return r
}

// A supervisor that records the exit and exits between our read of the
// record and our probe of its pid must not make the run look lost.
func TestViewRereadsAfterSupervisorVanished(t *testing.T) {
	store := newStore(t)
	rec := record(store, "boot")
	require.NoError(t, store.Create(rec))
	sys := fakeSys(func(pid int, start uint64) outcome.Liveness {
		if pid == rec.SupervisorPID {
			done := *rec
			code := 0
			done.Exit = &runrecord.Exit{Code: &code, At: time.Now().UTC()}
			done.FinishedAt = &done.Exit.At
			done.OutputClosed = true
			require.NoError(t, store.Write(&done))
		}
		return outcome.Gone
	})
	m := &Manager{Store: store, Sys: sys}
	run, err := m.Get("r", "")
	require.NoError(t, err)
	assert.Equal(t, outcome.Exited, run.State, run.Reason)
	require.NotNil(t, run.ExitCode)
	assert.Equal(t, 0, *run.ExitCode)
	assert.True(t, run.LogFinal())
}

func TestViewLostSupervisorStaysUnknown(t *testing.T) {
	store := newStore(t)
	require.NoError(t, store.Create(record(store, "boot")))
	m := &Manager{Store: store, Sys: fakeSys(gone)}
	run, err := m.Get("r", "")
	require.NoError(t, err)
	assert.Equal(t, outcome.Unknown, run.State)
	assert.Equal(t, outcome.ReasonSupervisorLost, run.Verdict.Reason)
	assert.False(t, run.Verdict.MayBeAlive, "a lost run must not block its name")
}

// A listing of many runs probes from one /proc snapshot; a run whose
// processes are missing from it (started after it was taken) is checked
// directly rather than declared lost.
func TestListProbesFromOneSnapshot(t *testing.T) {
	store := newStore(t)
	for i := range bulkProbe + 4 {
		r := record(store, "boot")
		r.Name = fmt.Sprintf("done%02d", i)
		r.LogPath = store.LogPath(r.Name, r.RunID)
		code := i
		r.Exit = &runrecord.Exit{Code: &code, At: time.Now().UTC()}
		r.OutputClosed = true
		require.NoError(t, store.Create(r))
	}
	live := record(store, "boot")
	live.Name = "live"
	live.LogPath = store.LogPath(live.Name, live.RunID)
	require.NoError(t, store.Create(live))

	direct := 0
	sys := fakeSys(func(pid int, start uint64) outcome.Liveness {
		direct++
		return outcome.Same // the live run's processes, started after the snapshot
	})
	m := &Manager{Store: store, Sys: sys}
	list, err := m.List("", true)
	require.NoError(t, err)
	require.Len(t, list, bulkProbe+5)
	for _, r := range list {
		if r.Name == "live" {
			assert.Equal(t, outcome.Running, r.State, r.Reason)
			continue
		}
		assert.Equal(t, outcome.Exited, r.State, r.Name)
	}
	assert.Equal(t, 2, direct, "only the live run's two pids are probed one by one")
}

func TestListPageNewestFirstWithCursor(t *testing.T) {
	store := newStore(t)
	var ids []string
	for i := range 7 {
		r := record(store, "boot")
		r.Name = fmt.Sprintf("n%d", i%3) // three names, runs interleaved in time
		r.RunID = runrecord.NewRunID(time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC))
		r.LogPath = store.LogPath(r.Name, r.RunID)
		code := 0
		r.Exit = &runrecord.Exit{Code: &code, At: time.Now().UTC()}
		r.OutputClosed = true
		require.NoError(t, store.Create(r))
		ids = append(ids, r.RunID)
	}
	m := &Manager{Store: store, Sys: fakeSys(gone)}
	got := func(p Page) []string {
		var s []string
		for _, r := range p.Runs {
			s = append(s, r.RunID)
		}
		sort.Strings(s)
		return s
	}
	p, err := m.ListPage(ListQuery{All: true, Limit: new(3)})
	require.NoError(t, err)
	assert.Equal(t, 7, p.Total)
	assert.Equal(t, ids[4:], got(p), "the newest three")
	assert.Equal(t, ids[4], p.NextBefore)
	p, err = m.ListPage(ListQuery{All: true, Limit: new(3), Before: p.NextBefore})
	require.NoError(t, err)
	assert.Equal(t, ids[1:4], got(p))
	p, err = m.ListPage(ListQuery{All: true, Limit: new(3), Before: p.NextBefore})
	require.NoError(t, err)
	assert.Equal(t, ids[:1], got(p))
	assert.Empty(t, p.NextBefore, "no older page")

	// Newest per name only: n0 ran at 0,3,6; n1 at 1,4; n2 at 2,5.
	p, err = m.ListPage(ListQuery{})
	require.NoError(t, err)
	assert.Equal(t, []string{ids[4], ids[5], ids[6]}, got(p))
	_, err = m.ListPage(ListQuery{Limit: new(-1)})
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = m.ListPage(ListQuery{Limit: new(0)})
	assert.ErrorIs(t, err, ErrInvalid, "limit 0 is given, not the default")
	_, err = m.ListPage(ListQuery{Name: "nope"})
	assert.ErrorIs(t, err, ErrNotFound)
}

// reusedProcs: the leader's pid (100) now names an unrelated process,
// while the supervisor (99) is alive and the parent of a survivor (200)
// that made a session of its own. With imposter, process 99 is not the
// run's supervisor, only a process with its pid and start time. Every pid
// uses plenty.
func reusedProcs(imposter bool) *fakeProcs {
	return &fakeProcs{
		probe: func(pid int, start uint64) (outcome.Liveness, proc.Stat) {
			if pid == 99 {
				return outcome.Same, proc.Stat{PID: 99, PGID: 99, SID: 99}
			}
			return outcome.Reused, proc.Stat{}
		},
		processes: func() ([]proc.Stat, error) {
			return []proc.Stat{
				{PID: 99, PPID: 1, PGID: 99, SID: 99, StartTime: 1, State: 'S'},
				{PID: 100, PPID: 1, PGID: 100, SID: 100, StartTime: 9999, State: 'S'},
				{PID: 200, PPID: 99, PGID: 200, SID: 200, StartTime: 3, State: 'S'},
			}, nil
		},
		groupAlive: func(int) bool { return true },
		children:   func(int) ([]int, error) { return []int{200}, nil },
		supervisorOf: func(proc.Stat, string, string) outcome.Liveness {
			if imposter {
				return outcome.Foreign
			}
			return outcome.Same
		},
		usage: func(int, uint64) (proc.Usage, error) {
			return proc.Usage{CPUMS: 1000, RSSBytes: 1 << 20, PeakRSSBytes: 1 << 20}, nil
		},
	}
}

// The live supervisor vouches for its descendants even when the leader's
// pid has been handed out again: they are still survivors, and the name is
// still in use.
func TestSurvivorsOfALiveSupervisorAfterLeaderPidReuse(t *testing.T) {
	store := newStore(t)
	rec := record(store, "boot")
	code := 0
	rec.Exit = &runrecord.Exit{Code: &code, At: time.Now().UTC()}
	rec.FinishedAt = &rec.Exit.At
	rec.OutputClosed = true
	require.NoError(t, store.Create(rec))
	m := &Manager{Store: store, Sys: fakeSystem(reusedProcs(false))}
	run, err := m.Get("r", "")
	require.NoError(t, err)
	assert.Equal(t, []int{200}, run.Survivors, "the supervisor's live child 200")
	assert.True(t, run.Verdict.MayBeAlive, "the name is freed while 200 lives")
	assert.True(t, run.Verdict.Signalable)
}

// A record that names, as its supervisor, a live process that is not the
// run's supervisor (planted, or copied from another run) gets no vouching
// from it: its descendants are not the run's, and nothing is signalable.
func TestImposterSupervisorVouchesForNothing(t *testing.T) {
	store := newStore(t)
	rec := record(store, "boot")
	require.NoError(t, store.Create(rec))
	m := &Manager{Store: store, Sys: fakeSystem(reusedProcs(true))}
	run, err := m.Get("r", "")
	require.NoError(t, err)
	assert.Empty(t, run.Survivors)
	assert.Equal(t, outcome.Unknown, run.State, run.Reason)
	assert.Equal(t, outcome.ReasonForeignRecord, run.Verdict.Reason)
	assert.False(t, run.Verdict.Signalable)
	page, err := m.ListPage(ListQuery{})
	require.NoError(t, err)
	assert.Nil(t, page.Runs[0].Usage, "the imposter's pids use plenty (reusedProcs), none of it the run's")
	_, err = m.Kill("r", "", 9, 0)
	assert.ErrorIs(t, err, ErrNotSignalable)
}
