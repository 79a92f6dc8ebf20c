package supervisor

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
)

// exitAbandoned is how the spare helper ends when adopt says the start
// was abandoned: Main exits quietly then, having started nothing.
const exitAbandoned = 3

// TestHelperSpare is not a test: launched with SUPERVISOR_TEST_LAUNCHED=spare,
// it is a spare that adopts its run as Main does and then reports its own
// pid; its stderr is then the run's log.
// With "spare-liar" it answers its adoption without taking the run; with
// "spare-fails" it takes the run and then reports a failed start.
func TestHelperSpare(t *testing.T) {
	mode := os.Getenv(helperEnv)
	switch mode {
	case "spare", "spare-fails", "spare-liar", "spare-lingers":
	default:
		t.Skip("helper process")
	}
	ch, err := PrivateChannel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if mode == "spare-liar" {
		var a adoption
		json.NewDecoder(ch).Decode(&a)
		io.WriteString(ch, adoptedAnswer(a.Spec.RunID))
		time.Sleep(time.Minute)
		os.Exit(1)
	}
	s := &supervisor{cfg: Config{Args: os.Args}}
	err = s.adopt(ch)
	if errors.Is(err, errAbandoned) {
		os.Exit(exitAbandoned)
	}
	if err != nil {
		writeReport(ch, 0, err)
		os.Exit(1)
	}
	if _, err := os.Lstat(s.reserve); err != nil || s.reserve != filepath.Join(s.spec.runDir(), ReserveFile) {
		writeReport(ch, 0, fmt.Errorf("the reserve %q is not in the run dir: %v", s.reserve, err))
		os.Exit(1)
	}
	if mode == "spare-fails" {
		writeReport(ch, 0, errors.New("no such file"))
		os.Exit(1)
	}
	if mode == "spare-lingers" { // reports, and keeps the pipe open
		writeReport(ch, os.Getpid(), nil)
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Stderr.WriteString("started " + s.spec.Path + "\n")
	writeReport(ch, os.Getpid(), nil)
	os.Exit(0)
}

func launchSpareHelper(t *testing.T, mode ...string) *Launched {
	m := "spare"
	if len(mode) > 0 {
		m = mode[0]
	}
	l, err := LaunchSpare([]string{os.Args[0], "-test.run=^TestHelperSpare$", "--"}, []string{helperEnv + "=" + m})
	require.NoError(t, err)
	t.Cleanup(func() { l.Abort(); l.AwaitExit(5 * time.Second) })
	return l
}

// adoptAll has spare l take the run of spec, built at dir.
func adoptAll(l *Launched, spec *Spec, dir string) error {
	taken, err := l.Adopt(spec, dir, 10*time.Second)
	if err != nil {
		return err
	}
	return taken()
}

func helperSpec(t *testing.T) (*Spec, string) {
	spec := &Spec{StateDir: t.TempDir(), Name: "build", RunID: runrecord.NewRunID(time.Now()), Path: "/bin/true", Run: runrecord.Spec{CaptureMode: "combined"}}
	dir := spec.runDir()
	require.NoError(t, os.MkdirAll(dir, 0o700))
	return spec, dir
}

// A spare supervises nothing until it is adopted; then its command line
// names its run as a launched supervisor's does, its stderr is the run's
// log, and Start lets it go ahead.
func TestSpareAdoption(t *testing.T) {
	l := launchSpareHelper(t)
	known := NewExecutables(os.Args[0])
	st, err := proc.ReadStat(l.PID)
	require.NoError(t, err)
	assert.False(t, known.IsSupervisor(st), "a spare not yet adopted is no run's supervisor")

	// Built under another name and moved into place once adopted, as
	// runrecord.Store.CreateWith does.
	spec, dir := helperSpec(t)
	build := filepath.Join(filepath.Dir(dir), ".new-"+spec.RunID)
	require.NoError(t, os.Rename(dir, build))
	require.NoError(t, adoptAll(l, spec, build))
	for _, f := range []string{StderrFile, ReserveFile} {
		assert.FileExists(t, filepath.Join(build, f), "made before the answer")
	}
	require.NoError(t, os.Rename(build, dir))
	argv, err := proc.Cmdline(l.PID)
	require.NoError(t, err)
	assert.True(t, IsSupervisorOf(st, argv, spec.Name, spec.RunID), "command line %q", argv)
	assert.False(t, IsSupervisorOf(st, argv, spec.Name, runrecord.NewRunID(time.Now())), "of no other run")
	assert.True(t, known.IsSupervisor(st))
	assert.Equal(t, os.Args[0], argv[0])

	pid, err := l.Start(10 * time.Second)
	require.NoError(t, err, "its log says: %s", LogHead(dir))
	assert.Equal(t, l.PID, pid)
	assert.Equal(t, `"started /bin/true"`, LogHead(dir), "its stderr is the run's %s", StderrFile)
	assert.FileExists(t, filepath.Join(dir, ReserveFile), "the spare set the reserve aside, and knows where it is now (the helper checks)")
	assert.FileExists(t, filepath.Join(dir, runrecord.LogFile), "and made the run's log")
	_, err = l.Adopt(spec, dir, time.Second)
	assert.Error(t, err, "a supervisor is adopted once")
}

// An answer is no proof: any process of the user can write to a spare's
// pipes through /proc/PID/fd. Until its command line names the run, the
// run is not made visible, and the spare is dead before the caller
// removes the dir it was told of.
func TestSpareThatOnlySaysItTookTheRun(t *testing.T) {
	l := launchSpareHelper(t, "spare-liar")
	spec, dir := helperSpec(t)
	err := adoptAll(l, spec, dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "does not name the run")
	select {
	case <-l.exited:
	default:
		t.Error("the spare still runs")
	}
}

// A supervisor's channels are sockets: no process can open them through
// /proc/PID/fd (ENXIO, root too), as any process of the user could while
// they were pipes, and so read a spec or answer for the supervisor.
func TestChannelsCannotBeOpenedThroughProc(t *testing.T) {
	l := launchSpareHelper(t)
	for _, fd := range []int{ChannelFD} {
		for _, mode := range []int{os.O_RDONLY, os.O_WRONLY} {
			f, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/%d", l.PID, fd), mode, 0)
			if err == nil {
				f.Close()
			}
			require.ErrorIs(t, err, unix.ENXIO, "fd %d, mode %d", fd, mode)
		}
	}
}

// The report is read as a line, whatever its length, while the channel is
// still open.
func TestSpareReportReadWhileTheChannelIsOpen(t *testing.T) {
	l := launchSpareHelper(t, "spare-lingers")
	spec, dir := helperSpec(t)
	require.NoError(t, adoptAll(l, spec, dir))
	pid, err := l.Start(10 * time.Second)
	require.NoError(t, err)
	assert.Equal(t, l.PID, pid)
}

// A failed start of an adopted spare gives its reserve back, as one of a
// launched supervisor does.
func TestSpareThatFailsGivesTheReserveBack(t *testing.T) {
	l := launchSpareHelper(t, "spare-fails")
	spec, dir := helperSpec(t)
	require.NoError(t, adoptAll(l, spec, dir))
	_, err := l.Start(10 * time.Second)
	require.ErrorIs(t, err, ErrStartFailed)
	l.AwaitExit(10 * time.Second)
	require.FileExists(t, filepath.Join(dir, ReserveFile))
	l.DropReserve()
	assert.NoFileExists(t, filepath.Join(dir, ReserveFile))
}

// A spare that is not told to go ahead starts nothing: neither when its
// server goes away before it is adopted nor after, when it gives back
// the reserve it set aside.
func TestSpareAbandoned(t *testing.T) {
	for _, adopted := range []bool{false, true} {
		l := launchSpareHelper(t)
		spec, dir := helperSpec(t)
		if adopted {
			require.NoError(t, adoptAll(l, spec, dir))
			require.FileExists(t, filepath.Join(dir, ReserveFile))
		}
		l.ch.Close() // as a server that ends, or a create that failed
		l.AwaitExit(10 * time.Second)
		require.NotNil(t, l.cmd.ProcessState, "adopted %v: it did not exit", adopted)
		assert.Equal(t, exitAbandoned, l.cmd.ProcessState.ExitCode(), "adopted %v", adopted)
		assert.NoFileExists(t, filepath.Join(dir, ReserveFile), "adopted %v", adopted)
	}
}

// A spec a spare cannot take is answered with why, before the run is
// visible: the server launches another.
func TestSpareRefusesAdoption(t *testing.T) {
	l := launchSpareHelper(t)
	spec, dir := helperSpec(t)
	spec.RunID = "not-a-run-id"
	err := adoptAll(l, spec, dir)
	assert.ErrorIs(t, err, ErrStartFailed)
	assert.Contains(t, err.Error(), "not-a-run-id")

	l = launchSpareHelper(t)
	spec, dir = helperSpec(t)
	require.NoError(t, os.Remove(dir))
	err = adoptAll(l, spec, dir)
	assert.ErrorIs(t, err, ErrStartFailed, "no dir for its log")

	// A dir that is not where the run is built: written to the spare's
	// pipe by another process of the user, say.
	l = launchSpareHelper(t)
	spec, _ = helperSpec(t)
	elsewhere := t.TempDir()
	err = adoptAll(l, spec, elsewhere)
	assert.ErrorIs(t, err, ErrStartFailed)
	ents, _ := os.ReadDir(elsewhere)
	assert.Empty(t, ents, "nothing made there")

	// No log of its own: the start fails, as Launch's would.
	l = launchSpareHelper(t)
	spec, dir = helperSpec(t)
	require.NoError(t, os.Mkdir(filepath.Join(dir, StderrFile), 0o700))
	err = adoptAll(l, spec, dir)
	assert.ErrorIs(t, err, ErrStartFailed)
	assert.Contains(t, err.Error(), "supervisor log")
}

// retitle fits the longest name and run id into the spare's command line.
func TestSpareRoom(t *testing.T) {
	room := len(spareArg) + 1 + len(spareFiller) + 1
	longest := strings.Repeat("n", runrecord.MaxNameLen) + "\x00" + runrecord.NewRunID(time.Now()) + "\x00"
	assert.GreaterOrEqual(t, room, len(longest)+1)
	_, _, ok := supervisorArgs([]string{"agent-box-supervisor", spareArg, spareFiller})
	assert.False(t, ok, "a spare's command line names no run")
	assert.Error(t, runrecord.ValidName(spareArg), "and no launched supervisor's is a spare's")
}

// Spares keeps one spare: Take hands it over once, not when it has died,
// and Close ends the one ready.
func TestSpares(t *testing.T) {
	p := NewSpares([]string{os.Args[0], "-test.run=^TestHelperSpare$", "--"}, []string{helperEnv + "=spare"}, t.Logf)
	ready := func() *Launched {
		p.Fill()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			p.mu.Lock()
			l := p.ready
			p.mu.Unlock()
			if l != nil {
				return l
			}
		}
		t.Fatal("no spare was launched")
		return nil
	}
	l := ready()
	assert.Same(t, l, p.Take())
	assert.Nil(t, p.Take(), "handed over once")
	l.Abort()

	l = ready()
	require.NoError(t, l.cmd.Process.Kill())
	l.AwaitExit(10 * time.Second)
	assert.Nil(t, p.Take(), "a spare that died is no spare")

	l = ready()
	p.Close()
	select {
	case <-l.exited:
	default:
		t.Error("Close left the spare running")
	}
	p.Fill()
	assert.Nil(t, p.Take(), "none after Close")

	// Closed while the spare is being launched: it is ended too.
	p = NewSpares(p.command, p.env, t.Logf)
	p.Fill()
	p.Close()
	assert.Empty(t, liveSpares(t), "spares left running")

	// Spares that do not take their runs: after maxFailures in a row no
	// more are launched.
	p = NewSpares(p.command, p.env, t.Logf)
	for range maxFailures {
		p.Adopted(errors.New("refused"))
	}
	p.Fill()
	p.wg.Wait()
	assert.Nil(t, p.Take())
	assert.Empty(t, liveSpares(t))
}

// liveSpares are the pids of our children that are spares and have not
// exited.
func liveSpares(t *testing.T) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := proc.ReadStat(pid)
		if err != nil || st.PPID != os.Getpid() || st.State == 'Z' {
			continue
		}
		if argv, err := proc.Cmdline(pid); err == nil && spare(argv) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// copyFDs takes copies of pid's descriptors fds, as a process of the user
// could while pid was still dumpable (pidfd_getfd(2): PTRACE_MODE_ATTACH,
// which root has over any process, and the user over a dumpable one).
func copyFDs(t *testing.T, pid int, fds ...int) []int {
	t.Helper()
	pidfd, err := unix.PidfdOpen(pid, 0)
	require.NoError(t, err)
	defer unix.Close(pidfd)
	var copies []int
	for _, fd := range fds {
		c, err := unix.PidfdGetfd(pidfd, fd, 0)
		require.NoError(t, err, "copying fd %d", fd)
		t.Cleanup(func() { unix.Close(c) })
		copies = append(copies, c)
	}
	return copies
}

// readNow is what fd holds right now: nothing (EAGAIN) or the end of it
// (EOF) read as "".
func readNow(t *testing.T, fd int) string {
	t.Helper()
	b := make([]byte, 64<<10)
	n, _, err := unix.Recvfrom(fd, b, unix.MSG_DONTWAIT)
	if errors.Is(err, unix.EAGAIN) {
		return ""
	}
	require.NoError(t, err)
	return string(b[:n])
}

// A copy of a spare's inherited channels, taken while it was dumpable
// (between its execve and package nodump's init, any process of the user
// can: pidfd_getfd(2), or ptrace under Yama's ptrace_scope 0), stays
// valid after it is non-dumpable; the spec, with the run's secrets, goes
// over a channel the spare makes once it is, and the copies see nothing of
// it.
func TestSparesChannelsCopiedBeforeAdoptionSeeNoSpec(t *testing.T) {
	l := launchSpareHelper(t)
	copies := copyFDs(t, l.PID, ChannelFD)
	// Stopped, all its threads (the stop is reported to us, its parent,
	// once the group has stopped), so that what reaches either channel
	// waits for the copy: the spare cannot read it first.
	require.NoError(t, unix.Kill(l.PID, unix.SIGSTOP))
	var info unix.Siginfo
	require.NoError(t, unix.Waitid(unix.P_PID, l.PID, &info, unix.WSTOPPED, nil))

	spec, dir := helperSpec(t)
	const secret = "hunter2-the-secret"
	spec.Env = []string{"TOKEN=" + secret}
	spec.Secrets = []string{secret}
	taken, err := l.Adopt(spec, dir, 10*time.Second)
	require.NoError(t, err)
	for i, fd := range []int{ChannelFD} {
		got := readNow(t, copies[i])
		require.NotContains(t, got, secret, "the copy of fd %d read the spec", fd)
		require.Empty(t, got, "the copy of fd %d", fd)
	}
	require.NoError(t, unix.Kill(l.PID, unix.SIGCONT))
	require.NoError(t, taken())
	pid, err := l.Start(10 * time.Second)
	require.NoError(t, err, "its log says: %s", LogHead(dir))
	assert.Equal(t, l.PID, pid)
	for i, fd := range []int{ChannelFD} {
		assert.Empty(t, readNow(t, copies[i]), "the copy of fd %d, after the start", fd)
	}
}

// TestHelperTracer is not a test: with SUPERVISOR_TEST_TRACE=PID it
// ptrace-attaches PID, waits for the attach's stop, says "attached" on
// stdout and holds PID until its stdin ends (a tracer's exit detaches).
//
// A process of its own, not the test's: the stop of a child traced by a
// thread of its parent is reported to the parent's every wait, and
// os.Process.Wait (waitid P_PIDFD, WEXITED) takes it for the end.
func TestHelperTracer(t *testing.T) {
	pid, err := strconv.Atoi(os.Getenv("SUPERVISOR_TEST_TRACE"))
	if err != nil {
		t.Skip("helper process")
	}
	// ptrace(2): every request but the attach comes from the tracer
	// thread.
	runtime.LockOSThread()
	if err := unix.PtraceAttach(pid); err != nil {
		fmt.Printf("attach: %v\n", err)
		os.Exit(1)
	}
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid, &ws, 0, nil); err != nil || !ws.Stopped() {
		fmt.Printf("waiting for the stop: %v %v\n", ws, err)
		os.Exit(1)
	}
	fmt.Println("attached")
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// trace has a process of its own ptrace-attach pid until untrace (or the
// end of the test). A traced process's exit is reported to its tracer
// first: its parent reaps it once the tracer is gone.
func trace(t *testing.T, pid int) (untrace func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperTracer$")
	cmd.Env = append(os.Environ(), "SUPERVISOR_TEST_TRACE="+strconv.Itoa(pid))
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	untrace = sync.OnceFunc(func() { stdin.Close(); cmd.Wait() })
	t.Cleanup(untrace)
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	require.Equal(t, "attached\n", line)
	return untrace
}

// A tracer attached while the spare was dumpable stays attached after it
// is not, and could read the spec from its memory: a traced spare is not
// sent the spec, and the start goes on with a launched supervisor
// (runs.Manager.offerSpare, on Adopt's error).
func TestTracedSpareIsNotAdopted(t *testing.T) {
	l := launchSpareHelper(t)
	untrace := trace(t, l.PID)
	spec, dir := helperSpec(t)
	taken, err := l.Adopt(spec, dir, 10*time.Second)
	require.Error(t, err, "a traced spare was sent the spec")
	assert.Nil(t, taken)
	assert.ErrorIs(t, err, ErrUntrusted)
	assert.Contains(t, err.Error(), "traced by")
	l.Abort() // as runs.Manager.offerSpare does
	untrace()
	l.AwaitExit(10 * time.Second)
	require.NotNil(t, l.cmd.ProcessState, "the spare still runs")
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, ents, "the spare made nothing in the run dir: it was not told of it")
}
