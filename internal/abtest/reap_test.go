package abtest

import (
	"os/exec"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/proc"
)

func TestStateDirArg(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"agent-box", "--state-dir", "/s"}, "/s"},
		{[]string{"prlimit", "--fsize=9:9", "--", "agent-box", "--state-dir", "/s"}, "/s"},
		{[]string{"agent-box", "--state-dir=/s"}, "/s"},
		{[]string{"agent-box", "--state-dir"}, ""},
		{[]string{"agent-box"}, ""},
	} {
		assert.Equal(t, c.want, stateDirArg(c.args), "%q", c.args)
	}
}

// TestConnectCmdReapsRuns: a run left behind by a test whose server a
// wrapper starts (prlimit, env) is ended before the test's state dir is
// removed; a supervisor still writing its run dir made that removal fail.
func TestConnectCmdReapsRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds agent-box")
	}
	bin, cleanup, err := Build()
	require.NoError(t, err)
	defer cleanup()
	var pid int
	t.Run("leaves a run behind", func(t *testing.T) {
		s := ConnectCmd(t, exec.Command("env", bin, "--state-dir", t.TempDir()))
		pid = int(Num(s.OK("process_start", map[string]any{"name": "left", "command": "sleep 300"}).Run()["pid"]))
		require.Greater(t, pid, 1)
	})
	if st, err := proc.ReadStat(pid); err == nil && !st.Dead() {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("the run's process %d (%c) outlived the test", pid, st.State)
	}
}
