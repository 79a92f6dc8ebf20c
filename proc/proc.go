// Package proc reads the Linux facts the outcome matrix needs: the boot id,
// a process's start time (field 22 of /proc/PID/stat), the members of a
// process group, and the names of signals as run records hold them. Linux
// only, by design: agent-box runs on Linux boxes.
//
// Caveats: a /proc mounted with hidepid hides other users' processes, which
// then read as gone; agent-box only probes its own user's processes. Pids are
// read in the pid namespace of the /proc mount, which must be the one the
// runs were started in.
package proc

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/agent-box/agent-box/outcome"
)

// ErrNoProcess is returned when the pid does not exist or is a zombie.
var ErrNoProcess = errors.New("no such process")

// ErrMalformedStat is returned by ParseStat for contents that are not a
// /proc/PID/stat line.
var ErrMalformedStat = errors.New("malformed /proc/PID/stat")

// procRoot is where /proc is mounted; a var so tests can point it at a
// fixture tree.
var procRoot = "/proc"

// Stat is the part of /proc/PID/stat agent-box uses.
type Stat struct {
	PID       int
	State     byte   // field 3: R, S, D, Z, T, ...
	PPID      int    // field 4
	PGID      int    // field 5
	SID       int    // field 6
	StartTime uint64 // field 22, clock ticks since boot
	// CPUTicks is fields 14-17 summed: utime, stime, cutime, cstime, in
	// clock ticks (ClockTicks a second): the process's own CPU time (all
	// its threads) and that of the children it has waited for.
	CPUTicks uint64
	RSSPages int64 // field 24: resident pages now (PageSize bytes each)
}

// Fact is s as outcome decides from it: the ids that tie a process to a
// run.
func (s Stat) Fact() outcome.Proc {
	return outcome.Proc{PID: s.PID, PGID: s.PGID, SID: s.SID, StartTime: s.StartTime}
}

// Facts are the Fact of each of stats.
func Facts(stats []Stat) []outcome.Proc {
	out := make([]outcome.Proc, len(stats))
	for i, s := range stats {
		out[i] = s.Fact()
	}
	return out
}

// Dead reports whether the state is one in which the process has exited:
// a zombie (Z) still holds its pid until reaped but runs nothing, and X is
// the instant of being reaped (proc(5)).
func (s Stat) Dead() bool { return s.State == 'Z' || s.State == 'X' }

// BootID returns /proc/sys/kernel/random/boot_id, trimmed.
func BootID() (string, error) {
	data, err := os.ReadFile(procRoot + "/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("read boot id: %w", err)
	}
	id := string(bytes.TrimSpace(data))
	if id == "" {
		return "", errors.New("read boot id: empty")
	}
	return id, nil
}

// readPIDFile reads /proc/PID/name. A pid that names no process (≤ 0,
// missing, or gone between open and read: ESRCH) is ErrNoProcess.
func readPIDFile(pid int, name string) ([]byte, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
	}
	data, err := os.ReadFile(procRoot + "/" + strconv.Itoa(pid) + "/" + name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			return nil, fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
		}
		return nil, fmt.Errorf("pid %d: %w", pid, err)
	}
	return data, nil
}

// ReadStat parses /proc/PID/stat. The comm field may hold spaces and
// parentheses: parse from the last ')'. A missing pid is ErrNoProcess.
func ReadStat(pid int) (Stat, error) {
	data, err := readPIDFile(pid, "stat")
	if err != nil {
		return Stat{}, err
	}
	st, err := ParseStat(data)
	if err != nil {
		return Stat{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	if st.PID != pid {
		return Stat{}, fmt.Errorf("pid %d: stat names pid %d: %w", pid, st.PID, ErrMalformedStat)
	}
	return st, nil
}

// ParseStat parses the contents of a /proc/PID/stat file (fuzzed).
//
// The line is "pid (comm) state ppid pgrp session ... starttime ...". comm
// is whatever the process set with prctl(PR_SET_NAME) or its executable's
// name: it may contain spaces, parentheses and newlines, so it is bounded by
// the first '(' and the last ')', and only the fields after the last ')'
// are split.
func ParseStat(data []byte) (Stat, error) {
	sp := bytes.IndexByte(data, ' ')
	if sp <= 0 || sp+1 >= len(data) || data[sp+1] != '(' {
		return Stat{}, fmt.Errorf("%w: no \"pid (\" prefix", ErrMalformedStat)
	}
	pid, err := parseNonNegative(data[:sp])
	if err != nil || pid == 0 {
		return Stat{}, fmt.Errorf("%w: field 1 (pid) %q", ErrMalformedStat, data[:sp])
	}
	fields, err := fieldsAfterComm(data[sp+1:])
	if err != nil {
		return Stat{}, err
	}
	if len(fields) < 22-2 {
		return Stat{}, fmt.Errorf("%w: %d fields after comm, want at least %d", ErrMalformedStat, len(fields), 22-2)
	}
	st := Stat{PID: pid}
	state := fields[0]
	if len(state) != 1 || !isLetter(state[0]) {
		return Stat{}, fmt.Errorf("%w: field 3 (state) %q", ErrMalformedStat, state)
	}
	st.State = state[0]
	for _, f := range []struct {
		n   int
		dst *int
	}{{4, &st.PPID}, {5, &st.PGID}, {6, &st.SID}} {
		v, err := parseNonNegative(fields[f.n-3])
		if err != nil {
			return Stat{}, fmt.Errorf("%w: field %d %q", ErrMalformedStat, f.n, fields[f.n-3])
		}
		*f.dst = v
	}
	st.StartTime, err = strconv.ParseUint(string(fields[22-3]), 10, 64)
	if err != nil {
		return Stat{}, fmt.Errorf("%w: field 22 (starttime) %q", ErrMalformedStat, fields[22-3])
	}
	st.CPUTicks, st.RSSPages = parseUsage(fields)
	return st, nil
}

// fieldsAfterComm splits a /proc/PID/stat line after its comm, which may
// hold spaces and parentheses of its own: field n (1-based, as in
// proc(5)) is fields[n-3].
func fieldsAfterComm(data []byte) ([][]byte, error) {
	end := bytes.LastIndexByte(data, ')')
	if end < 0 {
		return nil, fmt.Errorf("%w: no ')' closing comm", ErrMalformedStat)
	}
	rest := data[end+1:]
	if len(rest) == 0 || rest[0] != ' ' {
		return nil, fmt.Errorf("%w: no space after comm", ErrMalformedStat)
	}
	return bytes.Fields(rest), nil
}

// parseUsage reads fields 14-17 (CPU ticks) and 24 (rss) from the fields
// after comm. They are figures, not identity: one that is missing or not a
// number counts 0 rather than make the process unreadable, since a stat
// that fails to parse makes a live process "not provably ours" (Reused).
// cutime, cstime and rss are signed in proc(5); a negative one counts 0.
func parseUsage(fields [][]byte) (cpu uint64, rss int64) {
	num := func(n int) uint64 {
		if n-3 >= len(fields) {
			return 0
		}
		v, err := strconv.ParseInt(string(fields[n-3]), 10, 64)
		if err != nil || v < 0 {
			return 0
		}
		return uint64(v)
	}
	for n := 14; n <= 17; n++ {
		cpu = min(cpu+num(n), math.MaxInt64) // each is at most MaxInt64: no wrap
	}
	return cpu, int64(num(24))
}

// parseNonNegative accepts only what the kernel prints for a pid_t that
// names a process: decimal digits, no sign.
func parseNonNegative(b []byte) (int, error) {
	if len(b) == 0 || len(b) > 10 {
		return 0, strconv.ErrSyntax
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, strconv.ErrSyntax
		}
	}
	v, err := strconv.ParseInt(string(b), 10, 32)
	return int(v), err
}

func isLetter(c byte) bool { return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' }

// ProbeStat tells whether pid is alive and is the process that started at
// start: Same, Reused (alive, different start time) or Gone (missing or
// zombie). With Same comes the stat it read: the facts (group, session,
// parent) that go with the answer, read in the same read, so that they
// are of the process the answer is about.
//
// An error other than ErrNoProcess (say, a /proc entry that cannot be read)
// means something holds the pid but it cannot be shown to be ours, which is
// Reused: never Same, so nothing signals it, and never Gone, so nothing
// declares a possibly live run dead.
func ProbeStat(pid int, start uint64) (outcome.Liveness, Stat) {
	st, err := ReadStat(pid)
	switch {
	case errors.Is(err, ErrNoProcess) || err == nil && st.Dead():
		return outcome.Gone, Stat{}
	case err != nil || st.StartTime != start:
		return outcome.Reused, Stat{}
	default:
		return outcome.Same, st
	}
}

// Processes returns the live (non-zombie) processes, a snapshot: those
// that exit during the scan are left out, and one forked during the scan
// may be missed.
func Processes() ([]Stat, error) {
	dir, err := os.Open(procRoot)
	if err != nil {
		return nil, fmt.Errorf("scan processes: %w", err)
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("scan processes: %w", err)
	}
	out := make([]Stat, 0, len(names))
	for _, name := range names {
		pid, err := parseNonNegative([]byte(name))
		if err != nil || pid == 0 {
			continue // "self", "sys", "meminfo", ...
		}
		st, err := ReadStat(pid)
		if err != nil || st.Dead() {
			// Exited since the directory was read, or unreadable: either
			// way nothing agent-box could show to be its own.
			continue
		}
		out = append(out, st)
	}
	return out, nil
}

// Descendants returns, from the snapshot procs, the processes whose chain
// of parents leads to root (root itself excluded), sorted by pid. For a
// child subreaper such as a run's supervisor these are every process the
// run started and that still lives, whatever its process group or session:
// orphans are reparented to the subreaper, not to init.
//
// A process for which prune returns true is left out with everything
// below it (prune may be nil).
func Descendants(procs []Stat, root int, prune func(Stat) bool) []Stat {
	children := make(map[int][]Stat, len(procs))
	for _, p := range procs {
		children[p.PPID] = append(children[p.PPID], p)
	}
	var out []Stat
	seen := map[int]bool{root: true} // a snapshot taken across a reparenting could hold a cycle
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			if !seen[c.PID] && (prune == nil || !prune(c)) {
				seen[c.PID] = true
				out = append(out, c)
				queue = append(queue, c.PID)
			}
		}
	}
	slices.SortFunc(out, func(a, b Stat) int { return a.PID - b.PID })
	return out
}

// Children returns the pids of pid's children, from
// /proc/PID/task/*/children (a child belongs to the thread that forked
// it). It reads a few small files where a scan of /proc reads hundreds;
// kernels without CONFIG_PROC_CHILDREN have no such files, which is an
// error here.
func Children(pid int) ([]int, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("%s/%d/task", procRoot, pid))
	if err != nil {
		return nil, fmt.Errorf("children of %d: %w", pid, err)
	}
	var kids []int
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("%s/%d/task/%s/children", procRoot, pid, t.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			if _, serr := os.Stat(fmt.Sprintf("%s/%d/task/%s", procRoot, pid, t.Name())); serr != nil {
				continue // the thread ended since the directory was read
			}
		}
		if err != nil {
			return nil, fmt.Errorf("children of %d: %w", pid, err)
		}
		for _, f := range bytes.Fields(b) {
			if k, err := parseNonNegative(f); err == nil {
				kids = append(kids, k)
			}
		}
	}
	slices.Sort(kids)
	return kids, nil
}

// Cmdline returns the arguments of pid (/proc/PID/cmdline).
func Cmdline(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("%s/%d/cmdline", procRoot, pid))
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSuffix(b, []byte{0})
	if len(b) == 0 {
		return nil, nil
	}
	return strings.Split(string(b), "\x00"), nil
}

// File names a file by device and inode, as stat(2) gives them.
type File struct {
	Dev, Ino uint64
}

// FileOf returns the identity of the file at path, following symlinks.
func FileOf(path string) (File, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return File{}, err
	}
	return File{Dev: st.Dev, Ino: st.Ino}, nil
}

// Exe says which file pid runs: the identity of /proc/PID/exe's target
// (stat follows the link to the very file the kernel mapped, even when it
// was deleted or replaced since) and the path the kernel shows for it,
// with the " (deleted)" it appends for a file that is gone cut off and
// reported as deleted. Unlike the command line, no process can choose
// these: they change only by an execve(2) of another file.
func Exe(pid int) (f File, path string, deleted bool, err error) {
	link := fmt.Sprintf("%s/%d/exe", procRoot, pid)
	if f, err = FileOf(link); err != nil {
		return File{}, "", false, err
	}
	if path, err = os.Readlink(link); err != nil {
		return File{}, "", false, err
	}
	path, deleted = strings.CutSuffix(path, " (deleted)")
	return f, path, deleted, nil
}

// EnvironHas reports whether the environment pid was exec'd with
// (/proc/PID/environ) holds each of the entries kvs ("KEY=value") exactly. That
// environment is the process's own from its execve(2): no other process
// can change it without ptrace(2), which it could kill it with anyway. A
// process that is not dumpable (a set-user-ID program, or one that made
// itself so) shows it to root only: an error then, as for a gone one. A
// program may write over its own (setproctitle does): it then holds
// whatever the program put there.
func EnvironHas(pid int, kvs ...string) (bool, error) {
	data, err := readPIDFile(pid, "environ")
	if err != nil {
		return false, err
	}
	found := make([]bool, len(kvs))
	for entry := range bytes.SplitSeq(data, []byte{0}) {
		for i, kv := range kvs {
			found[i] = found[i] || string(entry) == kv
		}
	}
	return !slices.Contains(found, false), nil
}

// ArgsEnd returns the address in process pid's memory one past the end of
// its command line (/proc/PID/stat field 49, arg_end, Linux 3.5): what
// /proc/PID/cmdline reads ends there.
func ArgsEnd(pid int) (uint64, error) {
	data, err := readPIDFile(pid, "stat")
	if err != nil {
		return 0, err
	}
	fields, err := fieldsAfterComm(data)
	if err != nil {
		return 0, err
	}
	const n = 49
	if len(fields) < n-2 {
		return 0, fmt.Errorf("%w: %d fields after comm, want at least %d", ErrMalformedStat, len(fields), n-2)
	}
	v, err := strconv.ParseUint(string(fields[n-3]), 10, 64)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("%w: field %d (arg_end) %q", ErrMalformedStat, n, fields[n-3])
	}
	return v, nil
}

// TracerPID returns the thread id of the tracer that has ptrace-attached
// pid, 0 if none (/proc/PID/status, "TracerPid:": task_pid_nr_ns of
// ptrace_parent in fs/proc/array.c task_state). /proc/PID/status is
// world-readable, a non-dumpable process's too.
func TracerPID(pid int) (int, error) {
	data, err := readPIDFile(pid, "status")
	if err != nil {
		return 0, err
	}
	return ParseTracerPID(data)
}

// ParseTracerPID reads the TracerPid line of a /proc/PID/status.
func ParseTracerPID(status []byte) (int, error) {
	for line := range bytes.SplitSeq(status, []byte{'\n'}) {
		v, ok := bytes.CutPrefix(line, []byte("TracerPid:"))
		if !ok {
			continue
		}
		tid, err := parseNonNegative(bytes.TrimSpace(v))
		if err != nil {
			return 0, fmt.Errorf("TracerPid %q: %w", v, err)
		}
		return tid, nil
	}
	return 0, errors.New("no TracerPid in the process's status")
}
