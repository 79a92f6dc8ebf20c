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

// A Manager that keeps a spare starts each run with it, and the run's
// supervisor is then in every way a launched one's: the live system takes
// it for the run's, and it records the exit of a kill. A spare that died
// is passed over.
func TestStartTakesTheSpare(t *testing.T) {
	t.Setenv("AGENT_BOX_TEST_SUPERVISOR", "1")
	sys, err := NewLiveSystem(supervisor.NewExecutables(os.Args[0]))
	require.NoError(t, err)
	m := &Manager{Store: newStore(t), Sys: sys, Env: os.Environ(), Logf: t.Logf,
		Supervisor: []string{os.Args[0], "-test.run=^TestHelperSupervisor$", "--"}}
	t.Cleanup(m.KeepSpare())
	spare := func(not int) int {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if pid := m.spares.ReadyPID(); pid != 0 && pid != not {
				return pid
			}
		}
		t.Fatal("no spare was launched")
		return 0
	}
	start := func(name string) Run {
		// It lists its descriptors, then sleeps: none of a spare's (the
		// run dir's, /proc/self/mem's, the pipes') reaches it.
		res, err := m.Start(context.Background(), StartRequest{Name: name, Argv: []string{"/bin/sh", "-c", "ls /proc/$$/fd; exec sleep 30"}, Cwd: "/"})
		require.NoError(t, err)
		t.Cleanup(func() { m.Kill(name, "", unix.SIGKILL, 0) })
		return res.Run
	}

	first := spare(0)
	run := start("a")
	rec, err := m.Store.Read("a", run.RunID)
	require.NoError(t, err)
	assert.Equal(t, first, rec.SupervisorPID, "the run's supervisor is the spare")
	assert.Equal(t, outcome.Running, run.State, run.Reason)
	assert.Equal(t, outcome.Same, m.Sys.SupervisorOf(rec.SupervisorPID, "a", run.RunID), "the live system takes it for the run's supervisor")
	fds := func(name, runID string) string {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if b, err := os.ReadFile(m.Store.LogPath(name, runID)); err == nil && strings.HasSuffix(string(b), "2\n") {
				return string(b)
			}
		}
		return "(nothing)"
	}
	assert.Equal(t, "0\n1\n2\n", fds("a", run.RunID), "the child's descriptors")
	_, err = m.Kill("a", "", unix.SIGKILL, 0)
	require.NoError(t, err)
	m.waitRecorded("a", run.RunID, 10*time.Second)
	got, err := m.Get("a", run.RunID)
	require.NoError(t, err)
	assert.Equal(t, outcome.Exited, got.State, got.Reason)
	assert.Equal(t, "SIGKILL", got.Signal, "the spare recorded the exit")

	// The next start's spare is launched after this one; one that died
	// before it was taken is passed over for a launched supervisor.
	next := spare(first)
	require.NoError(t, unix.Kill(next, unix.SIGKILL))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := proc.ReadStat(next); err != nil {
			break // reaped
		}
		require.True(t, time.Now().Before(deadline), "the spare was never reaped")
	}
	run = start("b")
	rec, err = m.Store.Read("b", run.RunID)
	require.NoError(t, err)
	assert.NotEqual(t, next, rec.SupervisorPID)
	assert.Equal(t, outcome.Running, run.State, run.Reason)
	assert.Equal(t, "0\n1\n2\n", fds("b", run.RunID), "a launched supervisor's child's, the same")
}

// Any process of the user can write to a spare's spec pipe through
// /proc/PID/fd/3, and so tell it another run. The start it is then taken
// for does not take its word: the run is created with a launched
// supervisor, and the spare is killed.
func TestSpareToldAnotherRun(t *testing.T) {
	t.Setenv("AGENT_BOX_TEST_SUPERVISOR", "1")
	sys, err := NewLiveSystem(supervisor.NewExecutables(os.Args[0]))
	require.NoError(t, err)
	m := &Manager{Store: newStore(t), Sys: sys, Env: os.Environ(), Logf: t.Logf,
		Supervisor: []string{os.Args[0], "-test.run=^TestHelperSupervisor$", "--"}}
	t.Cleanup(m.KeepSpare())
	var spare int
	for deadline := time.Now().Add(10 * time.Second); spare == 0; time.Sleep(time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "no spare was launched")
		spare = m.spares.ReadyPID()
	}
	pipe, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/%d", spare, supervisor.SpecFD), os.O_WRONLY, 0)
	require.NoError(t, err)
	other := runrecord.NewRunID(time.Now())
	_, err = fmt.Fprintf(pipe, `{"spec":{"name":"other","run_id":%q,"capture_mode":"combined"},"dir":%q}`+"\n", other, t.TempDir())
	require.NoError(t, err)
	pipe.Close()

	res, err := m.Start(context.Background(), StartRequest{Name: "a", Argv: []string{"/bin/sleep", "30"}, Cwd: "/"})
	require.NoError(t, err)
	t.Cleanup(func() { m.Kill("a", "", unix.SIGKILL, 0) })
	assert.Equal(t, outcome.Running, res.Run.State, res.Run.Reason)
	rec, err := m.Store.Read("a", res.RunID)
	require.NoError(t, err)
	assert.NotEqual(t, spare, rec.SupervisorPID)
	assert.Equal(t, outcome.Same, m.Sys.SupervisorOf(rec.SupervisorPID, "a", res.RunID))
	_, err = proc.ReadStat(spare)
	for deadline := time.Now().Add(10 * time.Second); err == nil && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		_, err = proc.ReadStat(spare)
	}
	assert.Error(t, err, "the spare was killed")
}

// A spare that dies while it takes its run is passed over before the run
// is visible: the start goes on with a supervisor launched for it.
func TestStartOutlivesItsSpare(t *testing.T) {
	t.Setenv("AGENT_BOX_TEST_SUPERVISOR", "spare-dies")
	sys, err := NewLiveSystem(supervisor.NewExecutables(os.Args[0]))
	require.NoError(t, err)
	var logs syncLog
	m := &Manager{Store: newStore(t), Sys: sys, Env: os.Environ(), Logf: logs.printf,
		Supervisor: []string{os.Args[0], "-test.run=^TestHelperSupervisor$", "--"}}
	t.Cleanup(m.KeepSpare())
	var spare int
	for deadline := time.Now().Add(10 * time.Second); spare == 0; time.Sleep(time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "no spare was launched")
		spare = m.spares.ReadyPID()
	}
	res, err := m.Start(context.Background(), StartRequest{Name: "a", Argv: []string{"/bin/sleep", "30"}, Cwd: "/"})
	require.NoError(t, err)
	t.Cleanup(func() { m.Kill("a", "", unix.SIGKILL, 0) })
	assert.Equal(t, outcome.Running, res.Run.State, res.Run.Reason)
	rec, err := m.Store.Read("a", res.RunID)
	require.NoError(t, err)
	assert.NotEqual(t, spare, rec.SupervisorPID)
	assert.Equal(t, outcome.Same, m.Sys.SupervisorOf(rec.SupervisorPID, "a", res.RunID))
	assert.Contains(t, logs.String(), fmt.Sprintf("the spare supervisor (pid %d) did not take the run", spare))
	assert.Contains(t, logs.String(), "launching a supervisor for it")
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
