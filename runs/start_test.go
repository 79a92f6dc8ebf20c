package runs

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/supervisor"
)

// TestHelperSlowSupervisor is not a test: with AGENT_BOX_SLOW_SUPERVISOR=1
// it is a supervisor that takes its time to start, as a loaded machine's
// would.
func TestHelperSlowSupervisor(t *testing.T) {
	if os.Getenv("AGENT_BOX_SLOW_SUPERVISOR") != "1" {
		t.Skip("helper process")
	}
	time.Sleep(300 * time.Millisecond)
	if err := supervisor.Main(); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// A run is visible from the moment its record is, and from then on reads
// "starting" while its supervisor starts the child: not "start_interrupted",
// which would free its name and let process_remove delete it.
func TestRunBeingStartedIsStartingAndKept(t *testing.T) {
	t.Setenv("AGENT_BOX_SLOW_SUPERVISOR", "1")
	sys, err := NewLiveSystem(supervisor.NewExecutables(os.Args[0]))
	require.NoError(t, err)
	store := newStore(t)
	m := &Manager{Store: store, Sys: sys,
		Supervisor: []string{os.Args[0], "-test.run=^TestHelperSlowSupervisor$", "--"}}

	type result struct {
		run Run
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := m.Start(context.Background(), StartRequest{Name: "build", Argv: []string{"/bin/sleep", "30"}, Cwd: "/"})
		done <- result{r, err}
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
