package proc_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/proc"
)

const helperEnv = "PROC_TEST_HELPER"

// TestMain turns the test binary into a helper process when helperEnv is
// set, so the tests need no shell scripts or external binaries.
//
//	block: wait for EOF on stdin, then exit 0
//	group: start a "block" child in the same process group, print
//	       "<own pid> <child pid>", then wait for EOF on stdin and the child
func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "block":
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	case "group":
		kid := helper("block")
		kid.Stdin = os.Stdin
		if err := kid.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Printf("%d %d\n", os.Getpid(), kid.Process.Pid)
		_, _ = io.Copy(io.Discard, os.Stdin)
		_ = kid.Wait()
		os.Exit(0)
	default:
		fmt.Fprintln(os.Stderr, "unknown helper", os.Getenv(helperEnv))
		os.Exit(2)
	}
}

func helper(mode string) *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	cmd.Stderr = os.Stderr
	return cmd
}

// startBlocker starts a "block" helper as the leader of a new process group.
// Closing the returned writer makes it exit.
func startBlocker(t *testing.T) (*exec.Cmd, io.WriteCloser) {
	t.Helper()
	cmd := helper("block")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, stdin
}

// waitExitedNotReaped blocks until pid has exited but leaves it a zombie
// (waitid(2) with WNOWAIT), so a test can look at the zombie.
func waitExitedNotReaped(t *testing.T, pid int) {
	t.Helper()
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			t.Fatalf("waitid(%d): %v", pid, err)
		}
		return
	}
}

func TestBootID(t *testing.T) {
	id, err := proc.BootID()
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`).MatchString(id) {
		t.Errorf("BootID() = %q, want a trimmed UUID", id)
	}
}

func TestBootIDFake(t *testing.T) {
	root := t.TempDir()
	proc.SetProcRoot(t, root)
	if _, err := proc.BootID(); err == nil {
		t.Error("BootID() with no boot_id file: no error")
	}
	dir := filepath.Join(root, "sys/kernel/random")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ content, want string }{
		{"abc\n", "abc"},
		{"  abc  \n\n", "abc"},
		{"\n", ""},
	} {
		if err := os.WriteFile(filepath.Join(dir, "boot_id"), []byte(tt.content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := proc.BootID()
		if tt.want == "" {
			if err == nil {
				t.Errorf("BootID() of %q = %q, want an error", tt.content, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("BootID() of %q = %q, %v; want %q", tt.content, got, err, tt.want)
		}
	}
}

func TestReadStatSelf(t *testing.T) {
	st, err := proc.ReadStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	want := proc.Stat{PID: os.Getpid(), PPID: os.Getppid(), PGID: unix.Getpgrp(), StartTime: st.StartTime, State: st.State,
		CPUTicks: st.CPUTicks, RSSPages: st.RSSPages}
	if sid, err := unix.Getsid(0); err == nil {
		want.SID = sid
	}
	if st != want {
		t.Errorf("ReadStat(self) = %+v, want %+v", st, want)
	}
	if st.StartTime == 0 {
		t.Error("start time 0")
	}
	if st.RSSPages <= 0 {
		t.Errorf("rss %d pages: the test process is resident", st.RSSPages)
	}
	if st.Dead() {
		t.Errorf("the test process is dead? state %c", st.State)
	}
}

// ArgsEnd is where the command line ends in the process's memory: the
// bytes before it are what /proc/PID/cmdline reads.
func TestArgsEnd(t *testing.T) {
	cmdline, err := os.ReadFile("/proc/self/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	end, err := proc.ArgsEnd(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	mem, err := os.Open("/proc/self/mem")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	got := make([]byte, len(cmdline))
	if _, err := mem.ReadAt(got, int64(end)-int64(len(got))); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, cmdline) {
		t.Errorf("memory before arg_end = %q, want the command line %q", got, cmdline)
	}
	if _, err := proc.ArgsEnd(1 << 30); !errors.Is(err, proc.ErrNoProcess) {
		t.Errorf("ArgsEnd of no process = %v, want ErrNoProcess", err)
	}
}

func TestMissingPid(t *testing.T) {
	data, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Fatal(err)
	}
	max, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range []int{-1, 0, max + 1} {
		if _, err := proc.ReadStat(pid); !errors.Is(err, proc.ErrNoProcess) {
			t.Errorf("ReadStat(%d) error = %v, want ErrNoProcess", pid, err)
		}
		if _, err := startTime(pid); !errors.Is(err, proc.ErrNoProcess) {
			t.Errorf("StartTime(%d) error = %v, want ErrNoProcess", pid, err)
		}
		if got := probe(pid, 1); got != outcome.Gone {
			t.Errorf("Probe(%d) = %v, want Gone", pid, got)
		}
	}
}

// TestLifecycle follows one child through alive, reused-looking, zombie and
// reaped, checking every probe at each stage.
func TestLifecycle(t *testing.T) {
	cmd, stdin := startBlocker(t)
	pid := cmd.Process.Pid

	st, err := proc.ReadStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	if st.PGID != pid {
		t.Errorf("PGID = %d, want %d (own group)", st.PGID, pid)
	}
	if st.PPID != os.Getpid() {
		t.Errorf("PPID = %d, want %d", st.PPID, os.Getpid())
	}
	start, err := startTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	if start != st.StartTime {
		t.Errorf("StartTime = %d, ReadStat says %d", start, st.StartTime)
	}
	if got := probe(pid, start); got != outcome.Same {
		t.Errorf("alive: Probe = %v, want Same", got)
	}
	// A different recorded start time is what a reused pid looks like.
	for _, other := range []uint64{start + 1, start - 1, 0} {
		if got := probe(pid, other); got != outcome.Reused {
			t.Errorf("alive, start %d recorded, %d live: Probe = %v, want Reused", other, start, got)
		}
	}
	if got, err := groupMembers(pid); err != nil || !slices.Equal(got, []int{pid}) {
		t.Errorf("alive: GroupMembers = %v, %v; want [%d]", got, err, pid)
	}

	// Exited, not yet waited for: a zombie is dead.
	_ = stdin.Close()
	waitExitedNotReaped(t, pid)
	st, err = proc.ReadStat(pid)
	if err != nil {
		t.Fatalf("zombie: ReadStat: %v", err)
	}
	if st.State != 'Z' || !st.Dead() {
		t.Errorf("zombie: state %c, Dead %v", st.State, st.Dead())
	}
	if _, err := startTime(pid); !errors.Is(err, proc.ErrNoProcess) {
		t.Errorf("zombie: StartTime error = %v, want ErrNoProcess", err)
	}
	if got := probe(pid, start); got != outcome.Gone {
		t.Errorf("zombie: Probe = %v, want Gone", got)
	}
	if got, err := groupMembers(pid); err != nil || len(got) != 0 {
		t.Errorf("zombie: GroupMembers = %v, %v; want none", got, err)
	}

	// Reaped.
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := proc.ReadStat(pid); !errors.Is(err, proc.ErrNoProcess) {
		t.Errorf("reaped: ReadStat error = %v, want ErrNoProcess", err)
	}
	if got := probe(pid, start); got != outcome.Gone {
		t.Errorf("reaped: Probe = %v, want Gone", got)
	}
}

// A snapshot of Processes finds a group's members, and only them.
func TestProcessesFindAGroup(t *testing.T) {
	cmd := helper("group")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var leader, kid int
	if _, err := fmt.Sscanf(line, "%d %d", &leader, &kid); err != nil {
		t.Fatalf("helper said %q: %v", line, err)
	}
	if leader != cmd.Process.Pid {
		t.Fatalf("leader %d, started %d", leader, cmd.Process.Pid)
	}
	want := []int{leader, kid}
	slices.Sort(want)
	got, err := groupMembers(leader)
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("GroupMembers(%d) = %v, %v; want %v", leader, got, err, want)
	}
	// The test's own group must not leak in, nor the group into ours.
	if own, err := groupMembers(unix.Getpgrp()); err != nil || slices.Contains(own, kid) || !slices.Contains(own, os.Getpid()) {
		t.Errorf("GroupMembers(own group) = %v, %v", own, err)
	}

	// The helper waits for its child before exiting, so once it is reaped
	// the whole group is gone.
	_ = stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if got, err := groupMembers(leader); err != nil || len(got) != 0 {
		t.Errorf("after exit: GroupMembers = %v, %v; want none", got, err)
	}
}

// TestProcessesFakeProc checks the scan against a fake /proc holding the
// awkward cases: non-numeric entries, a zombie member, a process that
// vanished between readdir and reading its stat, and nasty comm values.
func TestProcessesFakeProc(t *testing.T) {
	root := t.TempDir()
	proc.SetProcRoot(t, root)
	stat := func(pid, pgid int, state, comm string) {
		dir := filepath.Join(root, strconv.Itoa(pid))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		line := fmt.Sprintf("%d (%s) %s 1 %d %d 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0\n", pid, comm, state, pgid, pgid, 100+pid)
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(line), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	stat(40, 40, "S", "leader")
	stat(41, 40, "R", ") 99 99 (")
	stat(42, 40, "Z", "zombie member")
	stat(43, 7, "S", "other group")
	stat(400, 40, "D", "x\ny")
	// A process that exited after readdir: its directory is empty.
	if err := os.MkdirAll(filepath.Join(root, "44"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"self", "sys", "0", "-5", "meminfo"} {
		if err := os.MkdirAll(filepath.Join(root, name), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	got, err := groupMembers(40)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{40, 41, 400}; !slices.Equal(got, want) {
		t.Errorf("GroupMembers(40) = %v, want %v", got, want)
	}
	if got := probe(41, 141); got != outcome.Same {
		t.Errorf("Probe(41) = %v, want Same", got)
	}
	if got := probe(42, 142); got != outcome.Gone {
		t.Errorf("Probe(zombie) = %v, want Gone", got)
	}
	if got := probe(44, 144); got != outcome.Gone {
		t.Errorf("Probe(vanished) = %v, want Gone", got)
	}

	// A stat that names another pid is not trusted.
	stat(45, 45, "S", "x")
	if err := os.Rename(filepath.Join(root, "45", "stat"), filepath.Join(root, "40", "stat")); err != nil {
		t.Fatal(err)
	}
	if _, err := proc.ReadStat(40); !errors.Is(err, proc.ErrMalformedStat) {
		t.Errorf("ReadStat with a mismatched pid: error = %v, want ErrMalformedStat", err)
	}
	if got := probe(40, 145); got != outcome.Reused {
		t.Errorf("Probe of an unparseable stat = %v, want Reused (alive, not provably ours)", got)
	}
}

const fixtures = "../testdata/fixtures/proc"

func TestParseStatFixtures(t *testing.T) {
	tests := []struct {
		file string
		want proc.Stat // zero: an error is expected
	}{
		{"plain.stat", proc.Stat{PID: 5712, State: 'R', PPID: 5710, PGID: 5710, SID: 1990, StartTime: 48125, RSSPages: 355}},
		{"spaces.stat", proc.Stat{PID: 101, State: 'S', PPID: 1, PGID: 101, SID: 101, StartTime: 1000, RSSPages: 355}},
		{"paren-inside.stat", proc.Stat{PID: 102, State: 'S', PPID: 1, PGID: 102, SID: 90, StartTime: 2000, RSSPages: 355}},
		{"fake-fields.stat", proc.Stat{PID: 103, State: 'S', PPID: 55, PGID: 103, SID: 55, StartTime: 3000, RSSPages: 355}},
		{"newline.stat", proc.Stat{PID: 104, State: 'D', PPID: 2, PGID: 0, SID: 0, StartTime: 4000, RSSPages: 355}},
		{"empty-comm.stat", proc.Stat{PID: 105, State: 'I', PPID: 2, StartTime: 5, RSSPages: 355}},
		{"only-parens.stat", proc.Stat{PID: 106, State: 'T', PPID: 1, PGID: 106, SID: 106, StartTime: 6000, RSSPages: 355}},
		{"zombie.stat", proc.Stat{PID: 107, State: 'Z', PPID: 1, PGID: 107, SID: 1, StartTime: 7000, RSSPages: 355}},
		// CPU: utime 7 + stime 3 + cutime 250 + cstime 40; rss 25600 pages.
		{"usage.stat", proc.Stat{PID: 114, State: 'S', PPID: 1, PGID: 114, SID: 114, StartTime: 9000, CPUTicks: 300, RSSPages: 25600}},
		// Figures that are not numbers, or negative, count 0: they do not
		// make the process unreadable.
		{"bad-usage-fields.stat", proc.Stat{PID: 115, State: 'S', PPID: 1, PGID: 115, SID: 115, StartTime: 9001, CPUTicks: 5}},
		{"short-tail.stat", proc.Stat{PID: 108, State: 'S', PPID: 1, PGID: 108, SID: 108, StartTime: 18446744073709551615}},
		{"bad-truncated.stat", proc.Stat{}},
		{"bad-no-paren.stat", proc.Stat{}},
		{"bad-starttime.stat", proc.Stat{}},
		{"bad-state.stat", proc.Stat{}},
		{"bad-empty.stat", proc.Stat{}},
		{"bad-no-space-after-comm.stat", proc.Stat{}},
		{"bad-pid.stat", proc.Stat{}},
	}
	files, err := filepath.Glob(filepath.Join(fixtures, "*.stat"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(tests) {
		t.Errorf("%d fixtures on disk, %d in the table: keep them in step", len(files), len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(fixtures, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := proc.ParseStat(data)
			if tt.want == (proc.Stat{}) {
				if !errors.Is(err, proc.ErrMalformedStat) {
					t.Errorf("ParseStat = %+v, %v; want ErrMalformedStat", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ParseStat = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// render writes st back as a stat line with the given comm, as the kernel
// would (proc(5), fs/proc/array.c do_task_stat).
func render(st proc.Stat, comm []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d (%s) %c %d %d %d 0 -1", st.PID, comm, st.State, st.PPID, st.PGID, st.SID)
	for n := 9; n < 22; n++ {
		if n == 14 {
			fmt.Fprintf(&b, " %d", st.CPUTicks) // utime: the sum, with 0 in 15-17
			continue
		}
		b.WriteString(" 0")
	}
	fmt.Fprintf(&b, " %d 0 %d\n", st.StartTime, st.RSSPages)
	return b.Bytes()
}

func FuzzParseStat(f *testing.F) {
	files, err := filepath.Glob(filepath.Join(fixtures, "*.stat"))
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	if data, err := os.ReadFile("/proc/self/stat"); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := proc.ParseStat(data)
		if err != nil {
			if !errors.Is(err, proc.ErrMalformedStat) {
				t.Fatalf("error %v does not wrap ErrMalformedStat", err)
			}
			return
		}
		if st.PID <= 0 || st.PPID < 0 || st.PGID < 0 || st.SID < 0 {
			t.Fatalf("parsed impossible ids: %+v", st)
		}
		// The comm the parser skipped must survive a re-render: the fields
		// are found again wherever comm's parentheses are.
		comm := data[bytes.IndexByte(data, '(')+1 : bytes.LastIndexByte(data, ')')]
		again, err := proc.ParseStat(render(st, comm))
		if err != nil {
			t.Fatalf("re-rendered %+v does not parse: %v", st, err)
		}
		if again != st {
			t.Fatalf("re-rendered %+v parses as %+v", st, again)
		}
	})
}

func TestDescendants(t *testing.T) {
	procs := []proc.Stat{
		{PID: 1, PPID: 0},
		{PID: 10, PPID: 1},                     // the supervisor
		{PID: 11, PPID: 10},                    // the leader
		{PID: 12, PPID: 11, PGID: 12, SID: 12}, // setsid'd grandchild
		{PID: 13, PPID: 10},                    // orphan reparented to the subreaper
		{PID: 14, PPID: 13},
		{PID: 20, PPID: 1}, // someone else
		{PID: 21, PPID: 20},
	}
	pids := func(ss []proc.Stat) []int {
		var out []int
		for _, s := range ss {
			out = append(out, s.PID)
		}
		return out
	}
	if got := pids(proc.Descendants(procs, 10, nil)); !slices.Equal(got, []int{11, 12, 13, 14}) {
		t.Errorf("descendants of 10: %v", got)
	}
	if got := proc.Descendants(procs, 14, nil); len(got) != 0 {
		t.Errorf("descendants of a leaf: %v", got)
	}
	// A pruned process goes with everything below it.
	if got := pids(proc.Descendants(procs, 10, func(p proc.Stat) bool { return p.PID == 13 })); !slices.Equal(got, []int{11, 12}) {
		t.Errorf("descendants of 10 without 13's subtree: %v", got)
	}
	// A snapshot taken while a process was reparented can hold a cycle.
	cyc := []proc.Stat{{PID: 2, PPID: 3}, {PID: 3, PPID: 2}}
	if got := pids(proc.Descendants(cyc, 2, nil)); !slices.Equal(got, []int{3}) {
		t.Errorf("cycle: %v", got)
	}
}

func TestChildren(t *testing.T) {
	c := exec.Command("sleep", "30")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { c.Process.Kill(); c.Wait() }()
	kids, err := proc.Children(os.Getpid())
	if err != nil {
		t.Skipf("no /proc/PID/task/TID/children here: %v", err)
	}
	if !slices.Contains(kids, c.Process.Pid) {
		t.Errorf("children of the test %v lack the child %d", kids, c.Process.Pid)
	}
	if kids, err := proc.Children(c.Process.Pid); err != nil || len(kids) != 0 {
		t.Errorf("children of sleep: %v, %v", kids, err)
	}
}

// probe is proc.ProbeStat's answer alone.
func probe(pid int, start uint64) outcome.Liveness {
	l, _ := proc.ProbeStat(pid, start)
	return l
}

// startTime is field 22 of /proc/PID/stat; ErrNoProcess for a missing pid
// or a zombie.
func startTime(pid int) (uint64, error) {
	st, err := proc.ReadStat(pid)
	if err != nil {
		return 0, err
	}
	if st.Dead() {
		return 0, fmt.Errorf("pid %d is a zombie: %w", pid, proc.ErrNoProcess)
	}
	return st.StartTime, nil
}

// groupMembers are the pids of the live processes of Processes' snapshot
// whose group is pgid, sorted: what a scan of /proc finds of one group.
func groupMembers(pgid int) ([]int, error) {
	if pgid <= 0 {
		return nil, fmt.Errorf("process group %d: %w", pgid, proc.ErrNoProcess)
	}
	procs, err := proc.Processes()
	if err != nil {
		return nil, err
	}
	var members []int
	for _, st := range procs {
		if st.PGID == pgid {
			members = append(members, st.PID)
		}
	}
	slices.Sort(members)
	return members, nil
}

func TestTracerPID(t *testing.T) {
	tid, err := proc.TracerPID(os.Getpid())
	if err != nil || tid != 0 {
		t.Fatalf("TracerPID(self) = %d, %v; this test is not traced", tid, err)
	}
	for status, want := range map[string]int{
		"Name:\tx\nTracerPid:\t0\nUid:\t0\n":       0,
		"TracerPid:\t4321\n":                       4321,
		"State:\tt (tracing stop)\nTracerPid:\t17": 17,
	} {
		if got, err := proc.ParseTracerPID([]byte(status)); err != nil || got != want {
			t.Errorf("ParseTracerPID(%q) = %d, %v; want %d", status, got, err, want)
		}
	}
	for _, bad := range []string{"", "Name:\tx\n", "TracerPid:\t-1\n", "TracerPid:\t\n", "TracerPid:\tx\n"} {
		if got, err := proc.ParseTracerPID([]byte(bad)); err == nil {
			t.Errorf("ParseTracerPID(%q) = %d, want an error", bad, got)
		}
	}
}
