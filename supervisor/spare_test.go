package supervisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	// Only in the helper: a File's finalizer closes its descriptor, which
	// in the test process is another test's.
	report := os.NewFile(ReportFD, "report")
	if mode == "spare-liar" {
		var a adoption
		json.NewDecoder(os.NewFile(SpecFD, "spec")).Decode(&a)
		io.WriteString(report, adoptedAnswer(a.Spec.RunID))
		time.Sleep(time.Minute)
		os.Exit(1)
	}
	s := &supervisor{cfg: Config{Args: os.Args}}
	err := s.adopt(os.NewFile(SpecFD, "spec"), report)
	if errors.Is(err, errAbandoned) {
		os.Exit(exitAbandoned)
	}
	if err != nil {
		writeReport(report, 0, err)
		os.Exit(1)
	}
	if _, err := os.Lstat(s.reserve); err != nil || s.reserve != filepath.Join(s.spec.runDir(), ReserveFile) {
		writeReport(report, 0, fmt.Errorf("the reserve %q is not in the run dir: %v", s.reserve, err))
		os.Exit(1)
	}
	if mode == "spare-fails" {
		writeReport(report, 0, errors.New("no such file"))
		os.Exit(1)
	}
	if mode == "spare-lingers" { // reports, and keeps the pipe open
		writeReport(report, os.Getpid(), nil)
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Stderr.WriteString("started " + s.spec.Path + "\n")
	writeReport(report, os.Getpid(), nil)
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
	spec := &Spec{StateDir: t.TempDir(), Name: "build", RunID: runrecord.NewRunID(time.Now()), Path: "/bin/true", CaptureMode: "combined"}
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
	for _, fd := range []int{SpecFD, ReportFD} {
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
		l.specW.Close() // as a server that ends, or a create that failed
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
