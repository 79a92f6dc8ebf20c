package runs

import "github.com/agent-box/agent-box/runrecord"

// Usage is what a run's processes use: now while it runs, and what the
// supervisor measured at the exit after.
type Usage struct {
	MemoryBytes     int64  `json:"memory_bytes,omitempty"` // resident now; running runs only
	PeakMemoryBytes int64  `json:"peak_memory_bytes,omitempty"`
	CPUMS           int64  `json:"cpu_ms"`
	Procs           int    `json:"procs,omitempty"` // processes running now
	From            string `json:"from"`            // UsageFromCgroup, UsageFromProc or UsageAtExit
}

// Where a Usage comes from.
const (
	UsageFromCgroup = "cgroup" // the run's own cgroup: every process it ever had
	UsageFromProc   = "proc"   // summed over the run's live processes in /proc
	UsageAtExit     = "exit"   // recorded by the supervisor at the exit
)

// cgroupUsage is the usage of a limited run whose supervisor lives, read
// from the run's cgroup; false when there is none to read.
func (m *Manager) cgroupUsage(rec *runrecord.Record, supAlive bool) (Usage, bool) {
	return Usage{}, false
}
