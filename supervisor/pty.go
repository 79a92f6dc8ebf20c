package supervisor

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/capture"
	"github.com/agent-box/agent-box/runrecord"
)

// startOnPty starts the child on a new pseudo-terminal. The supervisor
// keeps the master: the log is read from it and process_write writes to
// it, so the terminal outlives agent-box and every connection; when the
// supervisor dies the master closes and the kernel hangs the terminal up
// (SIGHUP to the session's leader). The child leads a session of its own
// whose controlling terminal is the slave (setsid + TIOCSCTTY): its group
// is then the foreground group, which the line discipline's ^C reaches.
//
// The returned stdin is a second descriptor of the master, which the stdin
// server may close without ending the output.
//
// The supervisor keeps a descriptor of the slave open until the leader is
// reaped (releaseTerminal). A read of the master fails with EIO whenever
// no descriptor of the slave is open (pty_close sets TTY_OTHER_CLOSED on
// the master, n_tty_read reports it: drivers/tty/pty.c, n_tty.c), and a
// program may close its descriptors of the terminal and open /dev/tty
// again: that EIO would end the output while the program goes on writing
// to a terminal nobody reads, until it blocks. While the session's leader
// lives, any process of the session may open /dev/tty; once it is gone
// none can, since the kernel takes the terminal from the whole session at
// the leader's exit, before its parent can reap it (disassociate_ctty,
// session_clear_tty: drivers/tty/tty_jobctrl.c, called from do_exit). From
// then on only a descriptor still open writes to the terminal, and the EIO
// that comes when the last one closes is the end of the output.
func (s *supervisor) startOnPty(log *capture.Log) (*exec.Cmd, []output, *os.File, error) {
	sp := &s.spec
	ptm, slave, err := pty.Open()
	if err != nil {
		log.Close()
		return nil, nil, nil, fmt.Errorf("opening a pseudo-terminal: %w", err)
	}
	started := false
	defer func() {
		if !started {
			slave.Close()
		}
	}()
	// pty leaves the master in blocking mode (its ioctls use Fd), where a
	// write to a terminal whose reader stopped would block past every
	// deadline: the supervisor uses two non-blocking descriptors of its
	// own, one to read, one to write.
	master, stdinW, err := nonBlockingPair(ptm)
	ptm.Close()
	if err != nil {
		log.Close()
		return nil, nil, nil, fmt.Errorf("opening a pseudo-terminal: %w", err)
	}
	if err := setSize(master, sp.Run.Cols, sp.Run.Rows); err != nil {
		master.Close()
		stdinW.Close()
		log.Close()
		return nil, nil, nil, err
	}
	cmd := &exec.Cmd{
		Path: sp.Path, Args: sp.Argv, Env: sp.Env, Dir: sp.Dir,
		Stdin: slave, Stdout: slave, Stderr: slave,
		// Ctty is the child's fd 0, the slave.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0},
	}
	if err := s.startIn(cmd); err != nil {
		master.Close()
		stdinW.Close()
		log.Close()
		return nil, nil, nil, err
	}
	started = true
	s.pty, s.ptyIn, s.ptySlave = master, stdinW, slave
	return cmd, []output{{master, log.Stdout()}}, stdinW, nil
}

// releaseTerminal closes the supervisor's descriptor of the slave once the
// leader is reaped (see startOnPty): the output then ends when the last
// process that holds the terminal closes it.
func (s *supervisor) releaseTerminal() {
	if s.ptySlave != nil {
		s.ptySlave.Close()
		s.ptySlave = nil
	}
}

// terminal is what the stdin server needs of a pty run's terminal; nil for
// a run on pipes.
func (s *supervisor) terminal() *terminal {
	if s.pty == nil {
		return nil
	}
	return &terminal{eof: func() []byte { return veof(s.pty) }, resize: s.resize}
}

// terminal: close sends eof (the terminal's VEOF as the program has it
// now, ^D by default: the reader's read returns what the line holds, or 0
// bytes at a line's start), and resize sets the window size.
type terminal struct {
	eof    func() []byte
	resize func(cols, rows int) error
}

// nonBlockingPair returns two pollable descriptors of f, non-blocking (a
// flag of the open file, so f becomes non-blocking too).
func nonBlockingPair(f *os.File) (r, w *os.File, err error) {
	var fds [2]int
	for i := range fds {
		if fds[i], err = unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0); err != nil {
			if i == 1 {
				unix.Close(fds[0])
			}
			return nil, nil, err
		}
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, err
	}
	return os.NewFile(uintptr(fds[0]), "pty"), os.NewFile(uintptr(fds[1]), "pty-input"), nil
}

// control runs fn on f's descriptor without making it blocking (Fd would).
func control(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// setSize sets the terminal's size (TIOCSWINSZ: the kernel sends SIGWINCH
// to its foreground group).
func setSize(master *os.File, cols, rows int) error {
	err := control(master, func(fd int) error {
		return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Col: uint16(cols), Row: uint16(rows)})
	})
	if err != nil {
		return fmt.Errorf("setting the terminal's size: %w", err)
	}
	return nil
}

// veof is the terminal's end-of-file character; termios requests on the
// master act on the slave (tty_ioctl(4)).
func veof(master *os.File) []byte {
	eof := []byte{4} // ^D, the default
	control(master, func(fd int) error {
		t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
		if err == nil && t.Cc[unix.VEOF] != 0 {
			eof[0] = t.Cc[unix.VEOF]
		}
		return err
	})
	return eof
}

// resize sets the terminal's size and records it.
func (s *supervisor) resize(cols, rows int) error {
	if err := setSize(s.pty, cols, rows); err != nil {
		return err
	}
	return s.writeRecord(func(r *runrecord.Record) { r.Cols, r.Rows = cols, rows })
}
