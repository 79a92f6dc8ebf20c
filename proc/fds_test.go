package proc

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestCloseOnExecFrom(t *testing.T) {
	f, err := os.Open(os.DevNull)
	require.NoError(t, err)
	defer f.Close()
	// A descriptor as a process inherits it: without close-on-exec.
	fd, err := unix.Dup(int(f.Fd()))
	require.NoError(t, err)
	defer unix.Close(fd)
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	require.NoError(t, err)
	require.Zero(t, flags&unix.FD_CLOEXEC, "setup: dup(2) clears close-on-exec")

	require.NoError(t, CloseOnExecFrom(3))
	flags, err = unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	require.NoError(t, err)
	assert.NotZero(t, flags&unix.FD_CLOEXEC)
	// Stdio is left alone.
	for std := range 3 {
		flags, err = unix.FcntlInt(uintptr(std), unix.F_GETFD, 0)
		require.NoError(t, err)
		assert.Zero(t, flags&unix.FD_CLOEXEC, "fd %d", std)
	}
}
