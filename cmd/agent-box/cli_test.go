package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/internal/abtest"
)

// agentBox runs the CLI and returns stdout, stderr and the exit status.
func agentBox(t *testing.T, state string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"--state-dir", state}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return out.String(), errb.String(), code
}

func TestCLIOnRunsStartedOverMCP(t *testing.T) {
	state := t.TempDir()
	s := connect(t, state)
	s.OK("process_start", map[string]any{"name": "mcp-run", "capture_mode": "framed",
		"command": `echo to-out; echo to-err >&2; sleep 1; echo bye; exit 5`})

	out, _, code := agentBox(t, state, "ps")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "mcp-run")
	assert.Contains(t, out, "running")

	// logs -f follows to the end and exits with the run's status.
	out, errOut, code := agentBox(t, state, "logs", "-f", "--stream", "stdout", "mcp-run")
	assert.Equal(t, 5, code, errOut)
	assert.Equal(t, "to-out\nbye\n", out)
	out, _, code = agentBox(t, state, "logs", "--stream", "stderr", "mcp-run")
	assert.Equal(t, 0, code)
	assert.Equal(t, "to-err\n", out)

	out, _, code = agentBox(t, state, "ps", "--json")
	require.Equal(t, 0, code)
	var list struct {
		Runs []map[string]any `json:"runs"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	require.Len(t, list.Runs, 1)
	assert.Equal(t, "exited", list.Runs[0]["state"])
	assert.Equal(t, float64(5), list.Runs[0]["exit_code"])

	_, errOut, code = agentBox(t, state, "logs", "nope")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "no run named")
}

func TestMCPOnRunsStartedByCLI(t *testing.T) {
	state := t.TempDir()
	out, errOut, code := agentBox(t, state, "start", "cli-run", "--", "sh", "-c", "echo from-cli; sleep 300")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "started cli-run")

	s := connect(t, state)
	run := abtest.RunOf(t, s.OK("process_list", nil), "cli-run")
	assert.Equal(t, "running", run["state"])
	abtest.WaitFor(t, "output", 10*time.Second, func() bool {
		return abtest.Str(s.OK("tail_log", map[string]any{"name": "cli-run"}).Data["content"]) == "from-cli\n"
	})

	// wait blocks until the CLI's kill ends it, then exits 128+15.
	done := make(chan int, 1)
	go func() {
		_, _, code := agentBox(t, state, "wait", "cli-run")
		done <- code
	}()
	out, errOut, code = agentBox(t, state, "kill", "-s", "TERM", "cli-run")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "SIGTERM")
	select {
	case code := <-done:
		assert.Equal(t, 128+15, code)
	case <-time.After(30 * time.Second):
		t.Fatal("agent-box wait did not return after the kill")
	}
	run = abtest.RunOf(t, s.OK("process_list", nil), "cli-run")
	assert.Equal(t, "SIGTERM", run["signal"])

	_, errOut, code = agentBox(t, state, "kill", "-s", "BOGUS", "cli-run")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "signal")
	_, errOut, code = agentBox(t, state, "start", "bad name", "--", "true")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "invalid run name")
}

func TestVersionAndHelpOnTerminal(t *testing.T) {
	out, _, code := agentBox(t, t.TempDir(), "version")
	assert.Equal(t, 0, code)
	assert.True(t, strings.HasPrefix(out, "agent-box "), out)

	// On a terminal with no subcommand: short help, not a silent MCP server.
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pty here: %v", err)
	}
	defer ptmx.Close()
	require.NoError(t, unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	require.NoError(t, err)
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	require.NoError(t, err)
	defer tty.Close()
	cmd := exec.Command(binary, "--state-dir", t.TempDir())
	cmd.Stdin = tty
	var errb bytes.Buffer
	cmd.Stderr = &errb
	done := make(chan error, 1)
	require.NoError(t, cmd.Start())
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		require.True(t, errors.As(err, &exit), "want a usage exit status, got %v", err)
		assert.Equal(t, 2, exit.ExitCode())
		assert.Contains(t, errb.String(), "ssh box -- agent-box")
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("agent-box on a terminal hung instead of printing help")
	}
}
