package abtest

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agent-box/agent-box/cgroup"
	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
)

// ReapRunsAtCleanup ends, when the test is over, every run started under
// stateDir that is still alive. A supervisor outlives the server by design,
// so a run a test left behind goes on writing its run dir (its exit record,
// the record's temp file) while t.TempDir's cleanup removes the tree, and
// that RemoveAll fails with "directory not empty". Registered before the
// session's Close, it runs after it (cleanups run last-in first-out) and
// before the TempDir removal, which was registered earlier still.
func ReapRunsAtCleanup(t testing.TB, stateDir string) {
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	t.Cleanup(func() { reapRuns(t, abs) })
}

// stateDirArg is the state dir that args give agent-box (--state-dir DIR
// or --state-dir=DIR) as its own arguments, wherever in a wrapper's
// command line (prlimit, env, ssh) they stand; "" when none does. A state
// dir hidden in a script (sh -c '... --state-dir "$1"') is not found: such
// a test waits for its runs itself.
func stateDirArg(args []string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--state-dir="); ok {
			return v
		}
		if a == "--state-dir" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// reapRuns SIGKILLs the sessions of the supervisors that the records under
// stateDir name, or whose stderr (the run dir's supervisor.log) lies under
// stateDir, and waits until they are gone.
func reapRuns(t testing.TB, stateDir string) {
	prefix := stateDir + string(filepath.Separator)
	deadline := time.Now().Add(10 * time.Second)
	for {
		procs, err := proc.Processes()
		if err != nil {
			t.Logf("reaping runs of %s: %v", stateDir, err)
			return
		}
		sessions := map[int]bool{}
		recorded := recordedSupervisors(stateDir)
		for _, p := range procs {
			if p.SID == p.PID && p.PID > 1 {
				// A supervisor is non-dumpable: as a normal user its
				// /proc/PID/fd is closed to us, and the records say
				// which it is.
				if start, ok := recorded[p.PID]; ok && start == p.StartTime {
					sessions[p.PID] = true
				} else if log, err := os.Readlink("/proc/" + strconv.Itoa(p.PID) + "/fd/2"); err == nil && strings.HasPrefix(log, prefix) {
					sessions[p.PID] = true
				}
			}
		}
		alive := 0
		for _, p := range procs {
			if sessions[p.SID] && p.PID > 1 && p.PID != os.Getpid() {
				alive++
				syscall.Kill(p.PID, syscall.SIGKILL)
			}
		}
		if alive == 0 {
			removeGroups(stateDir)
			return
		}
		if time.Now().After(deadline) {
			t.Logf("reaping runs of %s: %d process(es) still alive after 10 s", stateDir, alive)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// recordedSupervisors maps the supervisor pids the records under stateDir
// name (runs in place, and runs being built) to their start times.
func recordedSupervisors(stateDir string) map[int]uint64 {
	out := map[int]uint64{}
	for _, pattern := range []string{"*", ".new-*"} {
		paths, _ := filepath.Glob(filepath.Join(stateDir, "runs", "*", pattern, "record.json"))
		for _, p := range paths {
			var r struct {
				PID   int    `json:"supervisor_pid"`
				Start uint64 `json:"supervisor_start_time"`
			}
			// A test may have planted a FIFO or a symlink here: never
			// block on it, nor follow it.
			f, err := runrecord.OpenFile(p, os.O_RDONLY, 0, "record")
			if err != nil {
				continue
			}
			b, err := io.ReadAll(io.LimitReader(f, 1<<20))
			f.Close()
			if err == nil && json.Unmarshal(b, &r) == nil && r.PID > 1 {
				out[r.PID] = r.Start
			}
		}
	}
	return out
}

// removeGroups removes the cgroups of the runs under stateDir that their
// supervisors, killed above, could not: a run with limits has one under
// this process's cgroup (cgroup.Leaf), which would outlive the test.
func removeGroups(stateDir string) {
	names, _ := filepath.Glob(filepath.Join(stateDir, "runs", "*", "*"))
	if len(names) == 0 {
		return
	}
	h, err := cgroup.Self()
	if err != nil {
		return
	}
	for _, dir := range names {
		if g := h.Group(cgroup.Leaf(filepath.Base(filepath.Dir(dir)), filepath.Base(dir))); g != nil {
			_ = g.Remove()
		}
	}
}
