package live

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ProbeHost's facts are those of this machine, each checked here another
// way: sd_booted(3)'s test, the cgroup path logind gives a session's
// processes, the effective uid. SystemdRun follows the PATH, the one that
// exec.Command("systemd-run") searches when the supervisor is launched.
func TestProbeHostHere(t *testing.T) {
	fi, err := os.Stat("/run/systemd/system")
	booted := err == nil && fi.IsDir()
	cgroups, err := os.ReadFile("/proc/self/cgroup")
	require.NoError(t, err)
	inSession := false
	for _, line := range strings.Split(strings.TrimSpace(string(cgroups)), "\n") {
		// hierarchy-ID:controllers:path (cgroups(7)); logind puts a
		// session's processes in .../session-ID.scope.
		parts := strings.SplitN(line, ":", 3)
		require.Len(t, parts, 3, "/proc/self/cgroup line %q", line)
		for _, dir := range strings.Split(parts[2], "/") {
			if sessionScope.MatchString(dir) {
				inSession = true
			}
		}
	}

	withRun := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(withRun, "systemd-run"), nil, 0o755))
	t.Setenv("PATH", withRun+string(os.PathListSeparator)+os.Getenv("PATH"))
	f := ProbeHost()
	pid1, _ := os.ReadFile("/proc/1/comm")
	t.Logf("facts %+v (pid 1 is %q)", f, strings.TrimSpace(string(pid1)))
	assert.Equal(t, booted, f.SystemdBooted, "/run/systemd/system is a directory: %v", booted)
	assert.Equal(t, inSession, f.InSessionScope, "/proc/self/cgroup:\n%s", cgroups)
	assert.Equal(t, os.Geteuid() == 0, f.Root)
	assert.True(t, f.SystemdRun, "systemd-run is in %s, first on PATH", withRun)
	if !booted || !inSession {
		// logind is asked only from a session scope on a systemd box.
		assert.False(t, f.KillUserProcesses)
	}

	t.Setenv("PATH", t.TempDir())
	assert.False(t, ProbeHost().SystemdRun, "no systemd-run on PATH")
}

var sessionScope = regexp.MustCompile(`^session-[A-Za-z0-9]+\.scope$`)
