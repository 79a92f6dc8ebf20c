package runs

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestChooseLaunch(t *testing.T) {
	kill := HostFacts{SystemdBooted: true, InSessionScope: true, KillUserProcesses: true, SystemdRun: true, Root: true}
	cases := []struct {
		name string
		mode string
		f    HostFacts
		want string
	}{
		{"container without systemd", "", HostFacts{SystemdRun: true}, LaunchSetsid},
		{"systemd, not in a session", "auto", HostFacts{SystemdBooted: true, SystemdRun: true, KillUserProcesses: true}, LaunchSetsid},
		{"session, logind keeps processes", "", HostFacts{SystemdBooted: true, InSessionScope: true, SystemdRun: true}, LaunchSetsid},
		{"session, logind kills", "", kill, LaunchSystemd},
		{"logind kills, no systemd-run", "", HostFacts{SystemdBooted: true, InSessionScope: true, KillUserProcesses: true}, LaunchSetsid},
		{"forced setsid", LaunchSetsid, kill, LaunchSetsid},
		{"forced systemd", LaunchSystemd, HostFacts{SystemdRun: true}, LaunchSystemd},
		{"forced systemd, no systemd-run", LaunchSystemd, HostFacts{}, LaunchSetsid},
	}
	for _, c := range cases {
		got, reason := ChooseLaunch(c.mode, c.f)
		assert.Equal(t, c.want, got, c.name)
		assert.NotEmpty(t, reason, c.name)
	}
	_, reason := ChooseLaunch("", HostFacts{SystemdBooted: true, InSessionScope: true, KillUserProcesses: true})
	assert.Contains(t, reason, "will die", "the operator must be warned")
}

func TestLaunchArgs(t *testing.T) {
	cmd := []string{"/bin/agent-box", "supervise", "build", "20261202T141701.123456789Z-3f9a1c"}
	assert.Equal(t, cmd, launchArgs(LaunchSetsid, true, "build", cmd[3], cmd))
	got := launchArgs(LaunchSystemd, false, "build", cmd[3], cmd)
	assert.Equal(t, []string{"systemd-run", "--user", "--scope", "--collect", "--quiet", "--unit", "agent-box-build-3f9a1c"}, got[:7])
	assert.Equal(t, cmd, got[7:])
	assert.NotContains(t, launchArgs(LaunchSystemd, true, "build", cmd[3], cmd), "--user")
}

// The path this machine can run: whatever ProbeHost finds here, the choice
// it leads to is one of the two launchers and comes with a reason.
func TestProbeHostHere(t *testing.T) {
	f := ProbeHost()
	launch, reason := ChooseLaunch("", f)
	assert.Contains(t, []string{LaunchSetsid, LaunchSystemd}, launch)
	t.Logf("facts %+v: %s (%s)", f, launch, reason)
}
