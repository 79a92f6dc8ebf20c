//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/cli"
)

// agentBoxArgs runs the binary with exactly args (no --state-dir added)
// and returns stdout, stderr and the exit status.
func agentBoxArgs(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return out.String(), errb.String(), exit.ExitCode()
	}
	require.NoError(t, err)
	return out.String(), errb.String(), 0
}

func TestHoistStateDir(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in, want []string
		err      bool
	}{
		{[]string{"ps"}, []string{"ps"}, false},
		{[]string{"--state-dir", "/s", "ps"}, []string{"--state-dir=/s", "ps"}, false},
		{[]string{"ps", "--state-dir", "/s", "-a"}, []string{"--state-dir=/s", "ps", "-a"}, false},
		{[]string{"ps", "-state-dir=/s"}, []string{"--state-dir=/s", "ps"}, false},
		{[]string{"start", "n", "--", "cmd", "--state-dir", "x"}, []string{"start", "n", "--", "cmd", "--state-dir", "x"}, false},
		{[]string{"start", "n", "--state-dir", "/s", "--", "cmd", "--state-dir=x"}, []string{"--state-dir=/s", "start", "n", "--", "cmd", "--state-dir=x"}, false},
		{[]string{"ps", "--state-dir"}, nil, true},
		{[]string{"start", "n", "--state-dir", "--", "cmd"}, nil, true},
		{[]string{"ps", "--state-dir", "-a"}, nil, true},
		{[]string{"ps", "--state-dir=-a"}, []string{"--state-dir=-a", "ps"}, false},
	} {
		got, err := hoistGlobals(c.in)
		if c.err {
			assert.Error(t, err, "%q", c.in)
			continue
		}
		require.NoError(t, err, "%q", c.in)
		assert.Equal(t, c.want, got, "%q", c.in)
	}
}

// TestStateDirAfterTheCommand: "agent-box ps --state-dir D" works as a
// newcomer types it, and a --state-dir after "--" belongs to the run.
func TestStateDirAfterTheCommand(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	_, errOut, code := agentBoxArgs(t, "start", "n", "--state-dir", state, "--", "echo", "--state-dir", "x")
	require.Equal(t, 0, code, errOut)
	_, errOut, code = agentBoxArgs(t, "wait", "n", "--state-dir="+state)
	require.Equal(t, 0, code, errOut)
	out, errOut, code := agentBoxArgs(t, "logs", "--state-dir", state, "n")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "--state-dir x\n", out)
	out, _, code = agentBoxArgs(t, "ps", "-a", "--state-dir", state)
	require.Equal(t, 0, code)
	assert.Contains(t, out, "exited(0)")
}

// TestHelp: help is an answer (stdout, status 0), for the whole CLI and
// for one command; an unknown command names the ones there are.
func TestHelp(t *testing.T) {
	t.Parallel()
	out, _, code := agentBoxArgs(t, "help")
	assert.Equal(t, 0, code)
	for _, c := range []string{"agent-box ps", "agent-box logs", "agent-box start", "agent-box kill", "agent-box wait", "agent-box version", "agent-box help"} {
		assert.Contains(t, out, c)
	}
	out, errOut, code := agentBoxArgs(t, "help", "kill")
	assert.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "usage: agent-box kill")
	assert.Contains(t, out, "-grace")
	_, errOut, code = agentBoxArgs(t, "help", "psx")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, `unknown command "psx"`)
	assert.Contains(t, errOut, strings.Join(cli.Commands, ", "))
}

func TestVersionJSON(t *testing.T) {
	t.Parallel()
	plain, _, code := agentBoxArgs(t, "version")
	require.Equal(t, 0, code)
	out, errOut, code := agentBoxArgs(t, "version", "--json")
	require.Equal(t, 0, code, errOut)
	var v struct{ Version, Go string }
	require.NoError(t, json.Unmarshal([]byte(out), &v), out)
	assert.Equal(t, "agent-box "+v.Version+"\n", plain)
	assert.Equal(t, runtime.Version(), v.Go)
	_, _, code = agentBoxArgs(t, "version", "--yaml")
	assert.Equal(t, 2, code)
}

// TestCLIMessagesNameCLICommands: a person at the CLI is pointed to CLI
// commands, not to MCP tools they cannot call from there.
func TestCLIMessagesNameCLICommands(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	_, errOut, code := agentBoxArgs(t, "--state-dir", state, "logs", "nope")
	assert.Equal(t, 125, code)
	assert.Contains(t, errOut, `no run named "nope" (agent-box ps shows the runs there are)`)
	_, errOut, code = agentBoxArgs(t, "--state-dir", state, "start", "s", "--", "sleep", "30")
	require.Equal(t, 0, code, errOut)
	_, errOut, code = agentBoxArgs(t, "--state-dir", state, "start", "s", "--", "sleep", "30")
	assert.NotEqual(t, 0, code)
	assert.Contains(t, errOut, "kill it first (agent-box kill)")
	_, errOut, code = agentBoxArgs(t, "--state-dir", state, "logs", "--run-id", "20200101T000000.000000000Z-000000", "s")
	assert.Equal(t, 125, code)
	assert.Contains(t, errOut, "agent-box ps -a shows them")
	assert.NotContains(t, errOut, "process_")
	_, errOut, code = agentBoxArgs(t, "--state-dir", state, "kill", "-s", "KILL", "s")
	assert.Equal(t, 0, code, errOut)
	agentBoxArgs(t, "--state-dir", state, "wait", "s") // before the state dir is removed
}

// TestPsJSONKeepsCommandsReadable: ps --json is for people and scripts,
// not HTML: "<", ">" and "&" are not escaped to \u003c.
func TestPsJSONKeepsCommandsReadable(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	_, errOut, code := agentBoxArgs(t, "--state-dir", state, "start", "h", "--", "sh", "-c", "true && echo '<a>' >/dev/null")
	require.Equal(t, 0, code, errOut)
	agentBoxArgs(t, "--state-dir", state, "wait", "h")
	out, errOut, code := agentBoxArgs(t, "--state-dir", state, "ps", "--json")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, `"true && echo '<a>' >/dev/null"`)
	assert.False(t, strings.Contains(out, `\u003c`) || strings.Contains(out, `\u0026`), out)
}

// TestDoctor runs doctor on this machine: every check answers, --json
// says what the text says, and the exit status is 1 exactly when a check
// fails (here: a state dir that cannot be written).
func TestDoctor(t *testing.T) {
	t.Parallel()
	type report struct {
		OK     bool
		Checks []struct{ Name, Level, Detail, Fix string }
	}
	doctorJSON := func(state string) (report, int) {
		out, errOut, code := agentBoxArgs(t, "doctor", "--json", "--state-dir", state)
		var r report
		require.NoError(t, json.Unmarshal([]byte(out), &r), "%s\n%s", out, errOut)
		return r, code
	}
	r, code := doctorJSON(t.TempDir())
	var names []string
	for _, c := range r.Checks {
		names = append(names, c.Name)
		assert.Contains(t, []string{"ok", "warn", "fail"}, c.Level, "%+v", c)
		assert.NotEmpty(t, c.Detail, "%+v", c)
		if c.Level != "ok" {
			assert.NotEmpty(t, c.Fix, "%+v", c)
		}
	}
	assert.Equal(t, []string{"binaries", "state dir", "disk space", "runs outlive the session", "systemd-run", "resource limits", "ssh keep-alive"}, names)
	assert.Equal(t, r.OK, code == 0, "exit %d", code)

	bad, code := doctorJSON("/proc/agent-box-doctor-test")
	assert.False(t, bad.OK)
	assert.Equal(t, 1, code)
	assert.Equal(t, "fail", bad.Checks[1].Level, "%+v", bad.Checks[1])
	assert.Contains(t, bad.Checks[1].Detail, "not writable")

	out, _, code := agentBoxArgs(t, "doctor", "--state-dir", "/proc/agent-box-doctor-test")
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "fail  state dir: /proc/agent-box-doctor-test is not writable")
	assert.Contains(t, out, "      fix: ")
}
