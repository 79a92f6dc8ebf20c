package runs

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/outcome"
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
