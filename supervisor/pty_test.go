package supervisor

import (
	"os"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// ptyServer serves stdin.sock for a terminal whose slave the test holds,
// as the supervisor of a pty run does for its master.
func ptyServer(t *testing.T) (dir string, slave *os.File, sizes chan Size) {
	t.Helper()
	dir = t.TempDir()
	ptm, slave, err := pty.Open()
	require.NoError(t, err)
	master, w, err := nonBlockingPair(ptm)
	require.NoError(t, err)
	ptm.Close()
	sizes = make(chan Size, 4)
	term := &terminal{eof: func() []byte { return veof(master) }, resize: func(cols, rows int) error {
		if err := setSize(master, cols, rows); err != nil {
			return err
		}
		sizes <- Size{cols, rows}
		return nil
	}}
	s, err := serveStdin(dir, w, term)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close(); master.Close(); slave.Close() })
	return dir, slave, sizes
}

func TestResizeSetsTheTerminalsSize(t *testing.T) {
	t.Parallel()
	dir, slave, sizes := ptyServer(t)
	require.NoError(t, Resize(dir, os.Getpid(), Size{Cols: 91, Rows: 17}))
	assert.Equal(t, Size{91, 17}, <-sizes)
	ws, err := unix.IoctlGetWinsize(int(slave.Fd()), unix.TIOCGWINSZ)
	require.NoError(t, err)
	assert.Equal(t, [2]uint16{91, 17}, [2]uint16{ws.Col, ws.Row}, "the slave's size")
}

// A terminal has no end to close: close sends its VEOF (^D), which the
// line discipline turns into a read of 0 bytes at a line's start.
func TestCloseOfATerminalSendsEOF(t *testing.T) {
	t.Parallel()
	dir, slave, _ := ptyServer(t)
	_, err := WriteStdin(dir, os.Getpid(), []byte("line\n"), true, time.Second)
	require.NoError(t, err)
	buf := make([]byte, 64)
	n, err := slave.Read(buf)
	require.NoError(t, err)
	assert.Equal(t, "line\n", string(buf[:n]))
	n, err = slave.Read(buf)
	assert.Equal(t, 0, n, "^D at a line's start reads as end of file (%v)", err)
}

func TestResizeOfARunOnPipesIsRefused(t *testing.T) {
	t.Parallel()
	dir, _ := pipeServer(t)
	err := Resize(dir, os.Getpid(), Size{Cols: 80, Rows: 24})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no terminal")
}

// The EOF sent is the terminal's VEOF as the program set it, read at the
// close: in non-canonical mode it arrives as the byte itself.
func TestCloseSendsTheTerminalsOwnVEOF(t *testing.T) {
	t.Parallel()
	dir, slave, _ := ptyServer(t)
	tio, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
	require.NoError(t, err)
	tio.Lflag &^= unix.ICANON | unix.ECHO
	tio.Cc[unix.VEOF] = 'Q'
	require.NoError(t, unix.IoctlSetTermios(int(slave.Fd()), unix.TCSETS, tio))
	_, err = WriteStdin(dir, os.Getpid(), nil, true, time.Second)
	require.NoError(t, err)
	buf := make([]byte, 8)
	n, err := slave.Read(buf)
	require.NoError(t, err)
	assert.Equal(t, "Q", string(buf[:n]))
}
