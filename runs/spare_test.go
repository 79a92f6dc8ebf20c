package runs

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
	"github.com/agent-box/agent-box/supervisor"
)

// spareManager is a Manager that keeps a spare, its supervisors the
// test binary's TestHelperSupervisor in mode, logging to logf.
func spareManager(t *testing.T, mode string, logf func(string, ...any)) *Manager {
	t.Setenv("AGENT_BOX_TEST_SUPERVISOR", mode)
	sys, err := NewLiveSystem(supervisor.NewExecutables(os.Args[0]))
	require.NoError(t, err)
	m := &Manager{Store: newStore(t), Sys: sys, Env: os.Environ(), Logf: logf,
		Supervisor: []string{os.Args[0], "-test.run=^TestHelperSupervisor$", "--"}}
	t.Cleanup(m.KeepSpare())
	return m
}

// primed is spareManager, with the spare a first start launches when it
// is done.
func primed(t *testing.T, mode string, logf func(string, ...any)) *Manager {
	m := spareManager(t, mode, logf)
	m.fillSpare()
	return m
}

// A server launches no spare before it is asked for a start: one that only
// lists and reads pays for no supervisor. The first start launches its
// own, and then the spare the second takes.
func TestNoSpareBeforeTheFirstStart(t *testing.T) {
	m := spareManager(t, "1", t.Logf)
	// Proof enough at once: Fill marks its launch under way before it
	// returns.
	assert.True(t, m.spares.Idle(), "a spare before any start")
	first := startRun(t, m, "a", "/bin/sleep", "30")
	launchedFor(t, m, first, 0)
	spare := readySpare(t, m, 0)
	second := startRun(t, m, "b", "/bin/sleep", "30")
	rec, err := m.Store.Read(second.Name, second.RunID)
	require.NoError(t, err)
	assert.Equal(t, spare, rec.SupervisorPID, "the second start takes the spare")
}

// readySpare waits for m's spare, one other than not, and returns its pid.
func readySpare(t *testing.T, m *Manager, not int) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if pid := m.spares.ReadyPID(); pid != 0 && pid != not {
			return pid
		}
	}
	t.Fatal("no spare was launched")
	return 0
}

// startRun starts name with argv, to be killed when the test ends.
func startRun(t *testing.T, m *Manager, name string, argv ...string) Run {
	t.Helper()
	res, err := m.Start(context.Background(), StartRequest{Name: name, Spec: Spec{Argv: argv, Cwd: "/"}})
	require.NoError(t, err)
	t.Cleanup(func() { m.Kill(name, "", unix.SIGKILL, 0) })
	return res.Run
}

// launchedFor checks that run is running, supervised by a process the
// live system takes for its supervisor, and not by spare.
func launchedFor(t *testing.T, m *Manager, run Run, spare int) {
	t.Helper()
	assert.Equal(t, outcome.Running, run.State, run.Reason)
	rec, err := m.Store.Read(run.Name, run.RunID)
	require.NoError(t, err)
	assert.NotEqual(t, spare, rec.SupervisorPID, "not the spare")
	assert.Equal(t, outcome.Same, supervisorOf(t, m, rec))
}

// supervisorOf is what the live system takes rec's supervisor for.
func supervisorOf(t *testing.T, m *Manager, rec *runrecord.Record) outcome.Liveness {
	t.Helper()
	live, st := m.Sys.Procs.Probe(rec.SupervisorPID, rec.SupervisorStartTime)
	require.Equal(t, outcome.Same, live, "the supervisor the record names is alive")
	return m.Sys.Procs.SupervisorOf(st, rec.Name, rec.RunID)
}

// awaitGone waits until pid is gone from /proc (killed and reaped).
func awaitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := proc.ReadStat(pid); err != nil {
			return
		}
		require.True(t, time.Now().Before(deadline), "pid %d is still there", pid)
	}
}

// A Manager that keeps a spare starts each run with it, and the run's
// supervisor is then in every way a launched one's: the live system takes
// it for the run's, none of the spare's descriptors reaches the child, and
// it records the exit of a kill. A spare that died is passed over.
func TestStartTakesTheSpare(t *testing.T) {
	m := primed(t, "1", t.Logf)
	// Lists its descriptors, then sleeps: none of a spare's (the run
	// dir's, /proc/self/mem's, the pipes') may reach it.
	lsFDs := []string{"/bin/sh", "-c", "ls /proc/$$/fd; exec sleep 30"}
	fds := func(run Run) string {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if b, err := os.ReadFile(m.Store.LogPath(run.Name, run.RunID)); err == nil && strings.HasSuffix(string(b), "2\n") {
				return string(b)
			}
		}
		return "(nothing)"
	}

	first := readySpare(t, m, 0)
	run := startRun(t, m, "a", lsFDs...)
	rec, err := m.Store.Read("a", run.RunID)
	require.NoError(t, err)
	assert.Equal(t, first, rec.SupervisorPID, "the run's supervisor is the spare")
	assert.Equal(t, outcome.Running, run.State, run.Reason)
	assert.Equal(t, outcome.Same, supervisorOf(t, m, rec), "the live system takes it for the run's supervisor")
	assert.Equal(t, "0\n1\n2\n", fds(run), "the child's descriptors")
	_, err = m.Kill("a", "", unix.SIGKILL, 0)
	require.NoError(t, err)
	m.waitRecorded("a", run.RunID, 10*time.Second)
	got, err := m.Get("a", run.RunID)
	require.NoError(t, err)
	assert.Equal(t, outcome.Exited, got.State, got.Reason)
	assert.Equal(t, "SIGKILL", got.Signal, "the spare recorded the exit")

	// The next start's spare is launched after this one; one that died
	// before it was taken is passed over for a launched supervisor.
	next := readySpare(t, m, first)
	require.NoError(t, unix.Kill(next, unix.SIGKILL))
	awaitGone(t, next)
	run = startRun(t, m, "b", lsFDs...)
	launchedFor(t, m, run, next)
	assert.Equal(t, "0\n1\n2\n", fds(run), "a launched supervisor's child's, the same")
}

// No other process can join a spare's channels through /proc/PID/fd, as
// one could while they were pipes (a FIFO opens again there): a run's
// command read the next run's spec (its secret_env) and told the spare
// another run. Sockets refuse the open (ENXIO), whoever asks, root too;
// and the spare is non-dumpable, so the user's other processes cannot
// list its descriptors at all (e2e TestNothingOfTheUserReachesAgentBox).
func TestNoProcessJoinsASparesChannels(t *testing.T) {
	m := primed(t, "1", t.Logf)
	spare := readySpare(t, m, 0)
	for _, fd := range []int{supervisor.ChannelFD} {
		for _, mode := range []int{os.O_RDONLY, os.O_WRONLY} {
			f, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/%d", spare, fd), mode, 0)
			if err == nil {
				f.Close()
			}
			require.ErrorIs(t, err, unix.ENXIO, "fd %d, mode %d", fd, mode)
		}
	}
	run := startRun(t, m, "a", "/bin/sleep", "30")
	rec, err := m.Store.Read(run.Name, run.RunID)
	require.NoError(t, err)
	assert.Equal(t, spare, rec.SupervisorPID, "the spare took the run")
}

// A spare that dies while it takes its run is passed over before the run
// is visible: the start goes on with a supervisor launched for it.
func TestStartOutlivesItsSpare(t *testing.T) {
	var logs syncLog
	m := primed(t, "spare-dies", logs.printf)
	spare := readySpare(t, m, 0)
	launchedFor(t, m, startRun(t, m, "a", "/bin/sleep", "30"), spare)
	assert.Contains(t, logs.String(), fmt.Sprintf("the spare supervisor (pid %d) did not take the run", spare))
	assert.Contains(t, logs.String(), "launching a supervisor for it")
}

// Where supervisors go to systemd scopes a spare, which is in none, is of
// no use: none is launched, at the first start or after.
func TestNoSpareForSystemdScopes(t *testing.T) {
	m := spareManager(t, "1", t.Logf)
	m.Launch = func() string { return LaunchSystemd }
	m.fillSpare() // as a start does when it is done
	assert.True(t, m.spares.Idle())
	m.spares.Fill()
	assert.True(t, m.spares.Idle(), "launched none after the first start")
}

// syncLog collects a Manager's Logf lines.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(&l.b, format+"\n", args...)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
