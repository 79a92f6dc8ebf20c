package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Facts about processes on this machine, read from /proc (proc(5)). The
// ssh lane's "remote" box is this machine, so the tests can check what
// agent-box says against what the kernel says.

// procStat returns the state (field 3) and start time (field 22) of pid.
func procStat(pid int) (state string, start uint64, ppid int, err error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", 0, 0, err
	}
	// comm (field 2) may hold spaces and parentheses: split after its last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", 0, 0, errors.New("malformed stat")
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3
	if len(f) < 20 {
		return "", 0, 0, errors.New("short stat")
	}
	ppid, err = strconv.Atoi(f[1])
	if err != nil {
		return "", 0, 0, err
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	return f[0], start, ppid, err
}

// alive reports whether the process pid that started at start still runs
// (exists, is not a zombie, and is not a later process with a reused pid).
func alive(pid int, start uint64) bool {
	state, s, _, err := procStat(pid)
	return err == nil && s == start && state != "Z" && state != "X"
}

func pids() []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

func cmdline(pid int) []string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

// serverPIDs returns the agent-box MCP servers running on stateDir: the
// processes whose argv is exactly the remote command the tests give ssh.
// Supervisors (argv "supervise NAME RUN_ID") do not match, nor does a
// server's child between its fork and its exec (a supervisor being
// launched, such as the spare a server keeps after its first start), which
// still shows its parent's argv.
func serverPIDs(stateDir string) []int {
	want := []string{binary, "--state-dir", stateDir}
	return servers(func(pid int) bool { return slices.Equal(cmdline(pid), want) })
}

// servers returns the live processes that match, less those whose parent
// matches too: a server's child between its fork and its exec still shows
// its parent's argv.
func servers(match func(pid int) bool) []int {
	parents := map[int]int{}
	for _, pid := range pids() {
		if match(pid) {
			if state, _, ppid, err := procStat(pid); err == nil && state != "Z" {
				parents[pid] = ppid
			}
		}
	}
	var out []int
	for pid, ppid := range parents {
		if _, forked := parents[ppid]; !forked {
			out = append(out, pid)
		}
	}
	slices.Sort(out)
	return out
}

// descendants returns the processes below pid in the process tree.
func descendants(pid int) []int {
	children := map[int][]int{}
	for _, p := range pids() {
		if _, _, ppid, err := procStat(p); err == nil {
			children[ppid] = append(children[ppid], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		out = append(out, children[p]...)
		queue = append(queue, children[p]...)
	}
	return out
}

// waitUntil polls cond until it holds or d has passed. It is for facts
// that no event announces (a process's death seen from outside, a port
// starting to accept); d is a bound against hanging, not a measurement.
// It fails the test with t.Fatalf, so it is for the test's own goroutine;
// another goroutine calls pollUntil and reports with t.Errorf.
func waitUntil(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	if !pollUntil(context.Background(), d, cond) {
		t.Fatalf("still waiting after %s for %s", d, what)
	}
}

// pollUntil is waitUntil's loop: it polls cond until it holds (true), or d
// has passed or ctx is done (false).
func pollUntil(ctx context.Context, d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond): // polling interval; see waitUntil
		}
	}
	return true
}

// procID names a process across pid reuse: its pid and start time.
type procID struct {
	pid   int
	start uint64
}

// freshServer is a condition for pollUntil: it holds once list (a
// serverPIDs) shows a server not in seen, and adds every server it sees
// to seen, so that seen ends as every distinct server seen.
func freshServer(seen map[procID]bool, list func() []int) func() bool {
	return func() bool {
		fresh := false
		for _, pid := range list() {
			if _, start, _, err := procStat(pid); err == nil && !seen[procID{pid, start}] {
				seen[procID{pid, start}] = true
				fresh = true
			}
		}
		return fresh
	}
}
