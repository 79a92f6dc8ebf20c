package supervisor

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
)

func TestSupervisorArgs(t *testing.T) {
	id := runrecord.NewRunID(time.Now())
	for _, tc := range []struct {
		argv       []string
		name, id   string
		supervisor bool
	}{
		{[]string{"/usr/local/bin/agent-box-supervisor", "build", id}, "build", id, true},
		{[]string{"/home/u/bin/agent-box", "supervise", "a.b-c", id}, "a.b-c", id, true},
		{[]string{"runs.test", "-test.run=^TestHelper$", "--", "build", id}, "build", id, true},
		{[]string{"agent-box-supervisor", id}, "", "", false},
		{[]string{"agent-box-supervisor", "build", "b"}, "", "", false},
		{[]string{"agent-box-supervisor", "../x", id}, "", "", false},
		{[]string{"sh", "-c", "sleep 300"}, "", "", false},
		{[]string{"sleep", "300"}, "", "", false},
		{nil, "", "", false}, // a zombie's empty command line
	} {
		name, id, ok := supervisorArgs(tc.argv)
		assert.Equal(t, tc.supervisor, ok, "%q", tc.argv)
		assert.Equal(t, tc.name, name, "%q", tc.argv)
		assert.Equal(t, tc.id, id, "%q", tc.argv)
	}
}

// A live process that is no supervisor (this test, as a session leader or
// not) is never taken for one, whatever run it is asked about.
func TestIsSupervisorOfAnUnrelatedProcess(t *testing.T) {
	self, err := proc.ReadStat(os.Getpid())
	require.NoError(t, err)
	argv, err := proc.Cmdline(self.PID)
	require.NoError(t, err)
	assert.False(t, InstalledWith(os.Args[0]).IsSupervisor(self))
	assert.False(t, IsSupervisorOf(self, argv, "a", "b"))
	self.SID = self.PID // even if it led its session
	assert.False(t, IsSupervisorOf(self, argv, "a", "b"))

	// A supervisor's command line, but not a session leader (every
	// supervisor is), or of another run.
	id := runrecord.NewRunID(time.Now())
	sup := []string{"agent-box-supervisor", "build", id}
	self.SID = self.PID + 1
	assert.False(t, IsSupervisorOf(self, sup, "build", id))
	self.SID = self.PID
	assert.True(t, IsSupervisorOf(self, sup, "build", id))
	assert.False(t, IsSupervisorOf(self, sup, "build", runrecord.NewRunID(time.Now().Add(time.Second))))
	assert.False(t, IsSupervisorOf(self, sup, "other", id))
}

// TestHelperSleepingSession is not a test: with AGENT_BOX_SLEEP=1 it
// sleeps, standing in for a supervisor (it runs the test binary, which the
// test counts as a supervisor's executable).
func TestHelperSleepingSession(t *testing.T) {
	if os.Getenv("AGENT_BOX_SLEEP") != "1" {
		t.Skip("helper process")
	}
	time.Sleep(30 * time.Second)
	os.Exit(0)
}

// startSession starts argv as a session leader and returns its stat once
// its command line is in place (after its exec).
func startSession(t *testing.T, argv ...string) proc.Stat {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "AGENT_BOX_SLEEP=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	want := argv[len(argv)-1]
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := proc.ReadStat(cmd.Process.Pid)
		got, _ := proc.Cmdline(cmd.Process.Pid)
		if err == nil && len(got) > 0 && got[len(got)-1] == want {
			return st
		}
		require.True(t, time.Now().Before(deadline), "%q never started", argv)
		time.Sleep(5 * time.Millisecond)
	}
}

// TestBorrowedCommandLineIsNoSupervisor: a run's descendant that makes a
// session of its own and ends its command line with a name and a run id
// ("setsid perl -e 'sleep 178' x <run id>") is not a supervisor, so it
// cannot hide itself and everything below it from the run's kills and
// timeouts (issue 9); before, the command line alone decided. A session
// leader running a supervisor's executable with that command line is one.
func TestBorrowedCommandLineIsNoSupervisor(t *testing.T) {
	perl, err := exec.LookPath("perl")
	if err != nil {
		t.Skip("perl not installed")
	}
	id := runrecord.NewRunID(time.Now())
	known := NewExecutables(os.Args[0])

	fake := startSession(t, perl, "-e", "sleep 178", "x", id)
	assert.False(t, known.IsSupervisor(fake), "perl with a supervisor's command line")
	_, _, shaped := supervisorArgs([]string{perl, "-e", "sleep 178", "x", id})
	assert.True(t, shaped, "the command line alone still looks like a supervisor's")

	real := startSession(t, os.Args[0], "-test.run=^TestHelperSleepingSession$", "--", "x", id)
	assert.True(t, known.IsSupervisor(real), "the supervisor's executable with its command line")
	assert.False(t, NewExecutables(perl).IsSupervisor(real), "an executable it does not run")
	assert.False(t, (*Executables)(nil).IsSupervisor(real), "knowing no executable knows no supervisor")
}
