package runs

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/runrecord"
)

// goneManager is a Manager over store whose processes are all gone.
func goneManager(store *runrecord.Store) *Manager {
	return &Manager{Store: store, Sys: fakeSys(gone)}
}

// createRuns writes one run for each name, one second apart in that order,
// and returns their run ids.
func createRuns(t *testing.T, store *runrecord.Store, names ...string) []string {
	t.Helper()
	var ids []string
	for i, n := range names {
		r := record(store, "boot")
		r.Name = n
		r.RunID = runrecord.NewRunID(time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC))
		r.LogPath = store.LogPath(r.Name, r.RunID)
		require.NoError(t, store.Create(r))
		ids = append(ids, r.RunID)
	}
	return ids
}

// walk pages through q from the newest, checking every page against the
// limit, and returns the pages.
func walk(t *testing.T, m *Manager, q ListQuery) []Page {
	t.Helper()
	var pages []Page
	limit := DefaultListLimit
	if q.Limit != nil {
		limit = *q.Limit
	}
	for {
		p, err := m.ListPage(q)
		require.NoError(t, err)
		require.LessOrEqual(t, len(p.Runs), limit, "page %d holds %d runs with limit %d", len(pages), len(p.Runs), limit)
		pages = append(pages, p)
		require.Less(t, len(pages), 100, "the walk does not end")
		if q.Before = p.NextBefore; q.Before == "" {
			return pages
		}
	}
}

// assertBroken checks that r reports a name dir that cannot be listed.
func assertBroken(t *testing.T, r Run, why string) {
	t.Helper()
	assert.Equal(t, outcome.Unknown, r.State, "%s: %s", r.Name, r.Reason)
	assert.Empty(t, r.RunID, r.Name)
	assert.Contains(t, r.Reason, why, r.Name)
}

func TestListPageShowsBrokenNameOnce(t *testing.T) {
	store := newStore(t)
	for i := range 3 {
		r := record(store, "boot")
		r.Name = fmt.Sprintf("n%d", i)
		r.RunID = runrecord.NewRunID(time.Now().Add(time.Duration(i) * time.Second))
		r.LogPath = store.LogPath(r.Name, r.RunID)
		require.NoError(t, store.Create(r))
	}
	require.NoError(t, os.Symlink(t.TempDir(), store.RunDir("zz", "")))
	m := &Manager{Store: store, Sys: fakeSys(gone)}
	seen := map[string]int{}
	before := ""
	for page := 0; page < 5; page++ {
		p, err := m.ListPage(ListQuery{Limit: new(1), Before: before})
		require.NoError(t, err)
		require.LessOrEqual(t, len(p.Runs), 1, "page %d holds %d runs with limit 1", page, len(p.Runs))
		for _, r := range p.Runs {
			seen[r.Name+"/"+r.RunID]++
		}
		if before = p.NextBefore; before == "" {
			break
		}
	}
	for k, n := range seen {
		require.Equal(t, 1, n, "%s listed on %d pages", k, n)
	}
	assert.Len(t, seen, 4, "every name, zz too: %v", seen)
}

// Names that cannot be listed sort as the newest: on the first pages,
// counted in Total and in Limit, each once, whatever the limit; the runs
// are paged as without them.
func TestListPageBrokenNamesPagedAsNewest(t *testing.T) {
	store := newStore(t)
	ids := createRuns(t, store, "n0", "n1", "n2", "n0", "n1", "n2", "n0")
	broken := []string{"xx", "yy", "zz"}
	for _, n := range broken {
		require.NoError(t, os.Symlink(t.TempDir(), store.RunDir(n, "")))
	}
	m := goneManager(store)

	p, err := m.ListPage(ListQuery{All: true})
	require.NoError(t, err)
	assert.Equal(t, 10, p.Total)
	assert.Empty(t, p.NextBefore)
	require.Len(t, p.Runs, 10)
	var names []string
	for i, r := range p.Runs {
		names = append(names, r.Name)
		if i > 0 {
			assert.Greater(t, age(p.Runs[i-1]), age(r), "newest first")
		}
	}
	assert.ElementsMatch(t, []string{"n0", "n0", "n0", "n1", "n1", "n2", "n2", "xx", "yy", "zz"}, names)
	for _, r := range p.Runs[:3] {
		assert.Contains(t, []string{"xx", "yy", "zz"}, r.Name, "names that cannot be listed sort as the newest")
	}

	for _, all := range []bool{true, false} {
		runs := len(ids)
		if !all {
			runs = 3
		}
		for limit := 1; limit <= 11; limit++ {
			t.Run(fmt.Sprintf("all=%v/limit=%d", all, limit), func(t *testing.T) {
				pages := walk(t, m, ListQuery{All: all, Limit: new(limit)})
				assert.Equal(t, runs+len(broken), pages[0].Total, "the first page counts every run and name")
				seen := map[string]int{}
				var order []string // run ids, the newest first
				for i, p := range pages {
					var pageIDs []string
					for _, r := range p.Runs {
						seen[r.Name+"/"+r.RunID]++
						if r.RunID == "" {
							assertBroken(t, r, "symlink")
							assert.Empty(t, order, "page %d: a broken name after a page of runs: it is newer than them", i)
							continue
						}
						pageIDs = append(pageIDs, r.RunID)
					}
					sort.Sort(sort.Reverse(sort.StringSlice(pageIDs)))
					order = append(order, pageIDs...)
					if i > 0 {
						assert.Equal(t, pages[i-1].Total-len(pages[i-1].Runs), p.Total, "page %d: Total counts what is left", i)
					}
				}
				for k, n := range seen {
					assert.Equal(t, 1, n, "%s listed on %d pages", k, n)
				}
				for _, n := range broken {
					assert.Equal(t, 1, seen[n+"/"], "%s is listed", n)
				}
				want := append([]string(nil), ids...)
				if !all {
					want = ids[4:]
				}
				sort.Sort(sort.Reverse(sort.StringSlice(want)))
				assert.Equal(t, want, order, "the runs, the newest first, each once")
			})
		}
	}
}

// A name filter reports a name that cannot be listed as one unknown entry,
// not as a failed call; an older page of it is empty.
func TestListPageBrokenNameByName(t *testing.T) {
	store := newStore(t)
	ids := createRuns(t, store, "n0")
	require.NoError(t, os.Symlink(t.TempDir(), store.RunDir("zz", "")))
	m := goneManager(store)
	for _, all := range []bool{false, true} {
		p, err := m.ListPage(ListQuery{Name: "zz", All: all})
		require.NoError(t, err)
		assert.Equal(t, 1, p.Total)
		assert.Empty(t, p.NextBefore)
		require.Len(t, p.Runs, 1)
		assert.Equal(t, "zz", p.Runs[0].Name)
		assertBroken(t, p.Runs[0], "symlink")
	}
	p, err := m.ListPage(ListQuery{Name: "zz", Before: ids[0]})
	require.NoError(t, err)
	assert.Zero(t, p.Total)
	assert.Empty(t, p.Runs)
	// The other name's pages do not hold it.
	p, err = m.ListPage(ListQuery{Name: "n0"})
	require.NoError(t, err)
	require.Len(t, p.Runs, 1)
	assert.Equal(t, ids[0], p.Runs[0].RunID)
	_, err = m.ListPage(ListQuery{Name: "nope"})
	assert.ErrorIs(t, err, ErrNotFound)
}

// A name dir without read permission is paged like a symlinked one.
func TestListPageUnreadableNameOnce(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads a dir without read permission")
	}
	store := newStore(t)
	createRuns(t, store, "n0", "n1", "locked")
	dir := store.RunDir("locked", "")
	require.NoError(t, os.Chmod(dir, 0))
	t.Cleanup(func() { _ = os.Chmod(dir, 0o700) })
	m := goneManager(store)
	pages := walk(t, m, ListQuery{Limit: new(1)})
	seen := map[string]int{}
	for _, p := range pages {
		for _, r := range p.Runs {
			seen[r.Name+"/"+r.RunID]++
		}
	}
	assert.Equal(t, 3, pages[0].Total)
	assert.Len(t, seen, 3, "%v", seen)
	assert.Equal(t, 1, seen["locked/"], "%v", seen)
	require.NotEmpty(t, pages[0].Runs)
	assertBroken(t, pages[0].Runs[0], "permission denied")

	p, err := m.ListPage(ListQuery{Name: "locked"})
	require.NoError(t, err)
	require.Len(t, p.Runs, 1)
	assertBroken(t, p.Runs[0], "permission denied")
}

func TestBrokenNameID(t *testing.T) {
	now := runrecord.NewRunID(time.Now())
	last := runrecord.NewRunID(time.Date(9999, 12, 31, 23, 59, 58, 999999999, time.UTC))
	seen := map[string]string{}
	for i := range 1000 {
		name := fmt.Sprintf("name%d", i)
		id := brokenNameID(name)
		require.NoError(t, runrecord.ValidRunID(id), name)
		assert.Equal(t, id, brokenNameID(name), "the same on every call")
		assert.Greater(t, id, now)
		assert.Greater(t, id, last)
		assert.True(t, strings.HasPrefix(id, "99991231T235959."), id)
		if other, dup := seen[id]; dup {
			t.Errorf("%s and %s share %s", name, other, id)
		}
		seen[id] = name
	}
}
