package runs

import (
	"errors"
	"fmt"
	"sort"

	"github.com/agent-box/agent-box/runrecord"
)

// Listing bounds: an answer holds at most Limit runs, the newest first
// chosen; older ones are fetched with Before. A model's context, and the
// time to answer, must not grow with every run ever started.
const (
	DefaultListLimit = 1000
	MaxListLimit     = 100000
)

// ListQuery is process_list's arguments.
type ListQuery struct {
	Name   string // only runs of this name
	All    bool   // every run of each name, not only the newest
	Limit  int    // at most this many runs; 0 = DefaultListLimit
	Before string // only runs whose run id sorts before this one (older)
}

// Page is one answer of ListPage.
type Page struct {
	Runs       []Run  // sorted by name, then run id
	Total      int    // runs matching the query, in this page or not
	NextBefore string // pass as Before for the next, older page; "" when none
}

// ListPage lists the newest Limit runs that match q. Only the chosen runs'
// records are read: the choice is made from the directory listings alone,
// since run ids sort by start time.
func (m *Manager) ListPage(q ListQuery) (Page, error) {
	if q.Name != "" {
		if err := runrecord.ValidName(q.Name); err != nil {
			return Page{}, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	if q.Before != "" {
		if err := runrecord.ValidRunID(q.Before); err != nil {
			return Page{}, fmt.Errorf("%w: before: %w", ErrInvalid, err)
		}
	}
	switch {
	case q.Limit == 0:
		q.Limit = DefaultListLimit
	case q.Limit < 0 || q.Limit > MaxListLimit:
		return Page{}, invalid("limit %d is out of range 1..%d", q.Limit, MaxListLimit)
	}
	names := []string{q.Name}
	if q.Name == "" {
		var err error
		if names, err = m.Store.Names(); err != nil {
			return Page{}, err
		}
	}
	type key struct{ name, id string }
	var keys []key
	for _, n := range names {
		ids, err := m.Store.RunIDs(n)
		if err != nil {
			if q.Name != "" && errors.Is(err, runrecord.ErrNotFound) {
				return Page{}, fmt.Errorf("%w: no run named %q", ErrNotFound, q.Name)
			}
			continue // unreadable name dirs are listed by ListWhere below
		}
		if !q.All {
			ids = ids[len(ids)-1:]
		}
		for _, id := range ids {
			if q.Before == "" || id < q.Before {
				keys = append(keys, key{n, id})
			}
		}
	}
	page := Page{Total: len(keys)}
	sort.Slice(keys, func(i, j int) bool { return keys[i].id < keys[j].id })
	if len(keys) > q.Limit {
		keys = keys[len(keys)-q.Limit:]
		page.NextBefore = keys[0].id
	}
	want := make(map[key]bool, len(keys))
	for _, k := range keys {
		want[k] = true
	}
	entries, err := m.Store.ListWhere(q.Name, func(name, id string) bool { return want[key{name, id}] })
	if err != nil {
		if errors.Is(err, runrecord.ErrNotFound) {
			return Page{}, fmt.Errorf("%w: no run named %q", ErrNotFound, q.Name)
		}
		return Page{}, err
	}
	idx := &procIndex{sys: m.Sys, bulk: len(entries) > bulkProbe}
	page.Runs = make([]Run, 0, len(entries))
	for _, e := range entries {
		page.Runs = append(page.Runs, m.view(e, idx))
	}
	return page, nil
}
