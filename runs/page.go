package runs

import (
	"errors"
	"fmt"
	"hash/fnv"
	"sort"

	"github.com/agent-box/agent-box/runrecord"
)

// Listing bounds: an answer holds at most Limit runs, the newest first
// chosen; older ones are fetched with Before. A model's context, and the
// time to answer, must not grow with every run ever started: a run is
// about half a kilobyte of structured content, so the default answer stays
// near 50 KB, and listing 100 of 10,000 runs reads 100 records.
const (
	DefaultListLimit = 100
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
	Total      int    // runs matching the query, in this page or not; a name that cannot be listed counts as one (see ListPage)
	NextBefore string // pass as Before for the next, older page; "" when none
}

// ListPage lists the newest Limit runs that match q. Only the chosen runs'
// records are read: the choice is made from the directory listings alone,
// since run ids sort by start time.
//
// A name whose directory cannot be listed (a symlink, never followed; no
// read permission) has no run ids, yet must be reported, as an unknown
// entry saying why, exactly once in a walk of the pages. It is paged like
// a run whose id is brokenNameID(name): newer than every run agent-box
// makes, so it comes on the first page, counts in Total and in Limit, and
// no later page (whose Before is older) holds it again. Several such names
// page among themselves by that id, which depends on the name alone and so
// holds while other names break or are mended between calls.
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
	index, err := m.Store.Index(q.Name)
	if err != nil {
		if errors.Is(err, runrecord.ErrNotFound) {
			return Page{}, fmt.Errorf("%w: no run named %q", ErrNotFound, q.Name)
		}
		return Page{}, err
	}
	type key struct{ name, id string } // id "": a name that cannot be listed
	type aged struct {
		key
		at string // sorts it by age: the run id, or brokenNameID
	}
	var keys []aged
	for _, nr := range index {
		if nr.Err != nil {
			if at := brokenNameID(nr.Name); q.Before == "" || at < q.Before {
				keys = append(keys, aged{key{nr.Name, ""}, at})
			}
			continue
		}
		ids := nr.IDs
		if !q.All {
			ids = ids[len(ids)-1:]
		}
		for _, id := range ids {
			if q.Before == "" || id < q.Before {
				keys = append(keys, aged{key{nr.Name, id}, id})
			}
		}
	}
	page := Page{Total: len(keys)}
	sort.Slice(keys, func(i, j int) bool { return keys[i].at < keys[j].at })
	if len(keys) > q.Limit {
		keys = keys[len(keys)-q.Limit:]
		page.NextBefore = keys[0].at
	}
	want := make(map[key]bool, len(keys))
	names := make(map[string]bool)
	for _, k := range keys {
		want[k.key] = true
		names[k.name] = true
	}
	entries, err := m.Store.ListWhere(q.Name, func(name, id string) bool {
		if id == "" {
			// The name cannot be listed: shown if this page holds it,
			// or holds runs of it (it broke since Index).
			return names[name]
		}
		return want[key{name, id}]
	})
	switch {
	case err == nil:
	case errors.Is(err, runrecord.ErrNotFound):
		return Page{}, fmt.Errorf("%w: no run named %q", ErrNotFound, q.Name)
	case q.Name != "":
		// q.Name's directory cannot be listed: one entry saying why, as
		// a listing of every name shows it, if this page holds it.
		entries = nil
		if names[q.Name] {
			entries = []runrecord.Entry{{Name: q.Name, Err: err}}
		}
	default:
		return Page{}, err
	}
	idx := &procIndex{sys: m.Sys, bulk: len(entries) > bulkProbe}
	page.Runs = make([]Run, 0, len(entries))
	for _, e := range entries {
		page.Runs = append(page.Runs, m.view(e, idx))
	}
	return page, nil
}

// brokenNameID is where a name whose directory cannot be listed sorts
// among run ids: in the last second of the year 9999, newer than every run
// id NewRunID makes from a real clock, so no cursor taken from a run's id
// lets it through again. The nanoseconds and the random part come from a
// hash of the name, so the id is the same on every call (a cursor among
// these names stays valid) and two such names share one only by a chance
// of about 1 in 2^50.
func brokenNameID(name string) string {
	h := fnv.New64a()
	h.Write([]byte(name))
	sum := h.Sum64()
	return fmt.Sprintf("99991231T235959.%09dZ-%06x", sum%1e9, sum>>40)
}
