package proc

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// closeRangeCloexec is CLOSE_RANGE_CLOEXEC from linux/close_range.h
// (Linux 5.11), which x/sys/unix does not name.
const closeRangeCloexec = 1 << 2

// CloseOnExecFrom marks every open descriptor from min up close-on-exec.
//
// Go sets close-on-exec on what it opens itself, but descriptors a process
// inherited without it (a caller's `9>&1`, a shell's stray pipe) pass on
// to every program it starts. A run's supervisor and child live long after
// agent-box: holding a caller's pipe open would keep the caller waiting for
// an EOF until the run ends.
func CloseOnExecFrom(min int) error {
	if err := unix.CloseRange(uint(min), math.MaxUint32, closeRangeCloexec); err == nil {
		return nil
	}
	// Kernels before 5.11: walk the descriptor table.
	ents, err := os.ReadDir(procRoot + "/self/fd")
	if err != nil {
		return err
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd >= min {
			syscall.CloseOnExec(fd)
		}
	}
	return nil
}

// SocketInodes returns the inodes of the sockets pid holds open: the fds
// of /proc/PID/fd whose link reads "socket:[inode]" (proc(5)). A pid that
// names no process is ErrNoProcess; a process that made itself
// undumpable (prctl(PR_SET_DUMPABLE, 0)) cannot be read, which is an
// error.
func SocketInodes(pid int) ([]uint64, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
	}
	dir := procRoot + "/" + strconv.Itoa(pid) + "/fd"
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			return nil, fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
		}
		return nil, fmt.Errorf("sockets of pid %d: %w", pid, err)
	}
	var out []uint64
	for _, e := range ents {
		link, err := os.Readlink(dir + "/" + e.Name())
		if err != nil {
			continue // closed since the directory was read
		}
		if ino, ok := socketInode(link); ok {
			out = append(out, ino)
		}
	}
	return out, nil
}

// socketInode parses an fd link "socket:[inode]".
func socketInode(link string) (uint64, bool) {
	s, ok := strings.CutPrefix(link, "socket:[")
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, "]")
	if !ok {
		return 0, false
	}
	ino, err := strconv.ParseUint(s, 10, 64)
	return ino, err == nil
}
