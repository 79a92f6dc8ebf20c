package runs

import (
	"slices"

	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
)

// withUsage fills r.Usage: what a running run's processes use now (also
// those its leader left behind), or what the supervisor recorded at the
// exit. Only for what outcome vouches for: a run that is not running with
// its supervisor (unknown, foreign, unsupervised) shows no live figures,
// so a planted record never shows the use of a pid it names.
//
// It is not part of every read of a run (Get): waits, kills and followers
// read a run again and again, and a run of several processes costs a scan
// of /proc; listings and answers to process_wait fill it.
func (m *Manager) withUsage(r *Run, idx *procIndex) {
	rec := r.rec
	switch {
	case rec == nil:
	case r.supAlive && (r.Verdict.Reason == outcome.ReasonRunning || len(r.Survivors) > 0):
		// Running, or ended with processes left behind (a dev server a
		// script started): what they use now is what matters.
		if u, ok := m.cgroupUsage(rec, r.supAlive, idx); ok {
			r.Usage = &u
			return
		}
		r.Usage = idx.procUsage(rec)
	case r.State == outcome.Exited && rec.Exit != nil && (rec.Exit.CPUMS > 0 || rec.Exit.PeakMemoryBytes > 0):
		// The record is untrusted input: a negative figure is none.
		r.Usage = &Usage{CPUMS: max(rec.Exit.CPUMS, 0), PeakMemoryBytes: max(rec.Exit.PeakMemoryBytes, 0), From: UsageAtExit}
	}
}

// withUsages fills the usage of r and of others, from one look at /proc.
func (m *Manager) withUsages(r *Run, others []Run) {
	idx := &procIndex{sys: m.Sys}
	m.withUsage(r, idx)
	for i := range others {
		m.withUsage(&others[i], idx)
	}
}

// procUsage sums the usage of the running run's live processes: its
// leader and every other descendant of its supervisor, leaving out runs
// started from inside it (descendants); nil when none could be read (the
// run is ending).
//
// Peak is the sum of each live process's own peak (VmHWM): the peaks need
// not have come at once, and processes that have exited are not in it,
// so it is neither the run's peak nor a bound of it; for a run of one
// process it is that process's peak. A cgroup knows better.
func (x *procIndex) procUsage(rec *runrecord.Record) *Usage {
	procs := []proc.Stat{{PID: rec.PID, StartTime: rec.PIDStartTime}}
	if x.bulk || x.more(rec) {
		ds, _ := x.descendants(rec) // none when the supervisor is gone since the probe
		for _, p := range ds {
			if p.PID != rec.PID {
				procs = append(procs, p)
			}
		}
	}
	u := Usage{From: UsageFromProc}
	for _, p := range procs {
		pu, err := x.sys.Procs.Usage(p.PID, p.StartTime)
		if err != nil {
			continue // exited since the scan, or its pid is someone else's now
		}
		u.MemoryBytes += pu.RSSBytes
		u.PeakMemoryBytes += pu.PeakRSSBytes
		u.CPUMS += pu.CPUMS
		u.Procs++
	}
	if u.Procs == 0 {
		return nil
	}
	return &u
}

// more reports whether the run may have processes besides its leader,
// from a few small reads instead of a scan of /proc: every process of the
// run descends from the supervisor (a child subreaper), so with the
// leader as its only child and no child of the leader's, there is none.
func (x *procIndex) more(rec *runrecord.Record) bool {
	kids, err := x.sys.Procs.Children(rec.SupervisorPID)
	if err != nil || slices.ContainsFunc(kids, func(k int) bool { return k != rec.PID }) {
		return true
	}
	kids, err = x.sys.Procs.Children(rec.PID)
	return err != nil || len(kids) > 0
}
