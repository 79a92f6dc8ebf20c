//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/internal/abtest"
)

// connectShortStdinDeadline is connect with process_write's deadline cut
// from 10 s to 1 s, so that a write that cannot finish fails quickly.
func connectShortStdinDeadline(t *testing.T, stateDir string) *abtest.Server {
	t.Helper()
	cmd := exec.Command(binary, "--state-dir", stateDir)
	cmd.Env = append(os.Environ(), "AGENT_BOX_STDIN_WRITE_TIMEOUT=1s")
	return abtest.ConnectCmd(t, cmd)
}

// release opens the FIFO a child is blocked on and closes it, which lets
// the child go on.
func release(t *testing.T, fifo string) {
	t.Helper()
	var f *os.File
	abtest.WaitFor(t, "the child to open "+fifo, 20*time.Second, func() bool {
		var err error
		// O_NONBLOCK: fail (ENXIO) rather than hang if no reader yet.
		f, err = os.OpenFile(fifo, os.O_WRONLY|unix.O_NONBLOCK, 0)
		return err == nil || !errors.Is(err, unix.ENXIO)
	})
	require.NotNil(t, f)
	f.Close()
}

// A write larger than the stdin pipe to a child that is not reading times
// out after part of the data went in. The error must say exactly how much
// the child got and that the rest did not, so the agent resends only the
// rest instead of duplicating the first part.
func TestWritePartialTimeoutSaysHowMuchWasWritten(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "go")
	require.NoError(t, unix.Mkfifo(fifo, 0o600))
	s := connectShortStdinDeadline(t, filepath.Join(dir, "state"))
	// The child reads nothing until released, then counts its stdin.
	s.OK("process_start", map[string]any{"name": "w", "stdin": "pipe",
		"command": fmt.Sprintf("read _ < '%s'; wc -c", fifo)})

	const total = 200000
	e := s.Call("process_write", map[string]any{"name": "w", "data": strings.Repeat("x", total)})
	require.True(t, e.IsError, e.Text)
	t.Logf("process_write: %s", e.Text)

	release(t, fifo)
	s.OK("process_write", map[string]any{"name": "w", "close": true})
	w := s.OK("process_wait", map[string]any{"name": "w", "timeout_ms": 30000})
	assert.Equal(t, int64(0), abtest.Num(w.Data["run"].(map[string]any)["exit_code"]), w.Text)
	r := s.OK("tail_log", map[string]any{"name": "w"})
	got, err := strconv.Atoi(strings.TrimSpace(abtest.Str(r.Data["content"])))
	require.NoError(t, err, "wc -c printed %q", r.Data["content"])
	require.Greater(t, got, 0, "the pipe took nothing")
	require.Less(t, got, total, "the pipe took everything")

	assert.Contains(t, e.Text, fmt.Sprintf("wrote %d of %d bytes to stdin of run \"w\"", got, total))
	assert.Contains(t, e.Text, "timed out after 1s")
	assert.Contains(t, e.Text, fmt.Sprintf("the remaining %d bytes were not written", total-got))
}

// Resending only the rest, as the error invites, gives the child every byte
// exactly once; and a write that finds the pipe still full says that none
// of it went in.
func TestWriteResendRestAfterPartialTimeout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "go")
	require.NoError(t, unix.Mkfifo(fifo, 0o600))
	s := connectShortStdinDeadline(t, filepath.Join(dir, "state"))
	s.OK("process_start", map[string]any{"name": "w", "stdin": "pipe",
		"command": fmt.Sprintf("read _ < '%s'; wc -c", fifo)})

	const total = 200000
	data := strings.Repeat("x", total)
	e := s.Call("process_write", map[string]any{"name": "w", "data": data, "close": true})
	require.True(t, e.IsError, e.Text)
	var n int
	_, err := fmt.Sscanf(e.Text, "wrote %d of", &n)
	require.NoError(t, err, e.Text)
	assert.Contains(t, e.Text, "stdin was not closed")

	// The pipe is still full: nothing more goes in.
	e = s.Call("process_write", map[string]any{"name": "w", "data": data[n:]})
	require.True(t, e.IsError, e.Text)
	assert.Contains(t, e.Text, fmt.Sprintf("wrote none of the %d bytes to stdin of run \"w\"", total-n))

	release(t, fifo)
	ok := s.OK("process_write", map[string]any{"name": "w", "data": data[n:], "close": true})
	assert.Equal(t, int64(total-n), abtest.Num(ok.Data["written"]), ok.Text)
	s.OK("process_wait", map[string]any{"name": "w", "timeout_ms": 30000})
	r := s.OK("tail_log", map[string]any{"name": "w"})
	assert.Equal(t, strconv.Itoa(total), strings.TrimSpace(abtest.Str(r.Data["content"])))
}

// A child that closed its stdin: the write fails at once with EPIPE, and
// the error says that nothing was written and why.
func TestWriteToClosedStdinSaysNothingWasWritten(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	s.OK("process_start", map[string]any{"name": "c", "stdin": "pipe",
		"command": "exec 0<&-; echo closed; sleep 30"})
	abtest.WaitFor(t, "the child to close its stdin", 20*time.Second, func() bool {
		r := s.OK("tail_log", map[string]any{"name": "c"})
		return strings.Contains(abtest.Str(r.Data["content"]), "closed")
	})
	e := s.Call("process_write", map[string]any{"name": "c", "data": "hello\n"})
	require.True(t, e.IsError, e.Text)
	t.Logf("process_write: %s", e.Text)
	assert.Contains(t, e.Text, "wrote none of the 6 bytes to stdin of run \"c\"")
	assert.Contains(t, e.Text, "closed its stdin")
	s.OK("process_kill", map[string]any{"name": "c", "signal": "KILL"})
}

// A write to a run whose child has just exited says its stdin is gone, in
// every moment of the exit: also in the one after the supervisor stopped
// listening on the stdin socket and before the record says the exit. The
// socket must outlive the record's last write, or that write fails with
// "connect: connection refused", which tells the agent nothing.
func TestWriteAsTheChildExitsSaysStdinIsGone(t *testing.T) {
	t.Parallel()
	s := connect(t, filepath.Join(t.TempDir(), "state"))
	for i := range 5 {
		name := fmt.Sprintf("x%d", i)
		s.OK("process_start", map[string]any{"name": name, "stdin": "pipe", "command": "read _; exit 0"})
		s.OK("process_write", map[string]any{"name": name, "data": "go\n"})
		for deadline := time.Now().Add(30 * time.Second); ; {
			require.True(t, time.Now().Before(deadline), "run %s did not end", name)
			e := s.Call("process_write", map[string]any{"name": name, "data": "y"})
			if !e.IsError {
				continue // the child has not exited yet (the pipe takes it)
			}
			require.True(t, strings.Contains(e.Text, "its stdin is gone") ||
				strings.Contains(e.Text, "closed its stdin or exited") ||
				strings.Contains(e.Text, "leader exited"),
				"process_write as the child exits: %s", e.Text)
			if strings.Contains(e.Text, "its stdin is gone") {
				break
			}
		}
	}
}
