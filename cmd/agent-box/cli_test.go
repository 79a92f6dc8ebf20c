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
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/cli"
	"github.com/agent-box/agent-box/internal/abtest"
	"github.com/agent-box/agent-box/logframe"
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
	assert.Equal(t, cli.ExitError, code, "not a status a run could have exited with")
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

// framedOutput decodes a framed log file into its interleaved output, the
// bytes of every frame in log order: what "agent-box logs" must print.
func framedOutput(t *testing.T, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []byte
	d := logframe.NewDemuxer(0)
	require.NoError(t, d.Feed(raw, func(f logframe.Frame) error {
		out = append(out, f.Payload...)
		return nil
	}))
	require.Zero(t, d.Pending(), "the log ends inside a frame")
	return out
}

// logPath returns the log of the newest run of name, from ps --json.
func logPath(t *testing.T, state, name string) string {
	t.Helper()
	out, errOut, code := agentBox(t, state, "ps", "--json", name)
	require.Equal(t, 0, code, errOut)
	var list struct {
		Runs []struct {
			LogPath string `json:"log_path"`
		} `json:"runs"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	require.Len(t, list.Runs, 1)
	return list.Runs[0].LogPath
}

// Without --stream, logs of a framed run prints stdout and stderr
// interleaved as the frames were written, byte for byte.
func TestCLILogsFramedInterleaved(t *testing.T) {
	state := t.TempDir()
	_, errOut, code := agentBox(t, state, "start", "fr", "--framed", "--", "sh", "-c", "echo out1; echo err1 >&2; echo out2")
	require.Equal(t, 0, code, errOut)
	_, errOut, code = agentBox(t, state, "wait", "fr")
	require.Equal(t, 0, code, errOut)

	want := framedOutput(t, logPath(t, state, "fr"))
	lines := strings.SplitAfter(string(want), "\n")
	assert.ElementsMatch(t, []string{"out1\n", "err1\n", "out2\n", ""}, lines, "the frames hold the three lines")
	out, errOut, code := agentBox(t, state, "logs", "fr")
	assert.Equal(t, 0, code, errOut)
	assert.Equal(t, string(want), out)
	out, errOut, code = agentBox(t, state, "logs", "-f", "fr")
	assert.Equal(t, 0, code, errOut)
	assert.Equal(t, string(want), out)

	// One stream per pause: the order is the order of the writes.
	_, errOut, code = agentBox(t, state, "start", "ordered", "--framed", "--", "sh", "-c",
		"echo out1; sleep 0.3; echo err1 >&2; sleep 0.3; echo out2")
	require.Equal(t, 0, code, errOut)
	out, errOut, code = agentBox(t, state, "logs", "-f", "ordered")
	assert.Equal(t, 0, code, errOut)
	assert.Equal(t, "out1\nerr1\nout2\n", out)
}

// logs -f of a framed run prints the interleaved output as it comes, exact
// bytes (not UTF-8 text) across many windows, and exits with the status.
func TestCLILogsFramedFollowExact(t *testing.T) {
	state := t.TempDir()
	// Bytes that are not UTF-8, a character split across the streams, and
	// more than one window (logread.MaxWindow) of random bytes.
	script := `printf 'a\377\n'; sleep 0.3; printf '\342\202' >&2; sleep 0.3; printf '\254\n'; ` +
		`head -c 2500000 /dev/urandom; sleep 0.3; head -c 100000 /dev/urandom >&2; echo end; exit 3`
	_, errOut, code := agentBox(t, state, "start", "bin", "--framed", "--", "sh", "-c", script)
	require.Equal(t, 0, code, errOut)
	out, errOut, code := agentBox(t, state, "logs", "-f", "bin")
	assert.Equal(t, 3, code, errOut)
	want := framedOutput(t, logPath(t, state, "bin"))
	require.Equal(t, 3+2+2+2500000+100000+4, len(want))
	assert.True(t, strings.HasPrefix(string(want), "a\377\n\342\202\254\n"), "%q", want[:8])
	abtest.SameBytes(t, want, []byte(out), "logs -f")

	out, errOut, code = agentBox(t, state, "logs", "bin")
	assert.Equal(t, 0, code, errOut)
	abtest.SameBytes(t, want, []byte(out), "logs")
}

// ps shows control characters of a record's fields escaped, never raw.
func TestCLIPSEscapesControlCharacters(t *testing.T) {
	state := t.TempDir()
	// (A record cannot hold invalid UTF-8: JSON decoding replaces it.)
	hostile := "true \x1b[1A\x1b[2K\x07\x7f\u009b2J\u202e|\r\n"
	_, errOut, code := agentBox(t, state, "start", "esc", "--", "sh", "-c", hostile)
	require.Equal(t, 0, code, errOut)
	out, errOut, code := agentBox(t, state, "ps")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, `sh -c true \x1b[1A\x1b[2K\x07\x7f\u009b2J\u202e|\r\n`)
	for i, r := range out {
		if r == utf8.RuneError {
			_, n := utf8.DecodeRuneInString(out[i:])
			assert.NotEqual(t, 1, n, "invalid UTF-8 at %d in %q", i, out)
		}
		if r < 0x20 && r != '\n' || r >= 0x7f && r <= 0x9f || r == '\u202e' {
			t.Errorf("ps printed control character %U: %q", r, out)
		}
	}
	assert.Len(t, strings.Split(strings.TrimSuffix(out, "\n"), "\n"), 2, "a header and one row: %q", out)

	// The cut at 60 characters stays, and never splits an escape or a
	// character.
	long := strings.Repeat("é", 40) + "\x1b" + strings.Repeat("x", 40)
	_, errOut, code = agentBox(t, state, "start", "long", "--", "echo", long)
	require.Equal(t, 0, code, errOut)
	out, errOut, code = agentBox(t, state, "ps", "long")
	require.Equal(t, 0, code, errOut)
	rows := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, rows, 2, out)
	cmd := rows[1][strings.Index(rows[1], "echo "):]
	assert.Equal(t, "echo "+strings.Repeat("é", 40)+`\x1b`+strings.Repeat("x", 8)+"...", cmd)
	assert.Equal(t, 60, utf8.RuneCountInString(cmd))
	assert.True(t, utf8.ValidString(out))
}

// Every usage error says, on one line of stderr, what was wrong.
func TestCLIUsageErrorsSayWhy(t *testing.T) {
	state := t.TempDir()
	require.NoError(t, os.Chmod(state, 0o700)) // no warning about its mode
	for _, tc := range []struct {
		args []string
		why  string
	}{
		{[]string{"ps", "a", "b"}, "at most one"},
		{[]string{"ps", "-x"}, "-x"},
		{[]string{"logs"}, "NAME"},
		{[]string{"logs", "a", "b"}, "one NAME"},
		{[]string{"logs", "--stream"}, "stream"},
		{[]string{"start"}, "NAME"},
		{[]string{"start", "a"}, "--"},
		{[]string{"start", "a", "--"}, "command"},
		{[]string{"start", "a", "b", "--", "true"}, "--"},
		{[]string{"start", "--timeout", "x", "a", "--", "true"}, "timeout"},
		{[]string{"kill"}, "NAME"},
		{[]string{"kill", "a", "b"}, "one NAME"},
		{[]string{"wait"}, "NAME"},
		{[]string{"wait", "a", "b"}, "one NAME"},
	} {
		_, errOut, code := agentBox(t, state, tc.args...)
		assert.Equal(t, 2, code, "%q: %s", tc.args, errOut)
		first, _, _ := strings.Cut(errOut, "\n")
		assert.True(t, strings.HasPrefix(first, "agent-box") || strings.Contains(first, "flag"), "%q: first line %q", tc.args, first)
		assert.False(t, strings.HasPrefix(first, "usage:"), "%q: no reason before the usage: %q", tc.args, errOut)
		assert.Contains(t, first, tc.why, "%q: %q", tc.args, errOut)
	}
}
