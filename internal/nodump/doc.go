// Package nodump makes the process that imports it non-dumpable
// (prctl(2) PR_SET_DUMPABLE 0) when it is initialized, as ssh-agent and
// gpg-agent protect their secrets. agent-box's processes hold what no
// other process of the user may reach: the MCP stream with every run's
// secret_env, the spec a supervisor is sent, the pipes of a run's output
// and stdin. For a dumpable process any process of the same user may open
// /proc/PID/fd/N (a pipe opens as the FIFO it is), read /proc/PID/environ
// and /proc/PID/mem, and ptrace it; for a non-dumpable one the kernel
// checks CAP_SYS_PTRACE instead (ptrace_may_access in kernel/ptrace.c),
// which only root has, and makes its /proc/PID files root's.
//
// Importing it (for its effect: import _) is the first thing each of
// agent-box's main packages does. Go gives no earlier hook without cgo:
// the runtime starts, and packages are initialized in import path order
// as their imports allow (the Go spec, "Package initialization"); this
// one needs only syscall, so it runs before any package of the program
// that takes time. Until then the process is dumpable, as every process
// is after execve(2): docs/architecture/guarantees.md says what that
// moment allows.
//
// It does not reach a run's child: execve(2) makes a program dumpable
// again (unless it gains privileges), so a run's own command is open to
// the user as any process of theirs is.
package nodump
