package runs

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/wire"
)

func TestWaitBound(t *testing.T) {
	p := DefaultWaitPolicy
	d := func(v time.Duration) *time.Duration { return &v }
	for _, c := range []struct {
		asked     *time.Duration
		watched   bool
		want      time.Duration
		shortened bool
		err       bool
	}{
		{nil, false, 30 * time.Second, false, false},
		{nil, true, 30 * time.Second, false, false},
		{d(0), false, 0, false, false},
		{d(50 * time.Second), false, 50 * time.Second, false, false},
		{d(51 * time.Second), false, 50 * time.Second, true, false},
		{d(10 * time.Minute), false, 50 * time.Second, true, false},
		{d(10 * time.Minute), true, 10 * time.Minute, false, false},
		{d(75 * time.Second), true, 75 * time.Second, false, false},
		{d(10*time.Minute + 1), true, 0, false, true},
		{d(-1), false, 0, false, true},
	} {
		got, shortened, err := p.bound(c.asked, c.watched)
		if (err != nil) != c.err || got != c.want || shortened != c.shortened {
			t.Errorf("bound(%v, watched %v) = %v, %v, %v; want %v, %v, err %v", c.asked, c.watched, got, shortened, err, c.want, c.shortened, c.err)
		}
	}
}

// A wait that sends no progress sleeps between its rechecks: a progress
// time that never moves on must not turn the wait into a busy loop
// (before: one read and probe after another, 100,000 a second).
func TestWaitWithoutProgressDoesNotSpin(t *testing.T) {
	t.Parallel() // its own store and fake system; most of it is a 700 ms wait, twice
	store := newStore(t)
	rec := record(store, "boot")
	require.NoError(t, store.Create(rec))
	var probes atomic.Int64 // every probe of a live process
	m := &Manager{Store: store, Sys: fakeSys(func(int, uint64) outcome.Liveness {
		probes.Add(1)
		return outcome.Same
	}), Waits: WaitPolicy{ProgressEvery: 20 * time.Millisecond}}
	d := 700 * time.Millisecond

	probes.Store(0)
	res, err := m.Wait(context.Background(), WaitRequest{Names: []string{"r"}, Timeout: &d})
	require.NoError(t, err)
	require.True(t, res.WaitTimedOut)
	assert.Less(t, probes.Load(), int64(40), "probes in a %s wait without progress", d)

	probes.Store(0)
	run, err := m.Get("r", "")
	require.NoError(t, err)
	req, began := readyWithin(&ReadyProbe{Log: "never"}, d)
	_, err = checkProbe(*req.Ready)
	require.NoError(t, err)
	ready := m.awaitReady(context.Background(), run, req, began)
	require.False(t, ready.Ready)
	assert.Less(t, probes.Load(), int64(60), "probes in a %s ready wait without progress (one poll every %s)", d, readyPoll)
}

// A progress token alone lets a wait for a run's end block up to the
// policy's most (issue 33: the description promised 10 min, the call
// ended at the 30 s default); an asked timeout is named in its refusal
// as the caller spelt it.
func TestWaitBoundWithAToken(t *testing.T) {
	p := DefaultWaitPolicy
	got, shortened, err := p.waitBound("timeout_ms", nil, true)
	require.NoError(t, err)
	assert.Equal(t, p.Max, got, "a token and no timeout_ms")
	assert.False(t, shortened)
	got, _, err = p.waitBound("timeout_ms", nil, false)
	require.NoError(t, err)
	assert.Equal(t, p.Default, got, "no token, no timeout_ms")
	asked := 2 * time.Second
	got, _, err = p.waitBound("wait_ms", &asked, true)
	require.NoError(t, err)
	assert.Equal(t, asked, got, "asked, with a token")
	asked = -time.Millisecond
	_, _, err = p.waitBound("wait_ms", &asked, false)
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "wait_ms")

	// connect reckons a re-sent wait's time left from these.
	assert.EqualValues(t, wire.WaitDefaultMS, p.Default.Milliseconds())
	assert.EqualValues(t, wire.WaitUnwatchedMS, p.Unwatched.Milliseconds())
	assert.EqualValues(t, wire.WaitMaxMS, p.Max.Milliseconds())
}

// names with All waits for every run and answers each end; without All
// the answer names the runs still running, so that a caller waiting again
// can drop the one that ended.
func TestWaitForAll(t *testing.T) {
	m := supervisedManager(t)
	startRun(t, m, "one", "sh", "-c", "echo one; exit 1")
	startRun(t, m, "two", "sh", "-c", "echo two; sleep 0.3; exit 2")
	startRun(t, m, "long", "sleep", "30")
	ctx := context.Background()
	d := func(v time.Duration) *time.Duration { return &v }

	res, err := m.Wait(ctx, WaitRequest{Names: []string{"one", "two"}, All: true, Timeout: d(20 * time.Second)})
	require.NoError(t, err)
	require.False(t, res.WaitTimedOut)
	require.Equal(t, "one", res.Run.Name, "the first named that ended")
	assert.Equal(t, "one\n", res.Output)
	require.Len(t, res.Ends, 1)
	assert.Equal(t, "two", res.Ends[0].Run.Name)
	assert.Equal(t, outcome.Exited, res.Ends[0].Run.State)
	assert.Equal(t, "two\n", res.Ends[0].Output)
	assert.True(t, res.Ends[0].DurationKnown)
	assert.Empty(t, res.Others)
	assert.Empty(t, res.Running)

	// The bound is the whole wait's: those ended, and those still running.
	res, err = m.Wait(ctx, WaitRequest{Names: []string{"long", "one", "two"}, All: true, Timeout: d(300 * time.Millisecond)})
	require.NoError(t, err)
	assert.True(t, res.WaitTimedOut)
	assert.Equal(t, "one", res.Run.Name)
	require.Len(t, res.Ends, 1)
	assert.Equal(t, "two", res.Ends[0].Run.Name)
	require.Len(t, res.Others, 1)
	assert.Equal(t, "long", res.Others[0].Name)
	assert.Equal(t, []string{"long"}, res.Running)

	// Without All: the first end, and who is still running.
	res, err = m.Wait(ctx, WaitRequest{Names: []string{"long", "two"}, Timeout: d(20 * time.Second)})
	require.NoError(t, err)
	assert.False(t, res.WaitTimedOut)
	assert.Equal(t, "two", res.Run.Name)
	assert.Empty(t, res.Ends)
	assert.Equal(t, []string{"long"}, res.Running)
}

// wait_ms makes process_start answer the run's end as process_wait does;
// a run that ended by the answer comes with its end without wait_ms.
func TestStartWaitsForTheEnd(t *testing.T) {
	m := supervisedManager(t)
	ctx := context.Background()
	res, err := m.Start(ctx, StartRequest{Name: "hi", Spec: Spec{Command: "echo hi; exit 4", Cwd: "/"}, WaitMS: 20000})
	require.NoError(t, err)
	require.NotNil(t, res.Waited)
	assert.False(t, res.Waited.WaitTimedOut)
	assert.Equal(t, outcome.Exited, res.Run.State, "the run as of the answer")
	require.NotNil(t, res.Run.ExitCode)
	assert.Equal(t, 4, *res.Run.ExitCode)
	assert.Equal(t, "hi\n", res.Waited.Output)

	res, err = m.Start(ctx, StartRequest{Name: "long", Spec: Spec{Argv: []string{"sleep", "30"}, Cwd: "/"}, WaitMS: 200})
	require.NoError(t, err)
	t.Cleanup(func() { m.Kill("long", "", unix.SIGKILL, 0) })
	require.NotNil(t, res.Waited)
	assert.True(t, res.Waited.WaitTimedOut)
	assert.Equal(t, outcome.Running, res.Run.State)

	// Without wait_ms: no end for a running run, an end for one that has
	// ended (as if it had by the answer).
	quick := StartRequest{Name: "quick", Spec: Spec{Command: "echo quick", Cwd: "/"}}
	res, err = m.Start(ctx, StartRequest{Name: "idle", Spec: Spec{Argv: []string{"sleep", "30"}, Cwd: "/"}})
	require.NoError(t, err)
	t.Cleanup(func() { m.Kill("idle", "", unix.SIGKILL, 0) })
	assert.Nil(t, res.Waited)
	q := StartResult{Run: startRun(t, m, quick.Name, "sh", "-c", "echo quick")}
	_, err = m.Wait(ctx, WaitRequest{Name: "quick", Timeout: new(20 * time.Second)})
	require.NoError(t, err)
	m.waitEnd(ctx, &q, &quick, time.Now())
	require.NotNil(t, q.Waited)
	assert.Equal(t, outcome.Exited, q.Run.State)
	assert.Equal(t, "quick\n", q.Waited.Output)

	// Refused before anything starts.
	for _, bad := range []StartRequest{
		{Name: "both", Spec: Spec{Argv: []string{"true"}, Cwd: "/", Ready: &ReadyProbe{Log: "x"}}, WaitMS: 100},
		{Name: "neg", Spec: Spec{Argv: []string{"true"}, Cwd: "/"}, WaitMS: -1},
		{Name: "far", Spec: Spec{Argv: []string{"true"}, Cwd: "/"}, WaitMS: 11 * 60 * 1000},
	} {
		_, err := m.Start(ctx, bad)
		require.ErrorIs(t, err, ErrInvalid, bad.Name)
		_, err = m.Get(bad.Name, "")
		require.ErrorIs(t, err, ErrNotFound, "%s: no run started", bad.Name)
	}
}
