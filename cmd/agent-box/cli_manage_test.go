//go:build linux

package main

import (
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

// waitForLog waits until the newest run of name has logged want.
func waitForLog(t *testing.T, state, name, want string) {
	t.Helper()
	log := logPath(t, state, name)
	abtest.WaitFor(t, fmt.Sprintf("%s to log %q", name, want), 10*time.Second, func() bool {
		b, _ := os.ReadFile(log)
		return strings.Contains(string(b), want)
	})
}

// stop is docker stop's: TERM, then KILL after -t seconds for a run that
// ignores it; back once the run has ended, saying how.
func TestCLIStop(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	startRun(t, state, "plain", "--", "sleep", "300")
	out, errOut, code := agentBox(t, state, "stop", "plain")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "exited(SIGTERM)")
	assert.Equal(t, "exited", onlyRun(t, state, "plain")["state"], "ended when stop is back")

	startRun(t, state, "stubborn", "--", "sh", "-c", `trap "" TERM; echo ready; exec sleep 300`)
	t.Cleanup(func() { agentBox(t, state, "kill", "-s", "KILL", "stubborn") })
	waitForLog(t, state, "stubborn", "ready\n")
	out, errOut, code = agentBox(t, state, "stop", "-t", "0", "stubborn")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "exited(SIGKILL)")

	out, errOut, code = agentBox(t, state, "stop", "plain")
	assert.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "already", "a run that has ended is stopped already")
	_, errOut, code = agentBox(t, state, "stop", "-t", "-1", "plain")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "-t -1")
}

// rm removes a finished run and refuses a running one; -a removes every
// finished run.
func TestCLIRemove(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	startRun(t, state, "done", "--", "true")
	_, errOut, code := agentBox(t, state, "wait", "done")
	require.Equal(t, 0, code, errOut)
	startRun(t, state, "live", "--", "sleep", "300")
	t.Cleanup(func() { agentBox(t, state, "kill", "-s", "KILL", "live") })

	_, errOut, code = agentBox(t, state, "rm", "live")
	assert.Equal(t, 125, code)
	assert.Contains(t, errOut, "running")
	out, errOut, code := agentBox(t, state, "rm", "done")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "removed done ")
	out, _, _ = agentBox(t, state, "ps", "-a")
	assert.NotContains(t, out, " done ", "the run is gone")
	_, errOut, code = agentBox(t, state, "rm", "done")
	assert.Equal(t, 125, code)
	assert.Contains(t, errOut, `no run named "done"`)

	startRun(t, state, "a", "--", "true")
	startRun(t, state, "b", "--", "true")
	agentBox(t, state, "wait", "a")
	agentBox(t, state, "wait", "b")
	out, errOut, code = agentBox(t, state, "rm", "-a")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "removed a ")
	assert.Contains(t, out, "removed b ")
	assert.Equal(t, "running", onlyRun(t, state, "live")["state"], "rm -a leaves what runs")
	_, errOut, code = agentBox(t, state, "rm", "-a", "--run-id", "x", "a")
	assert.Equal(t, 2, code, errOut)
}

// restart stops the run and starts its command again, as a new run.
func TestCLIRestart(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	first := startRun(t, state, "srv", "--", "sh", "-c", "echo up; exec sleep 300")
	t.Cleanup(func() { agentBox(t, state, "kill", "-s", "KILL", "srv") })
	out, errOut, code := agentBox(t, state, "restart", "srv")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "restarted srv run_id=")
	assert.Contains(t, out, "(was "+first+": exited(SIGTERM))")
	run := onlyRun(t, state, "srv")
	assert.Equal(t, "running", run["state"])
	assert.NotEqual(t, first, run["run_id"])
}

// write sends TEXT and a newline, or stdin as it is, to a run started
// with -i; --eof closes its stdin.
func TestCLIWrite(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	startRun(t, state, "echoer", "-i", "--", "sh", "-c", `while IFS= read -r l; do printf 'got %s\n' "$l"; done; echo eof`)
	out, errOut, code := agentBox(t, state, "write", "echoer", "hello", "world")
	require.Equal(t, 0, code, errOut+out)
	waitForLog(t, state, "echoer", "got hello world\n")

	cmd := exec.Command(binary, "--state-dir", state, "write", "--eof", "echoer")
	cmd.Stdin = strings.NewReader("a\\b\x01c\n")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", b)
	_, errOut, code = agentBox(t, state, "wait", "echoer")
	require.Equal(t, 0, code, errOut)
	out, _, _ = agentBox(t, state, "logs", "echoer")
	assert.Equal(t, "got hello world\ngot a\\b\x01c\neof\n", out, "stdin's bytes as they are, then EOF")

	// More than one write takes (1 MiB), from stdin, whole.
	startRun(t, state, "counter", "-i", "--", "wc", "-c")
	cmd = exec.Command(binary, "--state-dir", state, "write", "--eof", "--", "counter")
	cmd.Stdin = strings.NewReader(strings.Repeat("x", 3<<20))
	b, err = cmd.CombinedOutput()
	require.NoError(t, err, "%s", b)
	_, errOut, code = agentBox(t, state, "wait", "counter")
	require.Equal(t, 0, code, errOut)
	out, _, _ = agentBox(t, state, "logs", "counter")
	assert.Equal(t, fmt.Sprint(3<<20), strings.TrimSpace(out))

	startRun(t, state, "deaf", "--", "sleep", "300")
	t.Cleanup(func() { agentBox(t, state, "kill", "-s", "KILL", "deaf") })
	_, errOut, code = agentBox(t, state, "write", "deaf", "x")
	assert.Equal(t, 2, code, "a run without stdin is the wrong run to name: %s", errOut)
	assert.Contains(t, errOut, "stdin")
}

// logs -n N prints the last N lines; with -f, what follows too.
func TestCLILogsLastLines(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	startRun(t, state, "count", "--", "seq", "1", "10")
	agentBox(t, state, "wait", "count")
	out, errOut, code := agentBox(t, state, "logs", "-n", "3", "count")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "8\n9\n10\n", out)
	out, errOut, code = agentBox(t, state, "logs", "-n", "0", "-f", "count")
	assert.Equal(t, 0, code, errOut)
	assert.Empty(t, out)
	out, _, _ = agentBox(t, state, "logs", "-n", "20", "count")
	assert.Equal(t, 10, strings.Count(out, "\n"), "all there is")
}

// ps says what a bare status hides (a timeout's kill), the caps a run has,
// and the box.
func TestCLIPsSaysWhyAndWhere(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	startRun(t, state, "slow", "--timeout", "1", "--", "sleep", "300")
	_, _, code := agentBox(t, state, "wait", "slow")
	require.Equal(t, 128+15, code)
	out, errOut, code := agentBox(t, state, "ps")
	require.Equal(t, 0, code, errOut)
	host, _ := os.Hostname()
	header, row, _ := strings.Cut(out, "\n")
	assert.True(t, strings.HasPrefix(header, "BOX "), header)
	assert.Contains(t, header, "LIMITS")
	assert.True(t, strings.HasPrefix(row, host+" "), row)
	assert.Contains(t, row, "exited(SIGTERM, timed out)")
}

// A command that waits ends at Ctrl-C or SIGTERM, on this machine and on
// a box elsewhere, with the status a shell gives a command the signal
// killed, and no error to read: a call cut short is not a wait whose time
// was up, to be made again.
func TestCLIWaitsEndAtASignal(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	startRun(t, state, "long", "--", "sh", "-c", "echo ready; exec sleep 300")
	t.Cleanup(func() { agentBox(t, state, "kill", "-s", "KILL", "long") })
	for _, tc := range []struct {
		box []string
		sig unix.Signal
	}{
		{[]string{"--state-dir", state}, unix.SIGINT},
		{[]string{"--state-dir", state}, unix.SIGTERM},
		{[]string{"--exec", binary + " --state-dir " + state}, unix.SIGINT},
	} {
		// logs -f has printed the line when it waits for the next: it
		// listens for the signal by then.
		cmd := exec.Command(binary, append(tc.box, "logs", "-f", "long")...)
		var out lockedBuffer
		cmd.Stdout, cmd.Stderr = &out, &out
		require.NoError(t, cmd.Start())
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		abtest.WaitFor(t, "logs -f to print the line", 10*time.Second, func() bool { return out.String() == "ready\n" })
		require.NoError(t, cmd.Process.Signal(tc.sig))
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("%q went on after %s", cmd.Args, tc.sig)
		}
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "%q", cmd.Args)
		assert.Equal(t, 128+int(tc.sig), exit.ExitCode(), "%q: %s", cmd.Args, out.String())
		assert.Equal(t, "ready\n", out.String(), "%q: nothing more", cmd.Args)
	}
	assert.Equal(t, "running", onlyRun(t, state, "long")["state"])
}

// logs -f follows the run it began on, not the name: a restart under it
// makes another run the name's newest, and the follow still reads the old
// run's log to its end and exits with its status. So does logs -n -f.
func TestCLILogsFollowsOneRunThroughARestart(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"logs", "-f", "chat"}, {"logs", "-n", "1", "-f", "chat"}} {
		state := t.TempDir()
		first := startRun(t, state, "chat", "--", "sh", "-c", `i=0; while [ $i -lt 40000 ]; do echo "$AGENT_BOX_RUN_ID $i"; i=$((i+1)); done; exec sleep 300`)
		t.Cleanup(func() { agentBox(t, state, "kill", "-s", "KILL", "chat") })
		// Through a transport, and with MBs to read, the follow is behind
		// the writer: its next window is asked for after the restart.
		cmd := exec.Command(binary, append([]string{"--exec", binary + " --state-dir " + state}, args...)...)
		var out, errb lockedBuffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		require.NoError(t, cmd.Start())
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		abtest.WaitFor(t, "logs -f to print", 10*time.Second, func() bool { return strings.Count(out.String(), "\n") >= 1 })
		_, errOut, code := agentBox(t, state, "restart", "chat")
		require.Equal(t, 0, code, errOut)
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("%q went on after the restart", args)
		}
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "%q: %s", args, errb.String())
		assert.Equal(t, 128+int(unix.SIGTERM), exit.ExitCode(), "%q: the old run's status; %s", args, errb.String())
		for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
			require.True(t, strings.HasPrefix(line, first+" "), "%q: a line of another run: %q", args, line)
		}
	}
}
