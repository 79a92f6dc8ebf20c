package runs

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/runrecord"
)

func TestCursorRoundTrip(t *testing.T) {
	c := &cursor{At: time.Unix(0, 1764771000123456789), Boot: 7, Full: true,
		Open: map[uint64]bool{1: true, 1 << 63: true}, Done: map[uint64]bool{42: true}}
	got, err := parseCursor(c.String())
	if err != nil {
		t.Fatal(err)
	}
	if !got.At.Equal(c.At) || got.Boot != 7 || !got.Full || len(got.Open) != 2 || !got.Open[1<<63] || !got.Done[42] {
		t.Errorf("round trip: %+v", got)
	}
	s := c.String()
	for _, bad := range []string{"", "c1.", "c2." + s[3:], s + "A", s[:len(s)-2], "c1.!!!!", "c1.AgAAAAAAAAAAAAAAAAA"} {
		if _, err := parseCursor(bad); err == nil {
			t.Errorf("parseCursor(%q) accepted", bad)
		}
	}
}

// TestCursorChanged is the rule changed_since applies, case by case.
func TestCursorChanged(t *testing.T) {
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	old, recent, later := at.Add(-time.Hour), at.Add(-time.Second), at.Add(time.Hour)
	run := func(name string, state outcome.State, started time.Time, finished *time.Time, rec *runrecord.Record) Run {
		return Run{Name: name, RunID: runrecord.NewRunID(started), State: state, StartedAt: &started, FinishedAt: finished, rec: rec}
	}
	exited := &runrecord.Record{Exit: &runrecord.Exit{}, BootID: "b1"}
	lost := &runrecord.Record{BootID: "b1"}
	for _, c := range []struct {
		what string
		full bool
		open bool
		done bool
		r    Run
		boot string
		want bool
	}{
		{"known running, still running", true, true, false, run("a", outcome.Running, old, nil, lost), "b1", false},
		{"known running, exited since", true, true, false, run("a", outcome.Exited, old, &later, exited), "b1", true},
		{"known running, lost since (no end time)", false, true, false, run("a", outcome.Unknown, old, nil, lost), "b1", true},
		{"known ended", true, false, true, run("a", outcome.Exited, recent, &recent, exited), "b1", false},
		{"unknown to a full cursor: new", true, false, false, run("a", outcome.Running, later, nil, lost), "b1", true},
		{"plain cursor: started after", false, false, false, run("a", outcome.Running, later, nil, lost), "b1", true},
		{"plain cursor: ended after", false, false, false, run("a", outcome.Exited, old, &later, exited), "b1", true},
		{"plain cursor: ended long before", false, false, false, run("a", outcome.Exited, old, &old, exited), "b1", false},
		{"plain cursor: rebooted since", false, false, false, run("a", outcome.Unknown, old, nil, lost), "b2", true},
		{"plain cursor: lost, not known running", false, false, false, run("a", outcome.Unknown, old, nil, lost), "b1", false},
	} {
		cur := &cursor{At: at, Boot: bootKey("b1"), Full: c.full, Open: map[uint64]bool{}, Done: map[uint64]bool{}}
		k := runKey(c.r.Name, c.r.RunID)
		cur.Open[k], cur.Done[k] = c.open, c.done
		if got := cur.changed(c.r, bootKey(c.boot)); got != c.want {
			t.Errorf("%s: changed = %v, want %v", c.what, got, c.want)
		}
	}
}

// Only a listing of every run makes a full cursor: a later page's (before)
// knows the running runs of its page alone, so a cursor that claimed to
// know them all would miss the exit of one on an earlier page.
func TestCursorOfAPageIsFullOnlyWhenItHoldsEveryRun(t *testing.T) {
	store := newStore(t)
	createRuns(t, store, "a", "b")
	m := goneManager(store)
	full := func(q ListQuery) bool {
		p, err := m.ListPage(q)
		require.NoError(t, err)
		c, err := parseCursor(p.Cursor)
		require.NoError(t, err)
		return c.Full
	}
	assert.True(t, full(ListQuery{All: true}))
	first, err := m.ListPage(ListQuery{All: true, Limit: new(1)})
	require.NoError(t, err)
	assert.False(t, full(ListQuery{All: true, Limit: new(1)}))
	assert.False(t, full(ListQuery{All: true, Limit: new(1), Before: first.NextBefore}), "the last page")
	assert.False(t, full(ListQuery{Name: "a", All: true}))
	assert.False(t, full(ListQuery{}), "newest of each name only")
}

// A run whose record cannot be read is known as it is: not news on every
// changed_since while it stays so.
func TestUnreadableRunIsNewsOnce(t *testing.T) {
	store := newStore(t)
	rec := record(store, "boot")
	require.NoError(t, store.Create(rec))
	m := &Manager{Store: store, Sys: fakeSys(alive)}
	p, err := m.ListPage(ListQuery{All: true})
	require.NoError(t, err)
	require.Len(t, p.Runs, 1)
	require.Equal(t, outcome.Running, p.Runs[0].State)
	require.NoError(t, os.WriteFile(filepath.Join(store.RunDir(rec.Name, rec.RunID), "record.json"), []byte("{garbage"), 0o600))
	p, err = m.ListPage(ListQuery{ChangedSince: p.Cursor})
	require.NoError(t, err)
	require.Len(t, p.Runs, 1, "it was running; now it is unknown: news")
	assert.Equal(t, outcome.Unknown, p.Runs[0].State)
	for range 2 {
		p, err = m.ListPage(ListQuery{ChangedSince: p.Cursor})
		require.NoError(t, err)
		assert.Empty(t, p.Runs, "still unreadable: no news")
	}
}

// changed_since is exact: a run that ended before the cursor was issued is
// not news, though a listing filtered by name did not show it, and it
// ended within the lag that covers runs not yet visible.
func TestChangedSinceNeverReportsARunThatEndedBefore(t *testing.T) {
	store := newStore(t)
	ended := record(store, "boot")
	ended.Name = "other"
	code := 0
	ended.StartedAt = time.Now().UTC().Add(-2 * time.Second)
	ended.RunID = runrecord.NewRunID(ended.StartedAt)
	ended.LogPath = store.LogPath(ended.Name, ended.RunID)
	at := ended.StartedAt.Add(time.Second)
	ended.Exit = &runrecord.Exit{Code: &code, At: at}
	ended.FinishedAt, ended.OutputClosed = &at, true
	require.NoError(t, store.Create(ended))
	mine := record(store, "boot")
	mine.Name = "mine"
	mine.RunID = runrecord.NewRunID(time.Now().UTC())
	mine.LogPath = store.LogPath(mine.Name, mine.RunID)
	require.NoError(t, store.Create(mine))
	m := goneManager(store)
	p, err := m.ListPage(ListQuery{Name: "mine"})
	require.NoError(t, err)
	require.Len(t, p.Runs, 1)
	p, err = m.ListPage(ListQuery{ChangedSince: p.Cursor})
	require.NoError(t, err)
	for _, r := range p.Runs {
		assert.NotEqual(t, "other", r.Name, "%s ended before the cursor was issued: %+v", r.Name, r)
	}
}
