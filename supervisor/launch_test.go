package supervisor

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/runrecord"
)

func TestCommandLine(t *testing.T) {
	spec := &Spec{Name: "build", RunID: "20261202T141701.123456789Z-3f9a1c"}
	cmd := []string{"/bin/agent-box", "supervise", "build", spec.RunID}
	req := LaunchRequest{Command: cmd[:2], Spec: spec}
	assert.Equal(t, cmd, commandLine(req, true))
	req.Scope = true
	got := commandLine(req, false)
	assert.Equal(t, []string{"systemd-run", "--user", "--scope", "--collect", "--quiet", "--unit", "agent-box-build-3f9a1c"}, got[:7])
	assert.Equal(t, cmd, got[7:])
	assert.NotContains(t, commandLine(req, true), "--user")
	assert.Equal(t, []string{"/bin/agent-box", "supervise"}, req.Command, "the request's command is left as it was")
	req.Delegate = true
	got = commandLine(req, true)
	assert.Equal(t, []string{"systemd-run", "--scope", "--collect", "--quiet", "--unit", "agent-box-build-3f9a1c", "--property=Delegate=yes"}, got[:7])
	assert.Equal(t, cmd, got[7:])
	// The other side of the contract: a supervisor is known by the end
	// of its command line, scoped or not.
	for _, scope := range []bool{false, true} {
		req.Scope = scope
		name, id, ok := supervisorArgs(commandLine(req, false))
		assert.True(t, ok && name == spec.Name && id == spec.RunID, "scope %v: %q %q %v", scope, name, id, ok)
	}
}

// helperEnv is the whole environment a launched helper gets: Launch
// passes LaunchRequest.Env as it is, not ours.
const helperEnv = "SUPERVISOR_TEST_LAUNCHED"

// TestHelperLaunched is not a test: launched with SUPERVISOR_TEST_LAUNCHED
// set, it is a supervisor that speaks the start protocol as that says:
// "report" reads the spec and reports its own pid, "silent" never reports.
func TestHelperLaunched(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("helper process")
	}
	if len(os.Environ()) != 1 {
		fmt.Fprintf(os.Stderr, "environment %q, want only %s\n", os.Environ(), helperEnv)
		os.Exit(1)
	}
	if mode == "silent" {
		time.Sleep(time.Minute)
		os.Exit(1)
	}
	ch, err := PrivateChannel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var spec Spec
	if err := decodeSpec(ch, &spec); err != nil {
		fmt.Fprintf(os.Stderr, "reading spec: %v\n", err)
		os.Exit(1)
	}
	if n := len(os.Args); os.Args[n-2] != spec.Name || os.Args[n-1] != spec.RunID {
		fmt.Fprintf(os.Stderr, "argv %q does not end with the spec's name and run id\n", os.Args)
		os.Exit(1)
	}
	if _, err := os.Lstat(filepath.Join(spec.runDir(), ReserveFile)); err != nil {
		writeReport(ch, 0, fmt.Errorf("no reserve when the spec came: %w", err))
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "started %s\n", spec.Path)
	writeReport(ch, os.Getpid(), nil)
	os.Exit(0)
}

// launchHelper launches the helper in mode for a run whose dir it makes;
// it returns the dir, which is also where the helper's stderr goes.
func launchHelper(t *testing.T, mode string) (*Launched, string) {
	spec := &Spec{StateDir: t.TempDir(), Name: "build", RunID: runrecord.NewRunID(time.Now()), Path: "/bin/true"}
	dir := spec.runDir()
	require.NoError(t, os.MkdirAll(dir, 0o700))
	l, err := Launch(LaunchRequest{
		Command: []string{os.Args[0], "-test.run=^TestHelperLaunched$", "--"},
		Spec:    spec,
		Dir:     dir,
		Env:     []string{helperEnv + "=" + mode},
	})
	require.NoError(t, err)
	t.Cleanup(func() { l.Abort(); l.AwaitExit(5 * time.Second) })
	return l, dir
}

func TestLaunchProtocol(t *testing.T) {
	l, dir := launchHelper(t, "report")
	require.Positive(t, l.StartTime)
	pid, err := l.Start(10 * time.Second)
	require.NoError(t, err, "its log says: %s", LogHead(dir))
	assert.Equal(t, l.PID, pid, "the helper reports its own pid")
	assert.Equal(t, `"started /bin/true"`, LogHead(dir), "its stderr is %s", StderrFile)
	fi, err := os.Lstat(filepath.Join(dir, ReserveFile))
	require.NoError(t, err, "Start sets the reserve aside before it sends the spec")
	assert.True(t, fi.Mode().IsRegular())
	assert.EqualValues(t, reserveSize, fi.Size())
}

// takeReserve adopts the reserve Start set aside, makes one when there is
// none, and takes nothing else for one: a symlink planted in its place is
// neither followed nor removed.
func TestTakeReserve(t *testing.T) {
	t.Run("set aside by Start", func(t *testing.T) {
		dir := t.TempDir()
		require.True(t, makeReserve(dir))
		fi, err := os.Stat(filepath.Join(dir, ReserveFile))
		require.NoError(t, err)
		s := &supervisor{}
		s.takeReserve(dir)
		assert.Equal(t, filepath.Join(dir, ReserveFile), s.reserve)
		again, err := os.Stat(s.reserve)
		require.NoError(t, err)
		assert.True(t, os.SameFile(fi, again), "adopted, not made again")
		s.dropReserve()
		assert.NoFileExists(t, filepath.Join(dir, ReserveFile))
		assert.Empty(t, s.reserve)
	})
	t.Run("none yet", func(t *testing.T) {
		dir := t.TempDir()
		s := &supervisor{}
		s.takeReserve(dir)
		require.Equal(t, filepath.Join(dir, ReserveFile), s.reserve)
		fi, err := os.Lstat(s.reserve)
		require.NoError(t, err)
		assert.EqualValues(t, reserveSize, fi.Size())
	})
	// Another name of a file (removing it would free nothing), or a
	// symlink: no reserve rather than either for one, and both are left as
	// they are, with what they name.
	for _, planted := range []struct {
		name  string
		plant func(target, at string) error
	}{{"another name of a file", os.Link}, {"a planted symlink", os.Symlink}} {
		t.Run(planted.name, func(t *testing.T) {
			dir := t.TempDir()
			target := filepath.Join(t.TempDir(), "victim")
			require.NoError(t, os.WriteFile(target, make([]byte, reserveSize), 0o600))
			require.NoError(t, planted.plant(target, filepath.Join(dir, ReserveFile)))
			s := &supervisor{}
			s.takeReserve(dir)
			assert.Empty(t, s.reserve, "not a reserve")
			s.dropReserve()
			assert.FileExists(t, target)
			_, err := os.Lstat(filepath.Join(dir, ReserveFile))
			assert.NoError(t, err, "what was planted is left where it is")
		})
	}
}

func TestLaunchedThatDoesNotReport(t *testing.T) {
	l, dir := launchHelper(t, "silent")
	_, err := l.Start(100 * time.Millisecond)
	var timeout *ReportTimeoutError
	require.True(t, errors.As(err, &timeout), "%v", err)
	assert.Equal(t, l.PID, timeout.PID)
	assert.True(t, strings.HasPrefix(err.Error(), fmt.Sprintf("supervisor (pid %d) did not report within 100ms", l.PID)), err.Error())
	done := make(chan struct{})
	go func() { l.AwaitExit(10 * time.Second); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the supervisor was not killed")
	}
	select {
	case <-l.exited:
	default:
		t.Error("AwaitExit returned, yet the supervisor has not exited")
	}
	assert.Empty(t, LogHead(dir))
	assert.FileExists(t, filepath.Join(dir, ReserveFile))
	l.DropReserve()
	assert.NoFileExists(t, filepath.Join(dir, ReserveFile), "a failed start gives the reserve back")

	// Only the file it made: one put in its place stays.
	l, dir = launchHelper(t, "silent")
	_, err = l.Start(100 * time.Millisecond)
	require.Error(t, err)
	path, other := filepath.Join(dir, ReserveFile), filepath.Join(dir, "other")
	require.NoError(t, os.WriteFile(other, []byte("not the reserve"), 0o600))
	require.NoError(t, os.Rename(other, path))
	l.DropReserve()
	assert.FileExists(t, path)
}

// The start report, as writeReport sends it and readReport reads it.
func TestReportRoundTrip(t *testing.T) {
	var b strings.Builder
	require.NoError(t, writeReport(&b, 1234, nil))
	pid, err := readReport(strings.NewReader(b.String()))
	assert.Equal(t, 1234, pid)
	assert.NoError(t, err)

	b.Reset()
	require.NoError(t, writeReport(&b, 0, errors.New("exec: no such file\nor directory")))
	_, err = readReport(strings.NewReader(b.String()))
	assert.ErrorIs(t, err, ErrStartFailed)
	assert.Equal(t, "could not start the process: exec: no such file or directory", err.Error(), "one line")

	for _, bad := range []string{"", "ok 12", "ok 0\n", "ok -3\n", "ok x\n", "hello\n"} {
		_, err := readReport(strings.NewReader(bad))
		assert.Error(t, err, "%q", bad)
		assert.NotErrorIs(t, err, ErrStartFailed, "%q", bad)
	}
	_, err = readReport(strings.NewReader(""))
	assert.ErrorIs(t, err, ErrNoReport, "EOF before a line")
}

func TestSpecRoundTrip(t *testing.T) {
	in := Spec{Name: "build", RunID: "r", Path: "/bin/sh", Argv: []string{"sh", "-c", "x"}, Env: []string{"A=1"}, Secrets: []string{"s"}, KillGraceMS: 250}
	// Every recorded option reaches the supervisor, which refuses a field
	// it does not know: the ready probe too, though only agent-box runs it.
	in.Run = runrecord.Spec{Command: "x", Limits: &runrecord.Limits{Pids: 8}, Ready: &runrecord.ReadyProbe{Log: "^up"}, ReadyTimeoutS: new(int64(5))}
	var b strings.Builder
	require.NoError(t, encodeSpec(&b, &in))
	var out Spec
	require.NoError(t, decodeSpec(strings.NewReader(b.String()), &out))
	assert.Equal(t, in, out)
}

// systemd-run is found in the PATH the supervisor is given, in absolute
// entries only: "" and relative ones name the server's cwd.
func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "systemd-run"), []byte("#!/bin/sh\n"), 0o755))
	p, err := lookPath("systemd-run", []string{"HOME=/x", "PATH=/nonexistent:" + dir})
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "systemd-run"), p)
	t.Chdir(dir)
	for _, path := range []string{"PATH=.", "PATH=", "PATH=:/nonexistent"} {
		_, err := lookPath("systemd-run", []string{path})
		assert.ErrorIs(t, err, exec.ErrNotFound, path)
	}
	_, err = lookPath("systemd-run", nil)
	assert.ErrorIs(t, err, exec.ErrNotFound, "no PATH")
}

// A supervisor traced by another process (attached while it was
// dumpable: a tracer stays attached) is not sent its spec: the start
// fails, and says why.
func TestTracedSupervisorIsNotSentItsSpec(t *testing.T) {
	l, _ := launchHelper(t, "report")
	// Attached once the channel is on its way: else the tracer's stop
	// would hold it back, and the start would time out instead.
	rc, err := l.inherited.SyscallConn()
	require.NoError(t, err)
	require.NoError(t, rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 10_000)
		require.NoError(t, err)
		require.Equal(t, 1, n, "no channel came")
	}))
	untrace := trace(t, l.PID)
	_, err = l.Start(10 * time.Second)
	require.ErrorIs(t, err, ErrUntrusted)
	assert.Contains(t, err.Error(), "traced by")
	untrace() // its exit is its tracer's to see first
	l.AwaitExit(10 * time.Second)
	require.NotNil(t, l.cmd.ProcessState, "the supervisor still runs")
}

// A process that copied a supervisor's ChannelFD while it was dumpable can
// send the server a channel of its own before the supervisor does, to be
// sent the spec on it: the server takes only a unix stream socket the
// supervisor made (SO_PEERCRED), alone, with nothing else.
func TestChannelNotTheSupervisorsIsRefused(t *testing.T) {
	pair := func(t *testing.T, typ int) int {
		fds, err := unix.Socketpair(unix.AF_UNIX, typ|unix.SOCK_CLOEXEC, 0)
		require.NoError(t, err)
		t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
		return fds[1]
	}
	mark := []byte{channelMark}
	for _, c := range []struct {
		name string
		send func(t *testing.T, report int) error
		want string
	}{
		{"a socket pair the sender made", func(t *testing.T, report int) error {
			return unix.Sendmsg(report, mark, unix.UnixRights(pair(t, unix.SOCK_STREAM)), nil, 0)
		}, fmt.Sprintf("made by pid %d, not by itself", os.Getpid())},
		{"a datagram socket", func(t *testing.T, report int) error {
			return unix.Sendmsg(report, mark, unix.UnixRights(pair(t, unix.SOCK_DGRAM)), nil, 0)
		}, "not a unix stream socket"},
		{"a pipe", func(t *testing.T, report int) error {
			var p [2]int
			require.NoError(t, unix.Pipe2(p[:], unix.O_CLOEXEC))
			defer unix.Close(p[0])
			defer unix.Close(p[1])
			return unix.Sendmsg(report, mark, unix.UnixRights(p[0]), nil, 0)
		}, "not a socket"},
		{"two descriptors", func(t *testing.T, report int) error {
			return unix.Sendmsg(report, mark, unix.UnixRights(pair(t, unix.SOCK_STREAM), pair(t, unix.SOCK_STREAM)), nil, 0)
		}, "more than one descriptor"},
		{"a report without a channel", func(t *testing.T, report int) error {
			_, err := unix.Write(report, []byte("ok 1234\n"))
			return err
		}, "not its channel"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, _ := launchHelper(t, "silent")
			report := copyFDs(t, l.PID, ChannelFD)[0]
			require.NoError(t, c.send(t, report))
			_, err := l.Start(10 * time.Second)
			require.ErrorIs(t, err, ErrUntrusted)
			assert.Contains(t, err.Error(), c.want)
			l.AwaitExit(10 * time.Second)
			require.NotNil(t, l.cmd.ProcessState, "the supervisor still runs")
		})
	}
}

// A spec of another version, with fields this supervisor does not know
// (the options before they moved under "run"), is refused, saying why,
// instead of starting the run without them.
func TestSpecOfAnotherVersionIsRefused(t *testing.T) {
	var s Spec
	err := decodeSpec(strings.NewReader(`{"name":"build","run_id":"r","path":"/bin/true","capture_mode":"framed"}`), &s)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "capture_mode")
	assert.Contains(t, err.Error(), "version")
}
