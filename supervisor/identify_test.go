package supervisor

import (
	"os"
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
	assert.False(t, IsSupervisor(self))
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
