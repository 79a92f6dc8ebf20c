package supervisor

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/proc"
)

// The supervisor's private channel.
//
// The channel a supervisor inherits (ChannelFD) is open to others
// for a moment: from its execve(2) (or systemd-run's, which execs it) until
// package nodump's init, the process is dumpable, and any process of the
// user may copy its descriptors with pidfd_getfd(2) or, under Yama's
// ptrace_scope 0, ptrace it (both ask PTRACE_MODE_ATTACH_REALCREDS, which
// the owner of a dumpable process has: __ptrace_may_access in
// kernel/ptrace.c). A copied descriptor stays valid once the process is
// non-dumpable. So nothing secret goes over them: once nodump has run, the
// supervisor makes a socket pair and sends one end to the server over
// ChannelFD (SCM_RIGHTS, unix(7)); the server sends the spec, and the
// supervisor answers and reports, over that pair alone. A copy of
// ChannelFD sees nothing of either.

// channelMark is the one byte that carries the channel's descriptor: a
// stream socket passes ancillary data only with some data (unix(7)).
const channelMark = 'c'

// ErrUntrusted wraps the reasons the server does not send a supervisor its
// spec: what came over ChannelFD is not a channel the supervisor made, or
// another process has ptrace-attached the supervisor.
var ErrUntrusted = errors.New("the supervisor cannot be trusted with the run's spec")

// PrivateChannel makes the supervisor's private channel and sends the
// server its other end over ChannelFD; it returns the supervisor's end,
// close-on-exec (the child must not hold it). Main calls it first: by then
// package nodump's init has made the process non-dumpable, so no other
// process of the user can copy the new pair's descriptors, as it may have
// copied the inherited ones.
//
// ChannelFD is left open: closing it would take nothing from
// a copy made while the process was dumpable (a copy is a reference of its
// own to the same socket), and the server closes its ends once it has the
// channel.
func PrivateChannel() (*os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("making the private channel: %w", err)
	}
	// MSG_NOSIGNAL: a server that has gone is an error here, not a
	// SIGPIPE.
	err = unix.Sendmsg(ChannelFD, []byte{channelMark}, unix.UnixRights(fds[1]), nil, unix.MSG_NOSIGNAL)
	unix.Close(fds[1])
	if err != nil {
		unix.Close(fds[0])
		return nil, fmt.Errorf("sending the server the private channel on fd %d: %w", ChannelFD, err)
	}
	return os.NewFile(uintptr(fds[0]), "channel"), nil
}

// receiveChannel takes, until deadline, the private channel the supervisor
// sends on the pair it was started with (PrivateChannel), checks it, and
// closes our end of that pair: from now on l speaks over the private one
// alone. After an error (*ReportTimeoutError for one that did not send it
// within timeout, ErrUntrusted for one refused) the caller ends the
// supervisor: it was told nothing.
func (l *Launched) receiveChannel(deadline time.Time, timeout time.Duration) error {
	fd, err := l.recvChannel(deadline)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return &ReportTimeoutError{PID: l.PID, After: timeout}
	}
	if err != nil {
		return err
	}
	if err := l.checkChannel(fd); err != nil {
		unix.Close(fd)
		return err
	}
	// net.FileConn takes a duplicate, non-blocking, so that deadlines
	// apply to it, and gives CloseWrite.
	f := os.NewFile(uintptr(fd), "channel")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("taking the supervisor's channel: %w", err)
	}
	l.ch = c.(*net.UnixConn)
	l.rep = newReportReader(l.ch)
	l.inherited.Close()
	return nil
}

// recvChannel reads the one message that carries the channel: channelMark
// and exactly one descriptor, which it returns.
func (l *Launched) recvChannel(deadline time.Time) (int, error) {
	rc, err := l.inherited.SyscallConn()
	if err != nil {
		return -1, err
	}
	l.inherited.SetReadDeadline(deadline)
	defer l.inherited.SetReadDeadline(time.Time{})
	// Room for more than one descriptor, so that more are seen (and
	// closed) rather than cut off (MSG_CTRUNC).
	buf, oob := make([]byte, 64), make([]byte, unix.CmsgSpace(4*4))
	var n, oobn, flags int
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		for {
			// MSG_CMSG_CLOEXEC: a descriptor received must not reach
			// a process we start before it is checked and kept.
			n, oobn, flags, _, rerr = unix.Recvmsg(int(fd), buf, oob, unix.MSG_CMSG_CLOEXEC)
			if rerr != unix.EINTR {
				return rerr != unix.EAGAIN
			}
		}
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		return -1, err
	}
	fds, perr := receivedFDs(oob[:oobn])
	fail := func(format string, args ...any) (int, error) {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return -1, fmt.Errorf("%w: supervisor (pid %d) %s", ErrUntrusted, l.PID, fmt.Sprintf(format, args...))
	}
	switch {
	case n == 0 && len(fds) == 0:
		return -1, fmt.Errorf("%w (it sent no channel)", ErrNoReport)
	case perr != nil:
		return fail("sent what is not a descriptor with its channel: %v", perr)
	case flags&unix.MSG_CTRUNC != 0 || len(fds) > 1:
		return fail("sent more than one descriptor for its channel")
	case len(fds) == 0:
		return fail("sent %q, not its channel", buf[:n])
	case n != 1 || buf[0] != channelMark:
		// More than the mark: another process wrote on the report
		// channel first.
		return fail("sent %q with its channel, not %q", buf[:n], string(rune(channelMark)))
	}
	return fds[0], nil
}

// receivedFDs are the descriptors in the control messages oob, all of them
// (each is ours to close), and an error for any message that is not
// SCM_RIGHTS.
func receivedFDs(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for _, m := range msgs {
		got, err := unix.ParseUnixRights(&m)
		if err != nil {
			return fds, err
		}
		fds = append(fds, got...)
	}
	return fds, nil
}

// checkChannel checks that fd is a channel only the supervisor can hold:
// one end of a unix stream socket pair that the supervisor itself made
// (another process holding a copy of its ChannelFD could send one of its
// own), of a supervisor no process traces (a tracer attached while it was
// dumpable stays attached, and can read its memory and take its
// descriptors). Both ends of a socket pair carry the credentials of the
// process that called socketpair(2) (SO_PEERCRED, unix(7); init_peercred
// in net/unix/af_unix.c unix_socketpair), and before it sends its channel
// the supervisor has made no other socket anybody could connect to. After
// it, once non-dumpable, no process of the user can attach it: only root
// could, who could read the spec anyway.
func (l *Launched) checkChannel(fd int) error {
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("%w: supervisor (pid %d) %s", ErrUntrusted, l.PID, fmt.Sprintf(format, args...))
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("checking the supervisor's channel: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return refuse("sent a descriptor that is not a socket for its channel")
	}
	domain, derr := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	typ, terr := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err := errors.Join(derr, terr); err != nil {
		return fmt.Errorf("checking the supervisor's channel: %w", err)
	}
	if domain != unix.AF_UNIX || typ != unix.SOCK_STREAM {
		return refuse("sent a socket that is not a unix stream socket for its channel")
	}
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return fmt.Errorf("checking the supervisor's channel: %w", err)
	}
	if int(cred.Pid) != l.PID {
		return refuse("sent a channel made by pid %d, not by itself: another process wrote on the channel it was started with", cred.Pid)
	}
	return l.untraced()
}

// untraced refuses a supervisor that a process has ptrace-attached.
func (l *Launched) untraced() error {
	tracer, err := proc.TracerPID(l.PID)
	if err != nil {
		return fmt.Errorf("checking whether the supervisor (pid %d) is traced: %w", l.PID, err)
	}
	if tracer != 0 {
		return fmt.Errorf("%w: supervisor (pid %d) is traced by thread %d, which can read what it is sent", ErrUntrusted, l.PID, tracer)
	}
	return nil
}
