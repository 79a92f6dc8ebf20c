//go:build linux

package main

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/cli"
	"github.com/agent-box/agent-box/internal/abtest"
	"github.com/agent-box/agent-box/proc"
)

// boxArgs are the ways to reach the box of state: this machine's state
// dir, and the same box through a transport process (as docker exec or
// kubectl exec reach one).
func boxArgs(t *testing.T, state string) map[string][]string {
	// As agent-box would make it, so that no warning to tighten it comes
	// on the stderr a test reads.
	require.NoError(t, os.Chmod(state, 0o700))
	return map[string][]string{
		"local":  {"--state-dir", state},
		"remote": {"--exec", binary + " --state-dir " + state},
	}
}

// exitCode is the status of a finished command.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	require.NoError(t, err)
	return 0
}

// waitExit waits for cmd to end, at most d, and returns its status.
func waitExit(t *testing.T, cmd *exec.Cmd, d time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return exitCode(t, err)
	case <-time.After(d):
		cmd.Process.Kill()
		t.Fatalf("%s did not end within %s", cmd, d)
		return 0
	}
}

// run follows the program it starts as if it ran here: its stdout on
// stdout, its stderr on stderr, and its status as agent-box's (128+N for
// a signal), on this machine and through a transport alike.
func TestRunFollowsItsProgram(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	for via, box := range boxArgs(t, state) {
		t.Run(via, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(binary, append(box, "run", "both-"+via, "--", "sh", "-c",
				`printf 'out1\n'; printf 'err1\n' >&2; printf 'out2'; exit 3`)...)
			var out, errb lockedBuffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			assert.Equal(t, 3, exitCode(t, cmd.Run()), errb.String())
			assert.Equal(t, "out1\nout2", out.String())
			assert.Equal(t, "err1\n", errb.String())

			cmd = exec.Command(binary, append(box, "run", "killed-"+via, "--", "sh", "-c", `kill -KILL $$`)...)
			cmd.Stderr = &errb
			assert.Equal(t, 128+9, exitCode(t, cmd.Run()), errb.String())

			// -i: stdin goes to the run, and its end closes the run's.
			cmd = exec.Command(binary, append(box, "run", "-i", "cat-"+via, "--", "sh", "-c", `cat; exit 4`)...)
			cmd.Stdin = strings.NewReader("typed\x00\xff\n")
			out.b.Reset()
			cmd.Stdout = &out
			require.NoError(t, cmd.Start())
			assert.Equal(t, 4, waitExit(t, cmd, 30*time.Second))
			assert.Equal(t, "typed\x00\xff\n", out.String())
		})
	}
}

// Ctrl-C at agent-box run reaches the run, as with docker run, and the
// status is the run's answer to it.
func TestRunForwardsCtrlC(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	for via, box := range boxArgs(t, state) {
		t.Run(via, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(binary, append(box, "run", "trap-"+via, "--", "sh", "-c",
				`trap "echo got-int; exit 130" INT; echo ready; while :; do sleep 0.1; done`)...)
			var out lockedBuffer
			cmd.Stdout = &out
			require.NoError(t, cmd.Start())
			t.Cleanup(func() { cmd.Process.Kill() })
			abtest.WaitFor(t, "the run to be ready", 30*time.Second, func() bool { return strings.Contains(out.String(), "ready") })
			require.NoError(t, cmd.Process.Signal(os.Interrupt))
			assert.Equal(t, 130, waitExit(t, cmd, 30*time.Second))
			assert.Equal(t, "ready\ngot-int\n", out.String())
		})
	}
}

// attach to a run with stdin "pipe": what is typed comes back, the end of
// agent-box's stdin leaves the run's open, and the run's end ends attach
// with its status. A run without stdin is followed, and attach says that
// input does not reach it.
func TestAttachToAPipeRun(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	s := connect(t, state)
	s.OK("process_start", map[string]any{"name": "repl", "stdin": "pipe", "argv": []any{"sh", "-c", `echo history; cat; exit 7`}})
	s.OK("tail_log", map[string]any{"name": "repl", "wait_ms": 30000, "until": "history"})

	cmd := exec.Command(binary, "--state-dir", state, "attach", "repl")
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, errb := &lockedBuffer{}, &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, errb
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill() })
	_, err = in.Write([]byte("hello-attach\n"))
	require.NoError(t, err)
	abtest.WaitFor(t, "the typed line to come back", 30*time.Second, func() bool { return strings.Contains(out.String(), "hello-attach") })
	require.NoError(t, in.Close())
	// Still open: a write after the local end reaches cat, and attach
	// shows it.
	s.OK("process_write", map[string]any{"name": "repl", "data": "after-eof\n"})
	abtest.WaitFor(t, "output after the local stdin ended", 30*time.Second, func() bool { return strings.Contains(out.String(), "after-eof") })
	s.OK("process_write", map[string]any{"name": "repl", "close": true})
	assert.Equal(t, 7, waitExit(t, cmd, 30*time.Second), errb.String())
	assert.Equal(t, "hello-attach\nafter-eof\n", out.String(), "from the end it had when attach began: no history")

	gate := filepath.Join(t.TempDir(), "gate")
	_, errOut, code := agentBox(t, state, "start", "nostdin", "--", "sh", "-c", `echo earlier; echo before; while [ ! -e '`+gate+`' ]; do sleep 0.05; done; exit 5`)
	require.Equal(t, 0, code, errOut)
	s.OK("tail_log", map[string]any{"name": "nostdin", "wait_ms": 30000, "until": "before"})
	// -n 1: the last line first.
	cmd = exec.Command(binary, "--state-dir", state, "attach", "-n", "1", "nostdin")
	cmd.Stdin = strings.NewReader("ignored\n")
	out, errb = &lockedBuffer{}, &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, errb
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill() })
	abtest.WaitFor(t, "attach to say input is not forwarded", 30*time.Second, func() bool {
		return strings.Contains(errb.String(), "input is not forwarded")
	})
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	assert.Equal(t, 5, waitExit(t, cmd, 30*time.Second), errb.String())
	assert.Equal(t, "before\n", out.String())
}

// attach to a pty run from a terminal: the keys reach the program as they
// are typed (the local terminal is raw), the run gets the terminal's size
// and its changes, ctrl-p ctrl-q detaches and leaves the run going, a
// ctrl-p that is not followed by ctrl-q is typed, and the terminal is as
// it was found.
func TestAttachToAPtyRunFromATerminal(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	s := connect(t, state)
	s.OK("process_start", map[string]any{"name": "tty", "pty": true, "argv": []any{"cat"}})
	t.Cleanup(func() { s.Call("process_kill", map[string]any{"name": "tty", "signal": "KILL"}) })

	ptmx, tty, err := pty.Open()
	require.NoError(t, err)
	defer ptmx.Close()
	defer tty.Close()
	require.NoError(t, pty.Setsize(ptmx, &pty.Winsize{Cols: 101, Rows: 33}))
	before, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	require.NoError(t, err)
	require.NotZero(t, before.Lflag&unix.ICANON)

	cmd := exec.Command(binary, "--state-dir", state, "attach", "tty")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill() })
	var screen lockedBuffer
	go io.Copy(&screen, ptmx)
	abtest.WaitFor(t, "the local terminal to be raw", 30*time.Second, func() bool {
		tio, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
		return err == nil && tio.Lflag&(unix.ICANON|unix.ECHO) == 0
	})
	size := func(cols, rows float64) func() bool {
		return func() bool {
			run := abtest.RunOf(t, s.OK("process_list", nil), "tty")
			return run["cols"] == cols && run["rows"] == rows
		}
	}
	abtest.WaitFor(t, "the run to get the terminal's size", 30*time.Second, size(101, 33))

	// No newline: a cooked local terminal would hold the keys.
	_, err = ptmx.Write([]byte("no-enter"))
	require.NoError(t, err)
	abtest.WaitFor(t, "keys echoed by the run's terminal", 30*time.Second, func() bool { return strings.Contains(screen.String(), "no-enter") })
	_, err = ptmx.Write([]byte("\x10x\r"))
	require.NoError(t, err)
	abtest.WaitFor(t, "cat's line, with the ctrl-p that was not a detach", 30*time.Second, func() bool {
		return strings.Count(screen.String(), "no-enter\x10x") == 1 && strings.Count(screen.String(), "no-enter^Px") == 1
	})

	require.NoError(t, pty.Setsize(ptmx, &pty.Winsize{Cols: 90, Rows: 30}))
	abtest.WaitFor(t, "the run to follow the terminal's new size", 30*time.Second, size(90, 30))

	_, err = ptmx.Write([]byte("\x10\x11"))
	require.NoError(t, err)
	assert.Equal(t, 0, waitExit(t, cmd, 30*time.Second), "ctrl-p ctrl-q detaches")
	abtest.WaitFor(t, "the detach message", 30*time.Second, func() bool { return strings.Contains(screen.String(), "detached from tty") })
	after, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	require.NoError(t, err)
	assert.Equal(t, *before, *after, "the terminal is as attach found it")
	assert.Equal(t, "running", abtest.RunOf(t, s.OK("process_list", nil), "tty")["state"], "detaching leaves the run going")
}

// Ctrl-C while a box is slow to start the run gives up the start: agent-box
// ends, saying how to see whether the run started.
func TestRunInterruptedWhileStarting(t *testing.T) {
	t.Parallel()
	// A transport that never answers: the start waits for it.
	cmd := exec.Command(binary, "--exec", "sleep 120", "run", "slow", "--", "true")
	var errb lockedBuffer
	cmd.Stderr = &errb
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill() })
	abtest.WaitFor(t, "agent-box to start its transport", 30*time.Second, func() bool {
		procs, err := proc.Processes()
		require.NoError(t, err)
		for _, p := range procs {
			if p.PPID == cmd.Process.Pid {
				return true
			}
		}
		return false
	})
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	// At once, not when the session gives up on the box (20 s on).
	assert.Equal(t, cli.ExitError, waitExit(t, cmd, 10*time.Second), errb.String())
	assert.Contains(t, errb.String(), "interrupted while starting slow")
}
