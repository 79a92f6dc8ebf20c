//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
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
	t.Parallel()
	state := t.TempDir()
	s := connect(t, state)
	// The run goes on once the gate file exists: ps must see it running
	// however long a loaded machine takes to get there.
	gate := filepath.Join(t.TempDir(), "gate")
	s.OK("process_start", map[string]any{"name": "mcp-run", "capture_mode": "framed",
		"command": `echo to-out; echo to-err >&2; while [ ! -e '` + gate + `' ]; do sleep 0.05; done; echo bye; exit 5`})

	out, _, code := agentBox(t, state, "ps")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "mcp-run")
	assert.Contains(t, out, "running")
	require.NoError(t, os.WriteFile(gate, nil, 0o600))

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
	t.Parallel()
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
	t.Parallel()
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

// agentBoxCombined runs the CLI with its stdout and stderr on one pipe, as
// a terminal shows them: in the order they were written.
func agentBoxCombined(t *testing.T, state string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"--state-dir", state}, args...)...)
	var both bytes.Buffer
	cmd.Stdout, cmd.Stderr = &both, &both
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return both.String(), exit.ExitCode()
	}
	require.NoError(t, err)
	return both.String(), 0
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

// Without --stream, logs of a framed run prints its stdout on stdout and
// its stderr on stderr, interleaved as the frames were written, byte for
// byte.
func TestCLILogsFramedInterleaved(t *testing.T) {
	t.Parallel()
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
	assert.Equal(t, "out1\nout2\n", out)
	assert.Equal(t, "err1\n", errOut)
	out, code = agentBoxCombined(t, state, "logs", "fr")
	assert.Equal(t, 0, code, out)
	assert.Equal(t, string(want), out)
	out, code = agentBoxCombined(t, state, "logs", "-f", "fr")
	assert.Equal(t, 0, code, out)
	assert.Equal(t, string(want), out)

	// Each write logged before the next: the order is the order of the
	// writes.
	_, errOut, code = agentBox(t, state, "start", "ordered", "--framed", "--", "sh", "-c",
		abtest.InOrder(state, "echo out1", "echo err1 >&2", "echo out2"))
	require.Equal(t, 0, code, errOut)
	out, code = agentBoxCombined(t, state, "logs", "-f", "ordered")
	assert.Equal(t, 0, code, out)
	assert.Equal(t, "out1\nerr1\nout2\n", out)
}

// logs -f of a framed run prints the interleaved output as it comes, exact
// bytes (not UTF-8 text) across many windows, and exits with the status.
func TestCLILogsFramedFollowExact(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	// Bytes that are not UTF-8, a character split across the streams, and
	// more than one window (logread.MaxWindow) of random bytes.
	script := abtest.InOrder(state, `printf 'a\377\n'`, `printf '\342\202' >&2`, `printf '\254\n'`,
		`head -c 2500000 /dev/urandom; sleep 0.3; head -c 100000 /dev/urandom >&2; echo end; exit 3`)
	_, errOut, code := agentBox(t, state, "start", "bin", "--framed", "--", "sh", "-c", script)
	require.Equal(t, 0, code, errOut)
	out, code := agentBoxCombined(t, state, "logs", "-f", "bin")
	assert.Equal(t, 3, code)
	want := framedOutput(t, logPath(t, state, "bin"))
	require.Equal(t, 3+2+2+2500000+100000+4, len(want))
	assert.True(t, strings.HasPrefix(string(want), "a\377\n\342\202\254\n"), "%q", want[:8])
	abtest.SameBytes(t, want, []byte(out), "logs -f")

	out, code = agentBoxCombined(t, state, "logs", "bin")
	assert.Equal(t, 0, code)
	abtest.SameBytes(t, want, []byte(out), "logs")
}

// ps shows control characters of a record's fields escaped, never raw.
func TestCLIPSEscapesControlCharacters(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
		{[]string{"logs", "--stream", "both", "a"}, `--stream must be stdout or stderr, not "both"`},
		{[]string{"start"}, "NAME"},
		{[]string{"start", "a"}, "--"},
		{[]string{"start", "a", "--"}, "command"},
		{[]string{"start", "a", "b", "--", "true"}, "--"},
		{[]string{"start", "--timeout", "x", "a", "--", "true"}, "timeout"},
		{[]string{"start", "--timeout", "604801", "a", "--", "true"}, "--timeout 604801 is out of range 0..604800"},
		{[]string{"kill"}, "NAME"},
		{[]string{"kill", "a", "b"}, "one NAME"},
		{[]string{"kill", "--grace", "600001", "a"}, "--grace 600001 is out of range 0..600000"},
		{[]string{"kill", "--grace", "-1", "a"}, "--grace -1 is out of range"},
		{[]string{"kill", "--grace", "9223372036854775807", "a"}, "--grace is out of range"},
		{[]string{"wait"}, "NAME"},
		{[]string{"stop", "-t", "601", "a"}, "-t 601"},
		{[]string{"logs", "-n", "-5", "a"}, "-n -5"},
		{[]string{"--box", "x"}, "go with a command"},
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

// startRun runs "agent-box start ARGS" and returns the run id it printed.
func startRun(t *testing.T, state string, args ...string) string {
	t.Helper()
	out, errOut, code := agentBox(t, state, append([]string{"start"}, args...)...)
	require.Equal(t, 0, code, "start %q: %s", args, errOut)
	m := regexp.MustCompile(`run_id=(\S+)`).FindStringSubmatch(out)
	require.NotNil(t, m, "start printed no run_id: %q", out)
	return m[1]
}

// psJSON returns the runs "agent-box ps --json ARGS" lists.
func psJSON(t *testing.T, state string, args ...string) []map[string]any {
	t.Helper()
	out, errOut, code := agentBox(t, state, append([]string{"ps", "--json"}, args...)...)
	require.Equal(t, 0, code, errOut)
	var list struct {
		Runs []map[string]any `json:"runs"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &list), out)
	return list.Runs
}

// onlyRun is the one run of name that ps --json lists.
func onlyRun(t *testing.T, state, name string) map[string]any {
	t.Helper()
	list := psJSON(t, state, name)
	require.Len(t, list, 1, "%v", list)
	return list[0]
}

type cliResult struct {
	out, errOut string
	code        int
}

// waitInBackground runs "agent-box wait name" and delivers its result.
func waitInBackground(t *testing.T, state, name string) <-chan cliResult {
	done := make(chan cliResult, 1)
	go func() {
		out, errOut, code := agentBox(t, state, "wait", name)
		done <- cliResult{out, errOut, code}
	}()
	return done
}

func receive(t *testing.T, done <-chan cliResult, what string) cliResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not return", what)
	}
	return cliResult{}
}

// The CLI's kill and wait control runs that an MCP session started: wait
// blocks until the run ends and exits with its status, for a signal
// (128+N) and for an exit code alike.
func TestCLIKillAndWaitOnRunsStartedOverMCP(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	s := connect(t, state)
	s.OK("process_start", map[string]any{"name": "mcp-sleep", "argv": []any{"sleep", "300"}})
	t.Cleanup(func() { s.Call("process_kill", map[string]any{"name": "mcp-sleep", "signal": "KILL"}) })

	done := waitInBackground(t, state, "mcp-sleep")
	select {
	case r := <-done:
		t.Fatalf("agent-box wait returned %d before the run ended: %s%s", r.code, r.out, r.errOut)
	default:
	}
	out, errOut, code := agentBox(t, state, "kill", "-s", "USR1", "mcp-sleep")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "SIGUSR1")
	r := receive(t, done, "agent-box wait after the kill")
	assert.Equal(t, 128+int(unix.SIGUSR1), r.code, r.errOut)
	assert.Contains(t, r.out, "exited(SIGUSR1)")
	run := abtest.RunOf(t, s.OK("process_list", nil), "mcp-sleep")
	assert.Equal(t, "SIGUSR1", run["signal"], "the MCP side sees the CLI's kill")

	s.OK("process_start", map[string]any{"name": "mcp-exit", "command": "echo hi; exit 4"})
	r = receive(t, waitInBackground(t, state, "mcp-exit"), "agent-box wait")
	assert.Equal(t, 4, r.code, r.errOut)
	assert.Contains(t, r.out, "mcp-exit ")
	assert.Contains(t, r.out, "exited(4)")

	// Killing a run that already exited signals nothing and is no error.
	out, errOut, code = agentBox(t, state, "kill", "mcp-exit")
	assert.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "already exited")
}

// process_wait and process_kill control runs that "agent-box start"
// started.
func TestMCPWaitAndKillOnRunsStartedByCLI(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	sleepID := startRun(t, state, "cli-sleep", "--", "sleep", "300")
	exitID := startRun(t, state, "cli-exit", "--", "sh", "-c", "echo from-cli; exit 7")
	s := connect(t, state)
	t.Cleanup(func() { s.Call("process_kill", map[string]any{"name": "cli-sleep", "signal": "KILL"}) })

	w := s.OK("process_wait", map[string]any{"name": "cli-exit", "timeout_ms": 30000})
	assert.Equal(t, false, w.Data["wait_timed_out"], w.Text)
	run := w.Data["run"].(map[string]any)
	assert.Equal(t, exitID, run["run_id"])
	assert.Equal(t, "exited", run["state"], w.Text)
	assert.Equal(t, int64(7), abtest.Num(run["exit_code"]), w.Text)
	assert.Contains(t, w.Data["output_tail"], "from-cli")

	// Still running: the wait times out and says so.
	w = s.OK("process_wait", map[string]any{"name": "cli-sleep", "timeout_ms": 0})
	assert.Equal(t, true, w.Data["wait_timed_out"], w.Text)
	assert.Equal(t, "running", w.Data["run"].(map[string]any)["state"], w.Text)

	k := s.OK("process_kill", map[string]any{"name": "cli-sleep", "signal": "INT"})
	assert.Equal(t, "SIGINT", k.Data["signal"], k.Text)
	assert.NotEmpty(t, k.Data["signalled_groups"], k.Text)
	w = s.OK("process_wait", map[string]any{"name": "cli-sleep", "timeout_ms": 30000})
	assert.Equal(t, false, w.Data["wait_timed_out"], w.Text)
	run = w.Data["run"].(map[string]any)
	assert.Equal(t, sleepID, run["run_id"])
	assert.Equal(t, "SIGINT", run["signal"], w.Text)

	// The CLI sees the MCP kill too.
	_, errOut, code := agentBox(t, state, "wait", "cli-sleep")
	assert.Equal(t, 128+int(unix.SIGINT), code, errOut)
}

// ps -a lists the older runs of a name, and logs --run-id reads one of
// them; without them both show the newest run only.
func TestCLIOlderRuns(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	first := startRun(t, state, "again", "--", "echo", "first")
	_, errOut, code := agentBox(t, state, "wait", "again")
	require.Equal(t, 0, code, errOut)
	second := startRun(t, state, "again", "--", "echo", "second")
	_, errOut, code = agentBox(t, state, "wait", "again")
	require.Equal(t, 0, code, errOut)
	require.NotEqual(t, first, second)

	out, errOut, code := agentBox(t, state, "ps")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, second)
	assert.NotContains(t, out, first, "ps without -a shows only the newest run")
	out, errOut, code = agentBox(t, state, "ps", "-a")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, second)
	assert.Contains(t, out, first, "ps -a shows the older run")
	assert.Len(t, strings.Split(strings.TrimSuffix(out, "\n"), "\n"), 3, "a header and two rows: %q", out)

	var ids []any
	for _, r := range psJSON(t, state, "-a", "again") {
		ids = append(ids, r["run_id"])
	}
	assert.ElementsMatch(t, []any{first, second}, ids)
	assert.Len(t, psJSON(t, state, "again"), 1)

	out, errOut, code = agentBox(t, state, "logs", "again")
	assert.Equal(t, 0, code, errOut)
	assert.Equal(t, "second\n", out)
	out, errOut, code = agentBox(t, state, "logs", "--run-id", first, "again")
	assert.Equal(t, 0, code, errOut)
	assert.Equal(t, "first\n", out)
	out, errOut, code = agentBox(t, state, "logs", "-f", "--run-id", first, "again")
	assert.Equal(t, 0, code, errOut)
	assert.Equal(t, "first\n", out)

	_, errOut, code = agentBox(t, state, "logs", "--run-id", "20000101T000000.000000000Z-000000", "again")
	assert.Equal(t, cli.ExitError, code, errOut)
}

// start --cwd runs the child in that directory.
func TestCLIStartCwd(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	startRun(t, state, "--cwd", dir, "where", "--", "pwd", "-P")
	_, errOut, code := agentBox(t, state, "wait", "where")
	require.Equal(t, 0, code, errOut)
	out, errOut, code := agentBox(t, state, "logs", "where")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, dir+"\n", out)
	assert.Equal(t, dir, onlyRun(t, state, "where")["cwd"])

	// The flag may also follow NAME; a directory that is not there is a
	// usage error and starts nothing.
	startRun(t, state, "where2", "--cwd", dir, "--", "pwd", "-P")
	out, errOut, code = agentBox(t, state, "logs", "-f", "where2")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, dir+"\n", out)
	_, errOut, code = agentBox(t, state, "start", "--cwd", filepath.Join(dir, "nope"), "where3", "--", "pwd")
	assert.Equal(t, cli.ExitUsage, code, errOut)
	assert.Contains(t, errOut, "cwd")
	for _, r := range psJSON(t, state, "-a") {
		assert.NotEqual(t, "where3", r["name"], "a refused start left a run")
	}
}

// start --timeout S kills the child at the deadline (SIGTERM, which a
// plain sleep does not ignore), and the run says it timed out; a run that
// ends in time is not marked.
func TestCLIStartTimeout(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	startRun(t, state, "--timeout", "1", "slow", "--", "sleep", "300")
	t.Cleanup(func() { agentBox(t, state, "kill", "-s", "KILL", "slow") })
	// Bounded: without the deadline the sleep would outlast the test.
	r := receive(t, waitInBackground(t, state, "slow"), "agent-box wait of a run with --timeout 1")
	assert.Equal(t, 128+int(unix.SIGTERM), r.code, r.errOut)
	assert.Contains(t, r.out, "exited(SIGTERM, timed out)")
	run := onlyRun(t, state, "slow")
	assert.Equal(t, "SIGTERM", run["signal"])
	assert.Equal(t, true, run["timed_out"], "%v", run)
	assert.Contains(t, run["reason"], "timed out after 1s")

	startRun(t, state, "--timeout", "600", "quick", "--", "true")
	_, errOut, code := agentBox(t, state, "wait", "quick")
	assert.Equal(t, 0, code, errOut)
	run = onlyRun(t, state, "quick")
	assert.Nil(t, run["timed_out"], "%v", run)
	assert.Equal(t, float64(0), run["exit_code"])
}

// kill --grace MS sends SIGKILL to a run still alive after the grace; a
// child that ignores TERM survives a kill without it.
func TestCLIKillGraceEscalates(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	startRun(t, state, "stubborn", "--", "sh", "-c", `trap "" TERM; echo ready; exec sleep 300`)
	t.Cleanup(func() { agentBox(t, state, "kill", "-s", "KILL", "stubborn") })
	log := logPath(t, state, "stubborn")
	abtest.WaitFor(t, "the child to ignore TERM", 10*time.Second, func() bool {
		b, _ := os.ReadFile(log)
		return string(b) == "ready\n"
	})

	// kill waits for the exit to be recorded before it answers, so a run
	// still running afterwards did not die of the TERM.
	out, errOut, code := agentBox(t, state, "kill", "stubborn")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "SIGTERM")
	assert.NotContains(t, out, "SIGKILL")
	assert.Equal(t, "running", onlyRun(t, state, "stubborn")["state"], "the child ignores TERM")

	done := waitInBackground(t, state, "stubborn")
	out, errOut, code = agentBox(t, state, "kill", "--grace", "200", "stubborn")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "still alive after 200ms, sent SIGKILL")
	r := receive(t, done, "agent-box wait after kill --grace")
	assert.Equal(t, 128+int(unix.SIGKILL), r.code, r.errOut)
	assert.Equal(t, "SIGKILL", onlyRun(t, state, "stubborn")["signal"])
}

// wait exits 125 for a run whose status is unknown: it can never get one,
// and 125 is no status a run could have exited with.
func TestCLIWaitUnknownStatus(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	self, err := proc.ReadStat(os.Getpid())
	require.NoError(t, err)
	plant(t, state, func(r *runrecord.Record) {
		r.Name = "rebooted"
		r.BootID = "00000000-0000-0000-0000-000000000000"
	})
	plant(t, state, func(r *runrecord.Record) {
		// A pid reused by this test process: the start time differs.
		r.Name = "lost"
		r.PID, r.PIDStartTime = self.PID, self.StartTime+12345
		r.SupervisorPID, r.SupervisorStartTime = self.PID, self.StartTime+12345
	})
	for name, reason := range map[string]string{"rebooted": "another boot", "lost": "no exit was recorded"} {
		run := onlyRun(t, state, name)
		require.Equal(t, "unknown", run["state"], "%s: %v", name, run)
		r := receive(t, waitInBackground(t, state, name), "agent-box wait "+name)
		assert.Equal(t, cli.ExitError, r.code, "%s: %s%s", name, r.out, r.errOut)
		assert.Contains(t, r.out, "unknown", name)
		assert.Contains(t, r.out, reason, name)
	}
}

// --state-dir wins over $AGENT_BOX_STATE_DIR, which wins over
// $XDG_STATE_HOME/agent-box, which wins over ~/.local/state/agent-box:
// the directory agent-box creates says which it chose.
func TestStateDirPrecedence(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		flag, env, xdg bool
		want           string
	}{
		{"flag", true, true, true, "flag"},
		{"env", false, true, true, "env"},
		{"xdg", false, false, true, "xdg/agent-box"},
		{"home", false, false, false, "home/.local/state/agent-box"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base := t.TempDir()
			args := []string{"ps"}
			if tc.flag {
				args = []string{"--state-dir", filepath.Join(base, "flag"), "ps"}
			}
			env := []string{"HOME=" + filepath.Join(base, "home"), "AGENT_BOX_STATE_DIR=", "XDG_STATE_HOME="}
			if tc.env {
				env = append(env, "AGENT_BOX_STATE_DIR="+filepath.Join(base, "env"))
			}
			if tc.xdg {
				env = append(env, "XDG_STATE_HOME="+filepath.Join(base, "xdg"))
			}
			cmd := exec.Command(binary, args...)
			cmd.Env = append(os.Environ(), env...) // later entries win
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			var made []string
			for _, d := range []string{"flag", "env", "xdg/agent-box", "home/.local/state/agent-box"} {
				if _, err := os.Stat(filepath.Join(base, d, "runs")); err == nil {
					made = append(made, d)
				}
			}
			assert.Equal(t, []string{tc.want}, made)
		})
	}
}
