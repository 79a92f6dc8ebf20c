package supervisor

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// pipeServer serves stdin.sock for a pipe whose read end the test holds,
// as a child that does not read its stdin would.
func pipeServer(t *testing.T) (dir string, r *os.File) {
	t.Helper()
	dir = t.TempDir()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	s, err := serveStdin(dir, w, nil)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close(); r.Close() })
	return dir, r
}

// queued is how many bytes sit in the pipe, unread (FIONREAD, alias TIOCINQ).
func queued(t *testing.T, r *os.File) int {
	t.Helper()
	rc, err := r.SyscallConn()
	require.NoError(t, err)
	var n int
	var ierr error
	require.NoError(t, rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }))
	require.NoError(t, ierr)
	return n
}

func pipeCapacity(t *testing.T, r *os.File) int {
	t.Helper()
	rc, err := r.SyscallConn()
	require.NoError(t, err)
	var n int
	var ferr error
	require.NoError(t, rc.Control(func(fd uintptr) { n, ferr = unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0) }))
	require.NoError(t, ferr)
	return n
}

func TestWriteStdinTimeoutSaysExactlyWhatWasWritten(t *testing.T) {
	dir, r := pipeServer(t)
	data := make([]byte, 4*pipeCapacity(t, r))
	reply, err := WriteStdin(dir, os.Getpid(), data, true, 100*time.Millisecond)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrStdinTimeout)
	var we *WriteError
	require.ErrorAs(t, err, &we)
	n := queued(t, r)
	require.Positive(t, n)
	assert.Equal(t, n, reply.Written)
	assert.Equal(t, n, we.Written)
	assert.Equal(t, len(data), we.Total)
	assert.False(t, reply.Closed)
	assert.True(t, we.CloseAsked)
	assert.Contains(t, err.Error(), "timed out after 100ms (the process is not reading its stdin)")
	assert.Contains(t, err.Error(), "; stdin was not closed")

	// The pipe is still full: nothing more goes in, and that is said.
	_, err = WriteStdin(dir, os.Getpid(), data[n:], false, 100*time.Millisecond)
	require.ErrorAs(t, err, &we)
	assert.Equal(t, 0, we.Written)
	assert.ErrorIs(t, err, ErrStdinTimeout)
	assert.Equal(t, n, queued(t, r))
}

// The reader goes away in the middle of a write (EPIPE): the count is what
// the pipe had taken.
func TestWriteStdinBrokenPipeMidWriteSaysWhatWasWritten(t *testing.T) {
	dir, r := pipeServer(t)
	size := pipeCapacity(t, r)
	data := make([]byte, 4*size)
	type result struct {
		reply WriteReply
		err   error
	}
	done := make(chan result, 1)
	go func() {
		reply, err := WriteStdin(dir, os.Getpid(), data, false, time.Minute)
		done <- result{reply, err}
	}()
	// Once the pipe is full no byte more can go in before the close.
	for queued(t, r) < size {
		time.Sleep(5 * time.Millisecond)
	}
	r.Close()
	res := <-done
	require.Error(t, res.err)
	assert.ErrorIs(t, res.err, ErrStdinBroken)
	assert.Equal(t, size, res.reply.Written)
	assert.Contains(t, res.err.Error(), "closed its stdin or exited")

	// Later writes fail at once, with nothing written.
	reply, err := WriteStdin(dir, os.Getpid(), []byte("x"), false, time.Minute)
	assert.ErrorIs(t, err, ErrStdinBroken)
	assert.Equal(t, 0, reply.Written)
	assert.Contains(t, err.Error(), "wrote none of the 1 bytes")
}

// Waiting behind another write counts against the deadline: the second
// write gives up in time and says that none of its data went in.
func TestWriteStdinQueuedWriteTimesOutWithNothingWritten(t *testing.T) {
	dir, r := pipeServer(t)
	size := pipeCapacity(t, r)
	first := make(chan error, 1)
	go func() {
		_, err := WriteStdin(dir, os.Getpid(), make([]byte, 2*size), false, time.Minute)
		first <- err
	}()
	for queued(t, r) < size {
		time.Sleep(5 * time.Millisecond)
	}
	reply, err := WriteStdin(dir, os.Getpid(), []byte("second"), true, 100*time.Millisecond)
	assert.ErrorIs(t, err, ErrStdinTimeout)
	assert.Equal(t, 0, reply.Written)
	assert.False(t, reply.Closed)
	assert.Contains(t, err.Error(), "waiting for an earlier write")
	r.Close() // let the first write end
	assert.ErrorIs(t, <-first, ErrStdinBroken)
}

func TestWriteStdinAfterClose(t *testing.T) {
	dir, r := pipeServer(t)
	reply, err := WriteStdin(dir, os.Getpid(), []byte("hi"), true, 0)
	require.NoError(t, err)
	assert.Equal(t, 2, reply.Written)
	assert.True(t, reply.Closed)
	b, err := readAll(r)
	require.NoError(t, err)
	assert.Equal(t, "hi", string(b))
	_, err = WriteStdin(dir, os.Getpid(), []byte("more"), false, 0)
	assert.ErrorIs(t, err, ErrStdinClosed)
}

func readAll(r *os.File) ([]byte, error) {
	var sb strings.Builder
	buf := make([]byte, 512)
	for {
		n, err := r.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			if errors.Is(err, io.EOF) {
				return []byte(sb.String()), nil
			}
			return nil, err
		}
	}
}

func TestWriteErrorText(t *testing.T) {
	why := &reasonError{text: "the write timed out after 10s (the process is not reading its stdin)", sentinel: ErrStdinTimeout}
	e := &WriteError{Written: 65536, Total: 200000, Err: why}
	assert.Equal(t, "wrote 65536 of 200000 bytes to stdin before the write timed out after 10s (the process is not reading its stdin); the remaining 134464 bytes were not written", e.Error())
	assert.True(t, errors.Is(e, ErrStdinTimeout))
}

// Close, when the leader exits, cuts short a write that a full pipe holds
// (a descendant may keep the read end without reading): the supervisor
// must not wait out the write's deadline, and the writer is told exactly
// what went in and that the run's leader exited, not that it timed out.
func TestCloseCutsShortABlockedWrite(t *testing.T) {
	dir := t.TempDir()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	s, err := serveStdin(dir, w, nil)
	require.NoError(t, err)
	data := make([]byte, 4*pipeCapacity(t, r))
	type result struct {
		reply WriteReply
		err   error
	}
	done := make(chan result, 1)
	go func() {
		reply, err := WriteStdin(dir, os.Getpid(), data, false, MaxStdinWriteTimeout)
		done <- result{reply, err}
	}()
	// Wait until the pipe is full: the write is in progress.
	for queued(t, r) < pipeCapacity(t, r) {
		time.Sleep(time.Millisecond)
	}
	s.Close()
	res := <-done
	require.Error(t, res.err)
	assert.ErrorIs(t, res.err, ErrStdinBroken)
	assert.NotErrorIs(t, res.err, ErrStdinTimeout)
	assert.Contains(t, res.err.Error(), "leader exited")
	assert.Equal(t, queued(t, r), res.reply.Written)
	s.Close() // a second Close does nothing
}
