package runs

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agent-box/agent-box/live"
)

func TestChooseLaunch(t *testing.T) {
	kill := live.HostFacts{SystemdBooted: true, InSessionScope: true, KillUserProcesses: true, SystemdRun: true, Root: true}
	cases := []struct {
		name string
		mode string
		f    live.HostFacts
		want string
		dies bool // EndsWithSession
	}{
		{"container without systemd", "", live.HostFacts{SystemdRun: true}, LaunchSetsid, false},
		{"systemd, not in a session", "auto", live.HostFacts{SystemdBooted: true, SystemdRun: true, KillUserProcesses: true}, LaunchSetsid, false},
		{"session, logind keeps processes", "", live.HostFacts{SystemdBooted: true, InSessionScope: true, SystemdRun: true}, LaunchSetsid, false},
		{"session, logind kills", "", kill, LaunchSystemd, false},
		{"logind kills, no systemd-run", "", live.HostFacts{SystemdBooted: true, InSessionScope: true, KillUserProcesses: true}, LaunchSetsid, true},
		{"forced setsid", LaunchSetsid, kill, LaunchSetsid, true},
		{"forced systemd", LaunchSystemd, live.HostFacts{SystemdRun: true}, LaunchSystemd, false},
		{"forced systemd, no systemd-run", LaunchSystemd, live.HostFacts{}, LaunchSetsid, false},
	}
	for _, c := range cases {
		got, reason := ChooseLaunch(c.mode, c.f)
		assert.Equal(t, c.want, got, c.name)
		assert.NotEmpty(t, reason, c.name)
		assert.Equal(t, c.dies, EndsWithSession(got, c.f), c.name)
	}
	_, reason := ChooseLaunch("", live.HostFacts{SystemdBooted: true, InSessionScope: true, KillUserProcesses: true})
	assert.Contains(t, reason, "will die", "the operator must be warned")
}
