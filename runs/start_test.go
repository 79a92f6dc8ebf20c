package runs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/capture"
	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
	"github.com/agent-box/agent-box/supervisor"
)

// TestHelperSupervisor is not a test: with AGENT_BOX_TEST_SUPERVISOR=1 it
// is the supervisor, as agent-box-supervisor runs it; with "slow" one that
// takes its time to start, as a loaded machine's would; with "spare-dies"
// a spare (supervisor.LaunchSpare) dies once it is sent its run.
func TestHelperSupervisor(t *testing.T) {
	switch os.Getenv("AGENT_BOX_TEST_SUPERVISOR") {
	case "1":
	case "slow":
		time.Sleep(300 * time.Millisecond)
	case "spare-dies":
		if n := len(os.Args); os.Args[n-2] == "--spare" { // a spare's (supervisor.LaunchSpare)
			if ch, err := supervisor.PrivateChannel(); err == nil {
				ch.Read(make([]byte, 1))
			}
			os.Exit(1)
		}
	default:
		t.Skip("helper process")
	}
	if err := supervisor.Main(supervisor.Config{Args: os.Args}); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// A run is visible from the moment its record is, and from then on reads
// "starting" while its supervisor starts the child: not "start_interrupted",
// which would free its name and let process_remove delete it.
func TestRunBeingStartedIsStartingAndKept(t *testing.T) {
	t.Setenv("AGENT_BOX_TEST_SUPERVISOR", "slow")
	sys, err := NewLiveSystem(supervisor.NewExecutables(os.Args[0]))
	require.NoError(t, err)
	store := newStore(t)
	m := &Manager{Store: store, Sys: sys, Env: os.Environ(),
		Supervisor: []string{os.Args[0], "-test.run=^TestHelperSupervisor$", "--"}}

	type result struct {
		run Run
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := m.Start(context.Background(), StartRequest{Name: "build", Spec: Spec{Argv: []string{"/bin/sleep", "30"}, Cwd: "/"}})
		done <- result{r.Run, err}
	}()
	var seen Run
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "the run never became visible")
		if r, err := m.Get("build", ""); err == nil {
			seen = r
			break
		}
	}
	res, err := m.Remove("", "", true)
	require.NoError(t, err)
	started := <-done
	require.NoError(t, started.err)
	t.Cleanup(func() { m.Kill("build", "", unix.SIGKILL, 0) })

	require.Equal(t, outcome.ReasonStarting, seen.Verdict.Reason, "a run being started reads %s/%s", seen.State, seen.Reason)
	require.Empty(t, res.Removed, "process_remove(all_finished) removed a run that was being started")
	require.Equal(t, outcome.Running, started.run.State, started.run.Reason)
}

// TestHelperFailingSupervisor is not a test: with
// AGENT_BOX_FAILING_SUPERVISOR=1 it is a supervisor that reports that it
// could not start the child and then takes a while to exit, as a real one
// does while it kills a child whose pid it could not record.
func TestHelperFailingSupervisor(t *testing.T) {
	if os.Getenv("AGENT_BOX_FAILING_SUPERVISOR") != "1" {
		t.Skip("helper process")
	}
	ch, err := supervisor.PrivateChannel()
	if err != nil {
		os.Exit(1)
	}
	io.Copy(io.Discard, ch)
	ch.WriteString("error writing record: file too large\n")
	time.Sleep(400 * time.Millisecond)
	os.Exit(1)
}

// TestFailedStartAgreesWithTheList: once process_start has answered that
// the start failed, no listing says the run is starting. Before (issue 9)
// the supervisor's report arrived before its exit, and a list in between
// read running/starting.
func TestFailedStartAgreesWithTheList(t *testing.T) {
	t.Setenv("AGENT_BOX_FAILING_SUPERVISOR", "1")
	sys, err := NewLiveSystem(supervisor.NewExecutables(os.Args[0]))
	require.NoError(t, err)
	m := &Manager{Store: newStore(t), Sys: sys, Env: os.Environ(),
		Supervisor: []string{os.Args[0], "-test.run=^TestHelperFailingSupervisor$", "--"}}
	_, err = m.Start(context.Background(), StartRequest{Name: "f", Spec: Spec{Argv: []string{"/bin/true"}, Cwd: "/"}})
	require.ErrorIs(t, err, supervisor.ErrStartFailed)
	run, err := m.Get("f", "")
	require.NoError(t, err)
	require.NotEqual(t, outcome.Running, run.State, "process_start failed, yet the run reads %s/%s", run.State, run.Reason)
	require.False(t, run.Verdict.MayBeAlive, "the name stays in use after a failed start")
	_, err = os.Lstat(filepath.Join(m.Store.RunDir("f", run.RunID), supervisor.ReserveFile))
	require.ErrorIs(t, err, fs.ErrNotExist, "the reserve of a failed start is given back")
}

// TestHelperSpecSupervisor is not a test: with AGENT_BOX_SPEC_TO=FILE it
// is a supervisor that copies the spec it is given to FILE and reports that
// it could not start the child.
func TestHelperSpecSupervisor(t *testing.T) {
	to := os.Getenv("AGENT_BOX_SPEC_TO")
	if to == "" {
		t.Skip("helper process")
	}
	ch, err := supervisor.PrivateChannel()
	if err != nil {
		os.Exit(1)
	}
	spec, _ := io.ReadAll(ch)
	os.WriteFile(to, spec, 0o600)
	ch.WriteString("error spec copied\n")
	os.Exit(1)
}

// The grace at a run's timeout is the Manager's (main sets it from
// AGENT_BOX_TIMEOUT_GRACE_MS so that a test suite need not sit it out),
// the supervisor's default when unset.
func TestTimeoutGraceReachesTheSupervisor(t *testing.T) {
	to := filepath.Join(t.TempDir(), "spec.json")
	t.Setenv("AGENT_BOX_SPEC_TO", to)
	sys, err := NewLiveSystem(supervisor.NewExecutables(os.Args[0]))
	require.NoError(t, err)
	for _, c := range []struct {
		grace time.Duration
		want  int
	}{
		{0, int(supervisor.DefaultKillGrace.Milliseconds())},
		{250 * time.Millisecond, 250},
	} {
		m := &Manager{Store: newStore(t), Sys: sys, Waits: WaitPolicy{TimeoutGrace: c.grace}, Env: os.Environ(),
			Supervisor: []string{os.Args[0], "-test.run=^TestHelperSpecSupervisor$", "--"}}
		_, err = m.Start(context.Background(), StartRequest{Name: "g", Spec: Spec{Argv: []string{"/bin/true"}, Cwd: "/", TimeoutS: 1}})
		require.ErrorIs(t, err, supervisor.ErrStartFailed)
		b, err := os.ReadFile(to)
		require.NoError(t, err)
		var spec supervisor.Spec
		require.NoError(t, json.Unmarshal(b, &spec))
		require.Equal(t, c.want, spec.KillGraceMS, "Waits.TimeoutGrace %s", c.grace)
	}
}

func TestCwdResolvesAgainstHome(t *testing.T) {
	home := t.TempDir()
	for _, c := range []struct{ cwd, want string }{
		{"", home},
		{"~", home},
		{"~/src/app", home + "/src/app"},
		{"src/app", home + "/src/app"},
		{"./src/../src/app", home + "/src/app"},
		{"/abs/path", "/abs/path"},
	} {
		req := StartRequest{Spec: Spec{Cwd: c.cwd}}
		if err := req.resolveCwd(home); err != nil || req.Cwd != c.want {
			t.Errorf("cwd %q: got %q, %v; want %q", c.cwd, req.Cwd, err, c.want)
		}
	}
	req := StartRequest{Spec: Spec{Cwd: "~root/x"}}
	if err := req.resolveCwd(home); err == nil {
		t.Errorf("~root/x was accepted as %q", req.Cwd)
	}
	req = StartRequest{Spec: Spec{Cwd: "src"}}
	if err := req.resolveCwd(""); err == nil {
		t.Errorf("without a home directory, src was accepted as %q", req.Cwd)
	}
}

// A run dir holds the files named by runrecord and supervisor, and no
// other: while the run lives, and once it has ended.
func TestRunDirHoldsTheNamedFiles(t *testing.T) {
	m := supervisedManager(t)
	res, err := m.Start(context.Background(), StartRequest{Name: "files", Spec: Spec{Argv: []string{"/bin/cat"}, Cwd: "/", Stdin: "pipe"}})
	require.NoError(t, err)
	t.Cleanup(func() { m.Kill("files", "", unix.SIGKILL, 0) })
	dir := m.Store.RunDir("files", res.Run.RunID)
	entries := func() []string {
		ents, err := os.ReadDir(dir)
		require.NoError(t, err)
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return names
	}
	require.ElementsMatch(t, []string{runrecord.RecordFile, runrecord.LogFile, supervisor.StderrFile, supervisor.ReserveFile, supervisor.StdinSocket, supervisor.ControlSocket}, entries(), "while it runs")
	require.Equal(t, filepath.Join(dir, runrecord.LogFile), res.Run.LogPath)

	_, err = m.Kill("files", "", unix.SIGKILL, 0)
	require.NoError(t, err)
	m.waitRecorded("files", res.Run.RunID, 10*time.Second)
	run, err := m.Get("files", res.Run.RunID)
	require.NoError(t, err)
	require.True(t, run.LogFinal(), "%s/%s", run.State, run.Reason)
	// The reserve is given back; the sockets stay, unlistened (listenUnix
	// does not unlink them through their /proc path).
	require.ElementsMatch(t, []string{runrecord.RecordFile, runrecord.LogFile, supervisor.StderrFile, supervisor.StdinSocket, supervisor.ControlSocket}, entries(), "once it has ended")
}

// TestRunsAsAsked: the forms a just started leader's command line takes
// for what was asked, and what is not one of them.
func TestRunsAsAsked(t *testing.T) {
	argvRun := func(argv ...string) asked { return asked{argv: argv} }
	cmdRun := func(c string) asked {
		return (&StartRequest{Spec: Spec{Command: c}}).asked([]string{"/bin/sh", "-c", c})
	}
	lone := func(c string) asked {
		script, _ := shellScript(c)
		return (&StartRequest{Spec: Spec{Command: c}}).asked([]string{"/bin/sh", "-c", script})
	}
	for _, tc := range []struct {
		live []string
		want asked
		ok   bool
	}{
		{[]string{"sleep", "30"}, argvRun("sleep", "30"), true},
		{[]string{"/bin/sh", "./build.sh", "-v"}, argvRun("./build.sh", "-v"), true},        // #!/bin/sh
		{[]string{"/usr/bin/env", "python3", "/x/y.py", "a"}, argvRun("y.py", "a"), true},   // #!/usr/bin/env python3
		{[]string{"/bin/sh", "-c", "make && make test"}, cmdRun("make && make test"), true}, // the shell
		{[]string{"/bin/sh", "-c", "exec sleep 30"}, lone("sleep 30"), true},                // before its exec
		{[]string{"sleep", "30"}, lone("sleep 30"), true},                                   // after it
		{[]string{"cat"}, lone("cat<file"), true},                                           // the name as the shell reads it
		{[]string{"sleep", "30"}, argvRun("make"), false},                                   // another program
		{[]string{"sleep", "30", "x"}, argvRun("sleep", "30"), false},                       // other arguments
		{[]string{"/bin/sh", "-c", "rm -rf x"}, cmdRun("make && make test"), false},         // another script
		{[]string{"rm", "-rf", "x"}, cmdRun("make && make test"), false},                    // no program for a compound command
		{[]string{"/bin/sh", "-c", "true"}, argvRun("false"), false},
	} {
		assert.Equal(t, tc.ok, runsAsAsked(tc.live, tc.want), "%q for %+v", tc.live, tc.want)
	}
}

// What process_start answers is checked against the started leader's
// command line: a leader that runs another program than the run was
// asked to (its supervisor told another spec, or the program exec'd
// another) is said, not hidden (issue 30), in the words the record keeps:
// a secret in the command line is masked there too. Here the record
// names a real sleep as its leader.
func TestStartSaysALeaderThatRunsAnotherProgram(t *testing.T) {
	sleep := exec.Command("sleep", "60")
	require.NoError(t, sleep.Start())
	t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
	st, err := proc.ReadStat(sleep.Process.Pid)
	require.NoError(t, err)
	store := newStore(t)
	rec := record(store, "boot")
	rec.PID, rec.PIDStartTime = sleep.Process.Pid, st.StartTime
	require.NoError(t, store.Create(rec))
	m := &Manager{Store: store, Sys: fakeSys(alive)}
	res, err := m.started(rec.Name, rec.RunID, asked{argv: []string{"make", "test"}}, redactorOf(map[string]string{"S": "60"}))
	require.NoError(t, err)
	assert.Contains(t, res.Run.Reason, `its command line now reads "sleep [redacted]"`, res.Run.Reason)
	assert.NotContains(t, res.Run.Reason, "sleep 60", "the secret")

	// A secret in what was asked is no mismatch: the comparison is with
	// what was exec'd, not with the record's masked words.
	res, err = m.started(rec.Name, rec.RunID, asked{argv: []string{"sleep", "60"}}, redactorOf(map[string]string{"S": "60"}))
	require.NoError(t, err)
	assert.Equal(t, "running", res.Run.Reason)
}

// TestNiceIsTheRunsAndNotTheSupervisors: a run started with nice runs its
// program that much nicer than the server (as nice(1) adds), every
// thread of its supervisor at the server's own, and a restart keeps it
// (it is recorded).
func TestNiceIsTheRunsAndNotTheSupervisors(t *testing.T) {
	m := supervisedManager(t)
	// niceOf is a thread's nice value (proc(5): stat's 19th field).
	niceOf := func(path string) int {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
		n, err := strconv.Atoi(fields[19-3])
		require.NoError(t, err)
		return n
	}
	own := niceOf("/proc/self/stat")
	const by = 5
	want := min(own+by, MaxNice)
	require.NotEqual(t, own, want, "the test runs at the lowest priority already")
	for i, start := range []func() (StartResult, error){
		func() (StartResult, error) {
			return m.Start(context.Background(), StartRequest{Name: "low", Spec: Spec{Argv: []string{"/bin/sleep", "30"}, Cwd: "/", Nice: by}})
		},
		func() (StartResult, error) {
			r, err := m.Restart(context.Background(), RestartRequest{Name: "low", Grace: new(time.Duration)})
			return r.StartResult, err
		},
	} {
		res, err := start()
		require.NoError(t, err, "start %d", i)
		t.Cleanup(func() { m.Kill("low", res.Run.RunID, unix.SIGKILL, 0) })
		assert.Equal(t, want, niceOf(fmt.Sprintf("/proc/%d/stat", res.Run.PID)), "start %d: the run's program", i)
		rec, err := m.Store.Read("low", res.Run.RunID)
		require.NoError(t, err)
		tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", rec.SupervisorPID))
		require.NoError(t, err)
		require.NotEmpty(t, tasks)
		for _, task := range tasks {
			assert.Equal(t, own, niceOf(task), "start %d: its supervisor's thread %s", i, task)
		}
	}
	_, err := m.Start(context.Background(), StartRequest{Name: "high", Spec: Spec{Argv: []string{"/bin/true"}, Cwd: "/", Nice: -1}})
	require.ErrorIs(t, err, ErrInvalid)
}

// TestRestartErrorsMaskSecrets: a restart whose spec can no longer start
// says why without the secrets, as a start does: resolve quotes the PATH,
// which secret_env may set. Before, the restart's own check of the
// record's spec answered with it in clear.
func TestRestartErrorsMaskSecrets(t *testing.T) {
	m := supervisedManager(t)
	dir := filepath.Join(t.TempDir(), "s3cr3t-token-dir")
	require.NoError(t, os.Mkdir(dir, 0o755))
	prog := filepath.Join(dir, "prog")
	require.NoError(t, os.WriteFile(prog, []byte("#!/bin/sh\nexit 0\n"), 0o755))
	secrets := map[string]string{"PATH": dir}
	_, err := m.Start(context.Background(), StartRequest{Name: "p", Spec: Spec{Argv: []string{"prog"}, Cwd: "/"}, SecretEnv: secrets})
	require.NoError(t, err)
	m.waitRecorded("p", "", 10*time.Second)
	require.NoError(t, os.Remove(prog))

	_, err = m.Restart(context.Background(), RestartRequest{Name: "p", SecretEnv: secrets})
	require.ErrorIs(t, err, ErrInvalid)
	assert.NotContains(t, err.Error(), "s3cr3t", "the secret in clear")
	assert.Contains(t, err.Error(), capture.Mask)
}

// TestRestartRefusesARecordedMask: a secret's value in the argv was
// recorded masked, and running the record would run the mask: the restart
// refuses, saying so, and starts nothing.
func TestRestartRefusesARecordedMask(t *testing.T) {
	m := supervisedManager(t)
	secrets := map[string]string{"TOKEN": "s3cr3t-value"}
	first, err := m.Start(context.Background(), StartRequest{Name: "m", Spec: Spec{Argv: []string{"/bin/echo", "s3cr3t-value"}, Cwd: "/"}, SecretEnv: secrets})
	require.NoError(t, err)
	m.waitRecorded("m", "", 10*time.Second)

	_, err = m.Restart(context.Background(), RestartRequest{Name: "m", SecretEnv: secrets})
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "held a secret's value")
	newest, err := m.Get("m", "")
	require.NoError(t, err)
	assert.Equal(t, first.Run.RunID, newest.RunID, "a run was started")
}
