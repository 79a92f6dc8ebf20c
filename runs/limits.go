package runs

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/agent-box/agent-box/cgroup"
	"github.com/agent-box/agent-box/live"
	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
	"github.com/agent-box/agent-box/supervisor"
)

// Limits are a run's resource caps (process_start's limits).
type Limits = runrecord.Limits

// Usage is what a run's processes use: now while it runs, and what the
// supervisor measured at the exit after.
type Usage struct {
	MemoryBytes     int64  `json:"memory_bytes,omitempty" jsonschema:"resident now"` // running runs only
	PeakMemoryBytes int64  `json:"peak_memory_bytes,omitempty"`
	CPUMS           int64  `json:"cpu_ms"`
	Procs           int    `json:"procs,omitempty" jsonschema:"processes now"`
	From            string `json:"from"` // UsageFromCgroup, UsageFromProc or UsageAtExit
}

// CPU is the usage's CPU time as the tools' text and the CLI's ps show
// it: 340ms, 1.2s, 3m25s.
func (u Usage) CPU() string {
	d := time.Duration(u.CPUMS) * time.Millisecond
	switch {
	case d < time.Second:
		return d.String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// Where a Usage comes from.
const (
	UsageFromCgroup = "cgroup" // the run's own cgroup: every process it ever had
	UsageFromProc   = "proc"   // summed over the run's live processes in /proc
	UsageAtExit     = "exit"   // recorded by the supervisor at the exit
)

// cgroupUsage is the usage of a limited run whose supervisor lives, read
// from the run's cgroup (runGroup); false when there is none to read.
func (m *Manager) cgroupUsage(rec *runrecord.Record, supAlive bool, idx *procIndex) (Usage, bool) {
	if rec.Limits == nil || !supAlive {
		return Usage{}, false
	}
	mounts, err := idx.cgroupMounts()
	if err != nil {
		return Usage{}, false
	}
	g, err := runGroup(rec, mounts)
	if err != nil || g == nil {
		return Usage{}, false
	}
	u, err := g.Usage()
	if err != nil {
		return Usage{}, false
	}
	// Resident memory as /proc says it, for every process in the group.
	var rss int64
	for _, pid := range u.Pids {
		if st, err := proc.ReadStat(pid); err == nil {
			rss += st.RSSPages * proc.PageSize
		}
	}
	return Usage{MemoryBytes: rss, PeakMemoryBytes: u.PeakMemoryBytes, CPUMS: u.CPUNanos / 1e6, Procs: len(u.Pids), From: UsageFromCgroup}, true
}

// Bounds on a run's limits.
const (
	MinMemoryMB = 8       // below this even a shell cannot start
	MaxMemoryMB = 1 << 24 // 16 TiB
	MaxPids     = 1 << 22 // the kernel's PID_MAX_LIMIT
)

// ErrLimitUnavailable: a limit was asked that this machine cannot enforce.
// The error says why and what would enable it; the run is not started.
var ErrLimitUnavailable = errors.New("limit cannot be enforced here")

// applyLimits lays req's limits over the Manager's defaults, field by
// field, checks them, and checks that this machine can enforce them: a
// limit is never silently dropped. No limits leaves req.Limits nil.
func (m *Manager) applyLimits(req *StartRequest) error {
	var l runrecord.Limits
	if m.DefaultLimits != nil {
		l = *m.DefaultLimits
	}
	if g := req.Limits; g != nil {
		if g.MemoryMB != 0 {
			l.MemoryMB = g.MemoryMB
		}
		if g.CPUPercent != 0 {
			l.CPUPercent = g.CPUPercent
		}
		if g.Pids != 0 {
			l.Pids = g.Pids
		}
	}
	req.Limits = nil
	if err := CheckLimits(l); err != nil || l.Zero() {
		return err
	}
	delegate, err := m.enforceable(l)
	if err != nil {
		return err
	}
	req.Limits, req.delegate = &l, delegate
	return nil
}

// CheckEnforceable says whether this machine can enforce l (checked by
// CheckLimits). Its error wraps ErrLimitUnavailable and says why and what
// would enable it.
func (m *Manager) CheckEnforceable(l Limits) error {
	_, err := m.enforceable(l)
	return err
}

// enforceable is CheckEnforceable, and whether the run's supervisor must
// be given a delegated scope for it (cgroup v2).
func (m *Manager) enforceable(l Limits) (delegate bool, err error) {
	scopes := m.SystemdScopes
	if scopes == nil {
		scopes = live.SystemdScopes
	}
	h, err := m.cgroups()
	if err == nil {
		err = Enforceable(h, l, scopes, os.Geteuid())
	}
	if err != nil {
		return false, fmt.Errorf("%w: %s: %w", ErrLimitUnavailable, DescribeLimits(l), err)
	}
	return h.V2, nil
}

// Enforceable says whether l can be enforced for a run started by a
// process of uid whose cgroups are h. Under v1 the supervisor makes the
// run's group below its own, which must be writable. Under v2 a group may
// not both hold processes and cap its children, so the supervisor must
// have a group of its own, which only systemd gives it: scopes says
// whether it can (SystemdScopes), and the group must be given the
// controllers (cgroup.Hierarchy.CheckDelegable).
func Enforceable(h *cgroup.Hierarchy, l Limits, scopes func() error, uid int) error {
	cl := supervisor.CgroupLimits(l)
	if !h.V2 {
		return h.Check(cl)
	}
	if err := scopes(); err != nil {
		return fmt.Errorf("%w: under cgroup v2 a run with limits needs a group of its own, which agent-box gets from systemd (systemd-run --scope -p Delegate=yes): %w", cgroup.ErrUnavailable, err)
	}
	return h.CheckDelegable(cl, uid)
}

// CheckLimits checks each limit against its bounds (0 is no limit).
func CheckLimits(l runrecord.Limits) error {
	cpus := runtime.NumCPU()
	switch {
	case l.MemoryMB != 0 && (l.MemoryMB < MinMemoryMB || l.MemoryMB > MaxMemoryMB):
		return invalid("limits.memory_mb %d is out of range %d..%d", l.MemoryMB, MinMemoryMB, MaxMemoryMB)
	case l.CPUPercent < 0 || l.CPUPercent > 100*cpus:
		return invalid("limits.cpu_percent %d is out of range 1..%d (100 is one CPU; this machine has %d)", l.CPUPercent, 100*cpus, cpus)
	case l.Pids < 0 || l.Pids > MaxPids:
		return invalid("limits.pids %d is out of range 1..%d", l.Pids, MaxPids)
	}
	return nil
}

// ParseLimits reads limits written as describeLimits writes them, or as
// a flag gives them: "memory_mb=512,cpu_percent=100,pids=256", any subset,
// separated by commas or spaces. "" and "none" are no limits.
func ParseLimits(s string) (runrecord.Limits, error) {
	var l runrecord.Limits
	for _, kv := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		if kv == "none" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		n, err := strconv.Atoi(v)
		if !ok || err != nil {
			return l, invalid("limits %q: %q is not key=number (keys: memory_mb, cpu_percent, pids)", s, kv)
		}
		if strings.Count(","+strings.ReplaceAll(s, " ", ",")+",", ","+k+"=") > 1 {
			return l, invalid("limits %q: %s is given twice", s, k)
		}
		switch k {
		case "memory_mb":
			l.MemoryMB = n
		case "cpu_percent":
			l.CPUPercent = n
		case "pids":
			l.Pids = n
		default:
			return l, invalid("limits %q: unknown key %q (keys: memory_mb, cpu_percent, pids)", s, k)
		}
	}
	return l, CheckLimits(l)
}

// DescribeLimits names the limits set in l, as ParseLimits reads them.
func DescribeLimits(l runrecord.Limits) string {
	var parts []string
	for _, f := range []struct {
		key string
		v   int
	}{{"memory_mb", l.MemoryMB}, {"cpu_percent", l.CPUPercent}, {"pids", l.Pids}} {
		if f.v != 0 {
			parts = append(parts, f.key+"="+strconv.Itoa(f.v))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

func limitsOf(l *runrecord.Limits) runrecord.Limits {
	if l == nil {
		return runrecord.Limits{}
	}
	return *l
}

// memoryLimit is " (limit N MiB)" for a run with a memory limit.
func memoryLimit(rec *runrecord.Record) string {
	if rec.Limits == nil || rec.Limits.MemoryMB <= 0 {
		return ""
	}
	return fmt.Sprintf(" (limit %d MiB)", rec.Limits.MemoryMB)
}

// pidsCapHits says that the run's pids cap refused forks, and how many:
// a run that failed for it (a fork that failed with EAGAIN) then says why.
func pidsCapHits(rec *runrecord.Record) string {
	n := rec.Exit.PidsMaxHit
	forks := "forks"
	if n == 1 {
		forks = "fork"
	}
	if rec.Limits == nil || rec.Limits.Pids <= 0 {
		return fmt.Sprintf("%d %s refused at its pids cap", n, forks)
	}
	return fmt.Sprintf("%d %s refused at its pids cap of %d", n, forks, rec.Limits.Pids)
}

// removeGroup removes the cgroup a removed run's supervisor left behind
// when it died before the run's end (it removes the group itself at the
// end). Only a group of the run's own name, under this process's own
// cgroup (where a supervisor started with setsid makes it), and only an
// empty one: rmdir(2) of a group with processes fails.
func (m *Manager) removeGroup(run Run) {
	if run.Limits == nil {
		return
	}
	h, err := m.cgroups()
	if err != nil {
		return
	}
	if g := h.Group(cgroup.Leaf(run.Name, run.RunID)); g != nil {
		_ = g.Remove()
	}
}

// cgroups is where this process's cgroups are (Manager.Cgroups).
func (m *Manager) cgroups() (*cgroup.Hierarchy, error) {
	if m.Cgroups != nil {
		return m.Cgroups()
	}
	return cgroup.Self()
}

// outOfMemory reports whether the leader's own end was the memory cap's:
// the kernel's OOM killer sends SIGKILL, and a run its timeout ended was
// killed by that, whatever else the cap killed.
func outOfMemory(e *runrecord.Exit) bool {
	return e.OOMKilled && e.Signal == "SIGKILL" && !e.TimedOut
}

// OutOfMemory reports whether the run's leader was killed for its memory
// cap: its SIGKILL was the kernel's (see outOfMemory).
func (r *Run) OutOfMemory() bool {
	return r.rec != nil && r.rec.Exit != nil && outOfMemory(r.rec.Exit)
}

// capsBroken says, for a limited run whose live supervisor vouches for
// its live leader, how the kernel's facts contradict the limits its
// record names: "" when they hold, or when there is nothing to check or
// the facts cannot be read. The record is a claim (a supervisor told
// another spec, or a record edited to add limits, would claim caps that
// were never set); the leader's cgroup is the fact.
func (m *Manager) capsBroken(rec *runrecord.Record, idx *procIndex) string {
	mounts, err := idx.cgroupMounts()
	if err != nil {
		return ""
	}
	g, err := runGroup(rec, mounts)
	if err != nil {
		return "" // gone since the probe
	}
	if g == nil {
		return fmt.Sprintf("the run has no cgroup of its own: its limits (%s) do not hold", DescribeLimits(*rec.Limits))
	}
	if in, err := g.Holds(mounts, rec.PID); err == nil && !in {
		return fmt.Sprintf("pid %d is not in the run's cgroup: its limits (%s) do not hold for it", rec.PID, DescribeLimits(*rec.Limits))
	}
	return ""
}

// runGroup is rec's group, found from live facts, not the record: under
// the cgroup of its supervisor (alive, and vouched for as this run's),
// by the name only this run's group has. nil when there is none.
func runGroup(rec *runrecord.Record, mounts cgroup.Mounts) (*cgroup.Group, error) {
	return mounts.Find(rec.SupervisorPID, cgroup.Leaf(rec.Name, rec.RunID))
}

// cgroupMounts reads the cgroup mounts once for the call.
func (x *procIndex) cgroupMounts() (cgroup.Mounts, error) {
	if x.mounts == nil && x.mountsErr == nil {
		x.mounts, x.mountsErr = cgroup.ReadMounts()
	}
	return x.mounts, x.mountsErr
}
