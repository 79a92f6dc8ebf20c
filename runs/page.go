package runs

import (
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"time"

	"github.com/agent-box/agent-box/outcome"
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
	Limit  *int   // at most this many runs; nil: DefaultListLimit
	Before string // only runs whose run id sorts before this one (older)
	State  string // only runs in this state: running, exited or unknown
	// ChangedSince is a cursor of an earlier answer: only the runs that
	// started or ended since it was issued, every one of them. It is
	// given alone.
	ChangedSince string
}

// Page is one answer of ListPage.
type Page struct {
	Runs       []Run  // the newest first
	Total      int    // runs matching the query, in this page or not; a name that cannot be listed counts as one (see ListPage)
	NextBefore string // pass as Before for the next, older page; "" when none
	Cursor     string // pass as ChangedSince to learn what changed since this answer
}

func (q *ListQuery) check() error {
	if q.ChangedSince != "" && (q.Name != "" || q.All || q.Limit != nil || q.Before != "" || q.State != "") {
		return invalid("changed_since lists every run that changed, of every name; give it alone")
	}
	if q.Name != "" {
		if err := runrecord.ValidName(q.Name); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	if q.Before != "" {
		if err := runrecord.ValidRunID(q.Before); err != nil {
			return fmt.Errorf("%w: before: %w", ErrInvalid, err)
		}
	}
	switch q.State {
	case "", string(outcome.Running), string(outcome.Exited), string(outcome.Unknown):
	default:
		return invalid("state %s is not one of running, exited, unknown", quoteShort(q.State))
	}
	switch {
	case q.Limit == nil:
		q.Limit = new(DefaultListLimit)
	case *q.Limit < 1 || *q.Limit > MaxListLimit:
		return invalid("limit %d is out of range 1..%d", *q.Limit, MaxListLimit)
	}
	return nil
}

// age sorts a run among others by when it started: its run id, or for a
// name that cannot be listed brokenNameID.
func age(r Run) string {
	if r.RunID == "" {
		return brokenNameID(r.Name)
	}
	return r.RunID
}

func newestFirst(rs []Run) {
	sort.SliceStable(rs, func(i, j int) bool { return age(rs[i]) > age(rs[j]) })
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
	if err := q.check(); err != nil {
		return Page{}, err
	}
	at := time.Now() // before anything is read: see cursor
	if q.ChangedSince != "" {
		return m.changes(q.ChangedSince, at)
	}
	index, err := m.Store.Index(q.Name)
	if err != nil {
		if errors.Is(err, runrecord.ErrNotFound) {
			return Page{}, fmt.Errorf("%w: no run named %q", ErrNotFound, q.Name)
		}
		return Page{}, err
	}
	var keys []aged
	idx := &procIndex{sys: m.Sys}
	for _, nr := range index {
		if nr.Err != nil {
			if at := brokenNameID(nr.Name); q.Before == "" || at < q.Before {
				keys = append(keys, aged{runKeyOf{nr.Name, ""}, at})
			}
			continue
		}
		ids := nr.IDs
		if !q.All {
			ids = []string{m.standing(nr.Name, ids, at, idx)}
		}
		for _, id := range ids {
			if q.Before == "" || id < q.Before {
				keys = append(keys, aged{runKeyOf{nr.Name, id}, id})
			}
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].at < keys[j].at })
	var page Page
	if q.State == "" {
		// Chosen from the listings alone: only the page's records are read.
		page.Total = len(keys)
		if len(keys) > *q.Limit {
			keys = keys[len(keys)-*q.Limit:]
			page.NextBefore = keys[0].at
		}
		if page.Runs, err = m.readKeys(q.Name, keys); err != nil {
			return Page{}, err
		}
	} else {
		// A state is known only from the record and the live system:
		// every candidate is read.
		rs, err := m.readKeys(q.Name, keys)
		if err != nil {
			return Page{}, err
		}
		page.Runs = slices.DeleteFunc(rs, func(r Run) bool { return string(r.State) != q.State })
		page.Total = len(page.Runs)
		if len(page.Runs) > *q.Limit {
			newestFirst(page.Runs)
			page.Runs = page.Runs[:*q.Limit]
			page.NextBefore = age(page.Runs[*q.Limit-1])
		}
	}
	newestFirst(page.Runs)
	// The page is all there is: its cursor knows every running run.
	whole := q.Name == "" && q.All && q.State == "" && q.Before == "" && page.NextBefore == "" &&
		!slices.ContainsFunc(page.Runs, func(r Run) bool { return r.RunID == "" }) // a name that cannot be listed may hide running runs
	c := &cursor{At: at, Boot: bootKey(m.Sys.Boot), Full: whole, Open: map[uint64]bool{}, Done: map[uint64]bool{}}
	for _, r := range page.Runs {
		c.note(r)
	}
	page.Cursor = c.String()
	return page, nil
}

type runKeyOf struct{ name, id string } // id "": a name that cannot be listed

type aged struct {
	runKeyOf
	at string // sorts it by age: the run id, or brokenNameID
}

// readKeys reads and views the runs of keys (of name, or of every name).
func (m *Manager) readKeys(name string, keys []aged) ([]Run, error) {
	want := make(map[runKeyOf]bool, len(keys))
	names := make(map[string]bool)
	for _, k := range keys {
		want[k.runKeyOf] = true
		names[k.name] = true
	}
	entries, err := m.Store.List(name, func(name, id string) bool {
		if id == "" {
			// The name cannot be listed: shown if this page holds it,
			// or holds runs of it (it broke since Index).
			return names[name]
		}
		return want[runKeyOf{name, id}]
	})
	switch {
	case err == nil:
	case errors.Is(err, runrecord.ErrNotFound):
		return nil, fmt.Errorf("%w: no run named %q", ErrNotFound, name)
	case name != "":
		// name's directory cannot be listed: one entry saying why, as a
		// listing of every name shows it, if this page holds it.
		entries = nil
		if names[name] {
			entries = []runrecord.Entry{{Name: name, Err: err}}
		}
	default:
		return nil, err
	}
	return m.viewAll(entries), nil
}

func (m *Manager) viewAll(entries []runrecord.Entry) []Run {
	idx := &procIndex{sys: m.Sys, bulk: len(entries) > bulkProbe}
	rs := make([]Run, 0, len(entries))
	for _, e := range entries {
		r := m.view(e, idx)
		m.withUsage(&r, idx)
		rs = append(rs, r)
	}
	return rs
}

// changes lists the runs that started or ended since the cursor s was
// issued, and a cursor that knows every running run. A cursor that knew
// every running run already needs only those and the recent ones read.
func (m *Manager) changes(s string, at time.Time) (Page, error) {
	c, err := parseCursor(s)
	if err != nil {
		return Page{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	recent := runrecord.RunIDAt(c.At.Add(-cursorLag))
	entries, err := m.Store.List("", func(name, id string) bool {
		return id != "" && (!c.Full || id >= recent || c.Open[runKey(name, id)])
	})
	if err != nil {
		return Page{}, err
	}
	boot := bootKey(m.Sys.Boot)
	next := &cursor{At: at, Boot: boot, Full: true, Open: map[uint64]bool{}, Done: map[uint64]bool{}}
	page := Page{Runs: []Run{}}
	for _, r := range m.viewAll(entries) {
		if c.changed(r, boot) {
			page.Runs = append(page.Runs, r)
		}
		next.note(r)
	}
	newestFirst(page.Runs)
	page.Total = len(page.Runs)
	page.Cursor = next.String()
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
