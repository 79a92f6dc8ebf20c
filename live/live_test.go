package live

import (
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/supervisor"
)

// The facts of this test process, each read another way.
func TestProcsOfThisProcess(t *testing.T) {
	h, err := ReadHost()
	require.NoError(t, err)
	boot, err := proc.BootID()
	require.NoError(t, err)
	assert.Equal(t, boot, h.Boot)
	pgid, _ := unix.Getpgid(0)
	sid, _ := unix.Getsid(0)
	assert.Equal(t, outcome.Self{PID: os.Getpid(), PGID: pgid, SID: sid}, h.Self)

	p := Procs{Supervisors: supervisor.NewExecutables()}
	me, err := proc.ReadStat(os.Getpid())
	require.NoError(t, err)
	live, st := p.Probe(me.PID, me.StartTime)
	assert.Equal(t, outcome.Same, live)
	assert.Equal(t, me.PID, st.PID)
	reused, _ := p.Probe(me.PID, me.StartTime+1)
	assert.Equal(t, outcome.Reused, reused, "another start time is another process")

	all, err := p.Processes()
	require.NoError(t, err)
	assert.True(t, slices.ContainsFunc(all, func(s proc.Stat) bool { return s.PID == me.PID }), "a scan finds us")
	assert.True(t, p.GroupAlive(pgid), "our own group")
	assert.False(t, p.GroupAlive(0), "no group 0: kill(0) would be our own")

	assert.Equal(t, outcome.Foreign, p.SupervisorOf(st, "a", "20260101T000000Z-abcdef"), "a test binary supervises no run")
	assert.False(t, p.IsSupervisor(st))
	assert.False(t, p.EnvironHas(me.PID, "AGENT_BOX_LIVE_TEST=never set"))
	u, err := p.Usage(me.PID, me.StartTime)
	require.NoError(t, err)
	assert.Positive(t, u.RSSBytes)
}
