package nodump

import "syscall"

func init() {
	// PR_SET_DUMPABLE is 4 (<linux/prctl.h>); syscall has no name for it.
	// An error leaves the process as it was: nothing here can refuse it
	// (the kernel accepts 0 and 1 from any process), and a process that
	// cannot protect itself is no reason to fail a start.
	const prSetDumpable = 4
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0)
}
