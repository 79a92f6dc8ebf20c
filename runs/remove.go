package runs

import (
	"errors"
	"fmt"

	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/runrecord"
)

// RemoveResult lists what process_remove deleted.
type RemoveResult struct {
	Removed []Run    `json:"removed"`
	Kept    []Run    `json:"kept,omitempty"`   // not finished, left alone (all_finished only)
	Errors  []string `json:"errors,omitempty"` // runs that could not be removed
}

// finished: its record is readable, its exit is known or its processes
// are provably gone, and nothing writes its log any more. A run whose
// record cannot be read (corrupt, a newer version) is never removed by
// all_finished or by name alone: nothing proves it finished.
func finished(r Run) bool { return r.rec != nil && !r.Verdict.MayBeAlive && r.LogFinal() }

// Remove deletes finished runs' records and logs: one run (runID, or the
// newest of name), or with allFinished every finished run of name (of all
// names when name is "").
func (m *Manager) Remove(name, runID string, allFinished bool) (RemoveResult, error) {
	var res RemoveResult
	if !allFinished {
		if name == "" {
			return res, invalid("name is required unless all_finished is true")
		}
		run, err := m.Get(name, runID)
		if errors.Is(err, ErrNotFound) {
			m.Store.Tidy(name, m.supervisorAlive) // a name with nothing but what killed starts left
		}
		if err != nil {
			return res, err
		}
		// A run whose record cannot be read is removed only when asked for
		// by its run id: the caller then vouches for what agent-box cannot
		// see, and that is the only way to free a name it blocks.
		if !finished(run) && !(run.rec == nil && runID != "") {
			return res, fmt.Errorf("%w: run %q (run id %s) is %s (%s); kill it and wait for it first",
				ErrRunning, name, run.RunID, run.State, run.Reason)
		}
		if err := m.Store.Remove(name, run.RunID); err != nil {
			return res, err
		}
		m.removeGroup(run)
		res.Removed = append(res.Removed, run)
		m.Store.Tidy(name, m.supervisorAlive)
		return res, nil
	}
	if runID != "" {
		return res, invalid("run_id and all_finished exclude each other")
	}
	all, err := m.List(name, true)
	if err != nil {
		return res, err
	}
	for _, run := range all {
		if !finished(run) {
			res.Kept = append(res.Kept, run)
			continue
		}
		if err := m.Store.Remove(run.Name, run.RunID); err != nil {
			// One run that cannot be removed does not stop the others.
			res.Errors = append(res.Errors, fmt.Sprintf("%s %s: %v", run.Name, run.RunID, err))
			continue
		}
		m.removeGroup(run)
		res.Removed = append(res.Removed, run)
	}
	m.Store.Tidy(name, m.supervisorAlive) // every name when name is ""
	return res, nil
}

// supervisorAlive reports whether the supervisor rec names is still the
// process it was (its pid and start time): a start dir it may still use is
// kept until it has gone.
func (m *Manager) supervisorAlive(rec *runrecord.Record) bool {
	if rec.SupervisorPID <= 1 {
		return false
	}
	l, _ := m.Sys.Procs.Probe(rec.SupervisorPID, rec.SupervisorStartTime)
	return l == outcome.Same
}
