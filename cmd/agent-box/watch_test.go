//go:build linux

package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
)

// watchRun is agent-box watch started with args; its outputs are read
// once it has ended (result).
type watchRun struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan struct{}
	code           int
}

// startWatch starts agent-box watch with args, looking often: the box's
// waits end at runs' ends anyway, and the knob bounds how soon a new
// watch's ownership is seen.
func startWatch(t *testing.T, args ...string) *watchRun {
	t.Helper()
	w := &watchRun{cmd: exec.Command(binary, append([]string{"watch"}, args...)...), done: make(chan struct{})}
	w.cmd.Env = append(os.Environ(), "AGENT_BOX_WATCH_POLL_MS=100")
	w.cmd.Stdout, w.cmd.Stderr = &w.stdout, &w.stderr
	require.NoError(t, w.cmd.Start())
	go func() {
		err := w.cmd.Wait()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			w.code = exit.ExitCode()
		} else if err != nil {
			w.code = -1
		}
		close(w.done)
	}()
	t.Cleanup(func() {
		_ = w.cmd.Process.Kill()
		<-w.done
	})
	return w
}

// result waits for the watch to end: its status, stdout and stderr.
func (w *watchRun) result(t *testing.T) (int, string, string) {
	t.Helper()
	select {
	case <-w.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("agent-box watch did not end; stderr so far: %s", w.stderr.String())
	}
	return w.code, w.stdout.String(), w.stderr.String()
}

func (w *watchRun) ended() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// watchOnce runs agent-box watch to its end.
func watchOnce(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return startWatch(t, args...).result(t)
}

// gatedRun starts a run that ends (printing its last words, exit 3) once
// the gate file it returns exists.
func gatedRun(t *testing.T, state, name string) string {
	t.Helper()
	gate := filepath.Join(t.TempDir(), "gate")
	_, stderr, code := agentBox(t, state, "start", name, "--", "sh", "-c",
		`while [ ! -e '`+gate+`' ]; do sleep 0.05; done; echo working; printf 'last\033[31m words\n'; exit 3`)
	require.Equal(t, 0, code, stderr)
	t.Cleanup(func() {
		// No run outlives its test, nor writes its dir as it is removed.
		_ = os.WriteFile(gate, nil, 0o600)
		agentBox(t, state, "wait", name)
	})
	return gate
}

func openGate(t *testing.T, state, name, gate string) {
	t.Helper()
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	_, _, code := agentBox(t, state, "wait", name)
	require.Equal(t, 3, code)
}

func boxExec(state string) string { return binary + " --state-dir " + state }

// A first watch reports nothing older than itself; an end that happens
// while no watch runs is reported at once by the next one (exit 2, one
// line on stderr), and by no watch after it.
func TestWatchReportsAnEndOnce(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	cursor := filepath.Join(t.TempDir(), "watch", "cursor.json")
	box := boxExec(state)
	gate := gatedRun(t, state, "job")

	code, stdout, stderr := watchOnce(t, "--exec", box, "--cursor-file", cursor, "--no-wait")
	assert.Equal(t, 0, code, stderr)
	assert.Empty(t, stdout+stderr)

	openGate(t, state, "job", gate)
	code, stdout, stderr = watchOnce(t, "--exec", box, "--cursor-file", cursor, "--no-wait")
	assert.Equal(t, 2, code)
	assert.Empty(t, stdout)
	assert.Regexp(t, `^agent-box: run job \(\S+\) on `+regexp.QuoteMeta(box)+` ended: exit code 3 after [0-9.]+m?s; last line: last words\n$`, stderr)

	code, stdout, stderr = watchOnce(t, "--exec", box, "--cursor-file", cursor, "--no-wait")
	assert.Equal(t, 0, code, stderr)
	assert.Empty(t, stdout+stderr, "the same end is reported once")

	fi, err := os.Stat(cursor)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

// A watch that waits wakes when a run ends.
func TestWatchWakesWhenARunEnds(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	cursor := filepath.Join(t.TempDir(), "cursor.json")
	gate := gatedRun(t, state, "job")

	w := startWatch(t, "--exec", boxExec(state), "--cursor-file", cursor)
	// Saved at once: an end after it is the watch's to report.
	abtest.WaitFor(t, "the watch's first cursor", 20*time.Second, func() bool {
		_, err := os.Stat(cursor)
		return err == nil
	})
	assert.False(t, w.ended())
	openGate(t, state, "job", gate)
	code, stdout, stderr := w.result(t)
	assert.Equal(t, 2, code, stderr)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "run job (")
	assert.Contains(t, stderr, "ended: exit code 3 after")
}

// A box that cannot be reached is said on stderr, once, and the other
// boxes are watched meanwhile. It is no failure of the watch.
func TestWatchUnreachableBox(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	cursor := filepath.Join(t.TempDir(), "cursor.json")

	code, stdout, stderr := watchOnce(t, "--exec", "false", "--cursor-file", cursor, "--no-wait")
	assert.Equal(t, 0, code)
	assert.Empty(t, stdout)
	assert.Equal(t, 1, strings.Count(stderr, "\n"), stderr)
	assert.Contains(t, stderr, "agent-box watch: false: ")

	// A transport that notes each try, and fails.
	tries := filepath.Join(t.TempDir(), "tries")
	down := "sh -c 'echo try >> " + tries + "; exit 1'"
	gate := gatedRun(t, state, "job")
	w := startWatch(t, "--exec", down, "--exec", boxExec(state), "--cursor-file", cursor)
	abtest.WaitFor(t, "the reachable box's first cursor", 20*time.Second, func() bool {
		b, _ := os.ReadFile(cursor)
		return strings.Contains(string(b), state)
	})
	// Tried again and again (by the session's dials and the watch's looks,
	// each a dial), and said once.
	abtest.WaitFor(t, "the box down to be tried again", 20*time.Second, func() bool {
		b, _ := os.ReadFile(tries)
		return strings.Count(string(b), "try") >= 6
	})
	openGate(t, state, "job", gate)
	code, _, stderr = w.result(t)
	assert.Equal(t, 2, code, stderr)
	assert.Equal(t, 1, strings.Count(stderr, "agent-box watch: "+down+": "), stderr)
	assert.Contains(t, stderr, "run job (")
}

// A new watch on the same cursor file takes it over: the older one ends
// at once, quietly, with 0. A signal ends a watch quietly too.
func TestWatchNewestWins(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	cursor := filepath.Join(t.TempDir(), "cursor.json")
	gatedRun(t, state, "job")

	a := startWatch(t, "--exec", boxExec(state), "--cursor-file", cursor)
	abtest.WaitFor(t, "watch A to own the cursor file", 20*time.Second, func() bool {
		_, err := os.Stat(cursor + ".owner")
		return err == nil
	})
	owner, err := os.ReadFile(cursor + ".owner")
	require.NoError(t, err)
	b := startWatch(t, "--exec", boxExec(state), "--cursor-file", cursor)
	code, stdout, stderr := a.result(t)
	assert.Equal(t, 0, code)
	assert.Empty(t, stdout+stderr)
	now, err := os.ReadFile(cursor + ".owner")
	require.NoError(t, err)
	assert.NotEqual(t, string(owner), string(now))

	assert.False(t, b.ended())
	require.NoError(t, b.cmd.Process.Signal(syscall.SIGTERM))
	code, stdout, stderr = b.result(t)
	assert.Equal(t, 0, code)
	assert.Empty(t, stdout+stderr)
}

// --stdout puts the report on stdout and exits 0 (a hook whose stdout is
// added to the turn); --max-wait gives up quietly.
func TestWatchStdoutAndMaxWait(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	cursor := filepath.Join(t.TempDir(), "cursor.json")
	box := boxExec(state)
	gate := gatedRun(t, state, "job")

	// The first look saves the cursor; a watch bounded by --max-wait may
	// end before its own first look is done (a loaded machine).
	code, stdout, stderr := watchOnce(t, "--exec", box, "--cursor-file", cursor, "--no-wait")
	require.Equal(t, 0, code, stderr)
	code, stdout, stderr = watchOnce(t, "--exec", box, "--cursor-file", cursor, "--max-wait", "300ms")
	assert.Equal(t, 0, code, stderr)
	assert.Empty(t, stdout+stderr)

	openGate(t, state, "job", gate)
	code, stdout, stderr = watchOnce(t, "--exec", box, "--cursor-file", cursor, "--stdout", "--no-wait")
	assert.Equal(t, 0, code)
	assert.Empty(t, stderr)
	assert.Contains(t, stdout, "run job (")
	assert.Contains(t, stdout, "exit code 3")
}

// This machine is the box when none is given (with --state-dir, its
// state directory's).
func TestWatchThisMachine(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	cursor := filepath.Join(t.TempDir(), "cursor.json")
	gate := gatedRun(t, state, "job")
	code, _, stderr := watchOnce(t, "--state-dir", state, "--cursor-file", cursor, "--no-wait")
	require.Equal(t, 0, code, stderr)
	openGate(t, state, "job", gate)
	code, _, stderr = watchOnce(t, "--state-dir", state, "--cursor-file", cursor, "--no-wait")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "run job (")
	assert.Contains(t, stderr, "on this machine (state dir "+state+") ended: exit code 3")
}

// A bad command line is agent-box's own failure, 125: a 2 would wake the
// model for nothing.
func TestWatchBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--bogus"}, {"extra"}, {"--max-wait", "soon"}, {"--state-dir", "/tmp", "--exec", "false"}} {
		code, stdout, stderr := watchOnce(t, args...)
		assert.Equal(t, 125, code, args)
		assert.Empty(t, stdout)
		assert.Contains(t, stderr, "agent-box watch: ")
	}
	// Before the command too: a hook's command line is typed by hand.
	for _, args := range [][]string{{"--max-wait", "1m", "watch", "--box", "b"}, {"--box", "-x", "watch"}, {"--bogus", "watch"}} {
		cmd := exec.Command(binary, args...)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "%q: %s", args, out)
		assert.Equal(t, 125, exit.ExitCode(), "%q: %s", args, out)
		assert.NotContains(t, string(out), "usage", "%q: one line, for the model a hook shows it to", args)
	}
	code, stdout, _ := watchOnce(t, "--help")
	assert.Equal(t, 0, code)
	assert.Contains(t, stdout, "usage: agent-box watch")
}

// A report that cannot be written (the hook's pipe closed) is agent-box's
// own failure, 125, and leaves the cursor as it was: the next watch
// reports the end.
func TestWatchReportNotWritten(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	cursor := filepath.Join(t.TempDir(), "cursor.json")
	box := boxExec(state)
	gate := gatedRun(t, state, "job")
	code, _, stderr := watchOnce(t, "--exec", box, "--cursor-file", cursor, "--no-wait")
	require.Equal(t, 0, code, stderr)
	openGate(t, state, "job", gate)

	r, w, err := os.Pipe()
	require.NoError(t, err)
	require.NoError(t, r.Close())
	cmd := exec.Command(binary, "watch", "--exec", box, "--cursor-file", cursor, "--no-wait")
	cmd.Stderr = w
	err = cmd.Run()
	w.Close()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, 125, exit.ExitCode(), "not SIGPIPE's death, and not a report")

	code, _, stderr = watchOnce(t, "--exec", box, "--cursor-file", cursor, "--no-wait")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "run job ")
}
