package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
)

// attacker is a run's command that does what any process of the user can
// do to the processes of agent-box (issue 30): it waits until it sees a
// server, a spare supervisor and its own run's supervisor, then tries to
// read each one's environment, open its memory and list and open its
// descriptors (O_RDWR: a pipe opened through /proc/PID/fd never blocks
// so). It prints SAW for every process it found, OPEN for every file it
// could open, and, as a control, what it could do to a process of its own
// (a sleep it started), which an ordinary process of the user allows.
const attacker = `
sleep 600 & own=$!
try() { # try PID WHAT
	if (: <"/proc/$1/environ") 2>/dev/null; then echo "OPEN $2 environ"; fi
	if (: <"/proc/$1/mem") 2>/dev/null; then echo "OPEN $2 mem"; fi
	for f in /proc/$1/fd/*; do
		[ -e "$f" ] || continue
		if (: <>"$f") 2>/dev/null; then echo "OPEN $2 $f"; fi
	done
}
found() { # found KIND: the pid of an agent-box process of that kind
	for d in /proc/[0-9]*; do
		p=${d#/proc/}
		[ "$p" = $$ ] && continue
		c=$(tr '\0' ' ' 2>/dev/null <"$d/cmdline") 2>/dev/null || continue
		case "$1:$c" in
		server:/*"/agent-box --state-dir"*) echo "$p"; return ;;
		spare:*agent-box-supervisor*--spare*) echo "$p"; return ;;
		supervisor:*agent-box-supervisor*" probe $AGENT_BOX_RUN_ID "*) echo "$p"; return ;;
		esac
	done
}
for kind in server spare supervisor; do
	i=0
	while :; do
		p=$(found $kind)
		[ -n "$p" ] && break
		i=$((i+1)); [ $i -gt 200 ] && break
		sleep 0.05
	done
	[ -n "$p" ] && echo "SAW $kind" && try "$p" "$kind"
done
try "$own" control
kill $own
echo END
`

// TestNothingOfTheUserReachesAgentBox runs agent-box as a normal user, and
// as a run of it a command that tries what any process of that user may
// try through /proc: read agent-box's environments and memory, open its
// pipes. Root may open anything, so the server runs as the install lane's
// user (.ci/setup makes it). Before issue 30 a run read the next run's
// spec, secret_env and all, from the spare supervisor's spec pipe.
func TestNothingOfTheUserReachesAgentBox(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs agent-box as another user")
	}
	if os.Geteuid() != 0 {
		missing(t, "runs as root: it starts agent-box as user %s", installUser)
	}
	u, err := user.Lookup(installUser)
	if err != nil {
		missing(t, "user %s does not exist (.ci/setup creates it): %v", installUser, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)

	// The user must reach the binaries and the state dir: a dir of its
	// own, under a temporary dir others may cross.
	top, err := os.MkdirTemp("", "agent-box-nonroot-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(top) })
	require.NoError(t, os.Chmod(top, 0o755))
	dir := filepath.Join(top, "box")
	require.NoError(t, os.Mkdir(dir, 0o700))
	// Both binaries, as installed: the server and the lean supervisor,
	// which the spare and the run's supervisor run.
	require.NoError(t, abtest.BuildInto(repoRoot, dir, "agent-box", "agent-box-supervisor"))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "state"), 0o700))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "nested"), 0o700))
	chownTree(t, dir, uid, gid)

	cmd := exec.Command("runuser", "-u", installUser, "--",
		"env", "-i", "HOME="+u.HomeDir, "PATH=/usr/bin:/bin", "GORACE="+os.Getenv("GORACE"),
		filepath.Join(dir, "agent-box"), "--state-dir", filepath.Join(dir, "state"))
	s := abtest.ConnectCmd(t, cmd)
	s.OK("process_start", map[string]any{
		"name": "probe", "command": attacker, "cwd": dir,
		"secret_env": map[string]any{"PROBE_SECRET": "s3cret-of-the-run"},
	})
	var out string
	abtest.WaitFor(t, "the probe to end", 2*time.Minute, func() bool {
		all, _, _ := s.ReadAll("probe", 1<<20, false)
		out = string(all)
		return strings.Contains(out, "END")
	})
	t.Logf("the probe's output:\n%s", out)
	for _, kind := range []string{"server", "spare", "supervisor"} {
		assert.Contains(t, out, "SAW "+kind+"\n", "the probe did not find the %s: the test tested nothing of it", kind)
	}
	// The control: the user's own processes are open to it, so a closed
	// agent-box is agent-box's doing, not the machine's.
	assert.Contains(t, out, "OPEN control environ")
	assert.Contains(t, out, "OPEN control mem")
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "OPEN ") && !strings.HasPrefix(line, "OPEN control ") {
			t.Errorf("a process of the user reached agent-box: %s", line)
		}
	}

	nestedRunSurvivesTheOuterKill(t, s, dir)
}

// nestedRunSurvivesTheOuterKill: a run that starts a run of its own (with
// the CLI, in another state dir) leaves it alone when it is killed. The
// nested run's supervisor ends up below the outer one, its subreaper, and
// is told from the outer run's processes by the file it runs; as a normal
// user a supervisor's /proc/PID/exe is closed (it is non-dumpable), and
// its command line is what is left to know it by.
func nestedRunSurvivesTheOuterKill(t *testing.T, s *abtest.Server, dir string) {
	nested := filepath.Join(dir, "nested")
	s.OK("process_start", map[string]any{"name": "outer", "cwd": dir,
		"command": filepath.Join(dir, "agent-box") + " --state-dir " + nested + " start inner -- sleep 300 && exec sleep 300"})
	var inner struct {
		PID           int `json:"pid"`
		SupervisorPID int `json:"supervisor_pid"`
	}
	abtest.WaitFor(t, "the nested run's record to name its child", time.Minute, func() bool {
		paths, _ := filepath.Glob(filepath.Join(nested, "runs", "inner", "*", "record.json"))
		if len(paths) != 1 {
			return false
		}
		b, err := os.ReadFile(paths[0])
		return err == nil && json.Unmarshal(b, &inner) == nil && inner.PID > 0
	})
	t.Cleanup(func() {
		syscall.Kill(inner.PID, syscall.SIGKILL)
		syscall.Kill(inner.SupervisorPID, syscall.SIGKILL)
	})
	s.OK("process_kill", map[string]any{"name": "outer", "signal": "KILL"})
	w := s.OK("process_wait", map[string]any{"name": "outer", "timeout_ms": 30000})
	require.Equal(t, "exited", w.Data["run"].(map[string]any)["state"], w.Text)
	for what, pid := range map[string]int{"supervisor": inner.SupervisorPID, "child": inner.PID} {
		assert.NoError(t, syscall.Kill(pid, 0), "the nested run's %s (pid %d) was killed with the outer run", what, pid)
	}
}
