package proc

import (
	"math"
	"os"
	"strconv"
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
