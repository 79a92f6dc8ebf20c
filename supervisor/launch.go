package supervisor

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
)

// The files of a run dir besides the store's own (runrecord.RecordFile and
// runrecord.LogFile, the run's output): those the supervisor and its
// launch make.
const (
	// StderrFile is the supervisor's stderr, which Launch opens: its own
	// diagnostics, and those of a launcher (systemd-run) before it.
	StderrFile = "supervisor.log"
	// ReserveFile holds the room kept for the record on a full disk
	// (removed when the run ends, or when its start fails).
	ReserveFile = "reserve"
	// StdinSocket is the name of the unix socket, in the run directory,
	// through which any agent-box (not only the one that started the run)
	// writes to a piped run's stdin. The run directory is 0700, so only
	// the owner connects.
	StdinSocket = "stdin.sock"
	// ControlSocket is the unix socket, in the run directory, through
	// which any agent-box asks the supervisor to kill its run (Kill).
	ControlSocket = "control.sock"
)

// ChannelFD is the descriptor the supervisor is started with besides 0-2
// (/dev/null, /dev/null, the run's StderrFile): its end of a socket pair
// (channel) that carries neither the spec nor a report, since another
// process may hold a copy of it (PrivateChannel). Main sends the server
// its private channel over it, and the spec and reports go over that.
const ChannelFD = 3

// DefaultStartTimeout is how long Launched.Start waits for the start
// report when it is given no bound.
const DefaultStartTimeout = 15 * time.Second

// LaunchRequest says how to start the supervisor of one run.
type LaunchRequest struct {
	// Command runs Main: the agent-box-supervisor binary, or
	// {agent-box, "supervise"}. Launch appends the run's name and run id,
	// by which IsSupervisorOf knows the process.
	Command []string
	// Spec is what the supervisor is told to run (Launched.Start).
	Spec *Spec
	// Dir is where its StderrFile goes: the run dir, perhaps still under
	// the temporary name it is built under.
	Dir string
	// Env is the supervisor's environment; nil is an empty one, not ours.
	Env []string
	// Scope starts it through systemd-run --scope, in a transient unit of
	// its own outside the session's cgroup: a system scope as root, else a
	// --user scope.
	Scope bool
	// Delegate asks systemd to hand the scope's cgroup to the supervisor
	// (Delegate=yes), which makes the run's group in it under cgroup v2
	// (cgroup.Hierarchy.Create). Only with Scope.
	Delegate bool
}

// Launched is a supervisor started, in a session of its own, and not yet
// told what to run.
type Launched struct {
	PID         int
	StartTime   uint64 // /proc/PID/stat field 22: with PID, which process it is
	spec        *Spec
	cmd         *exec.Cmd
	inherited   *os.File      // our end of the pair the supervisor is started with, which ch comes over
	ch          *net.UnixConn // the private channel (receiveChannel)
	rep         *bufio.Reader // reads ch
	adopted     bool          // a spare told its spec (Adopt)
	exited      chan struct{} // closed once it has exited and been reaped
	reserve     string        // the reserve Start set aside, "" if none
	reserveInfo os.FileInfo   // which file it is
}

// Launch starts the supervisor req asks for. It sends its private channel
// and waits on it for the spec that Start sends; until then it starts
// nothing.
func Launch(req LaunchRequest) (*Launched, error) {
	stderr, err := runrecord.OpenFile(filepath.Join(req.Dir, StderrFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600, "the supervisor's log")
	if err != nil {
		return nil, fmt.Errorf("creating supervisor log: %w", err)
	}
	defer stderr.Close()
	argv := commandLine(req, os.Geteuid() == 0)
	cmd := exec.Command(argv[0], argv[1:]...)
	if req.Scope {
		// systemd-run is looked up in the PATH the supervisor is given,
		// the environment runs are started from.
		cmd.Path, cmd.Err = lookPath(argv[0], req.Env)
	}
	cmd.Env = append([]string{}, req.Env...) // never nil: nil would be ours
	cmd.Stderr = stderr
	return launch(cmd, req.Spec)
}

// launch starts cmd as a supervisor, in a session of its own, with its
// end of a socket pair as ChannelFD; spec is nil for a spare.
func launch(cmd *exec.Cmd, spec *Spec) (*Launched, error) {
	ours, theirs, err := channel()
	if err != nil {
		return nil, err
	}
	defer theirs.Close()
	// Not agent-box's stdin or stdout: those belong to the MCP session and
	// vanish with it.
	cmd.Stdin = nil
	cmd.Stdout = nil
	cmd.ExtraFiles = []*os.File{ChannelFD - 3: theirs} // ExtraFiles[i] is fd 3+i
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		ours.Close()
		return nil, fmt.Errorf("starting supervisor: %w", err)
	}
	// Not reaped before its start time is read: it cannot be gone from
	// /proc yet, and its pid cannot have been handed out again. (systemd-run
	// --scope execs the supervisor in its own process: same pid, same
	// start time.)
	st, err := proc.ReadStat(cmd.Process.Pid)
	// Reap it if it ends while we live; after we are gone, init does.
	l := &Launched{PID: cmd.Process.Pid, StartTime: st.StartTime, spec: spec, cmd: cmd, inherited: ours, exited: make(chan struct{})}
	go func() { cmd.Wait(); close(l.exited) }()
	if err != nil {
		l.Abort()
		return nil, fmt.Errorf("reading the supervisor's start time: %w", err)
	}
	return l, nil
}

// channel returns the two ends of the socket pair a supervisor is started
// with: ours, non-blocking so that deadlines apply to it, and the supervisor's,
// blocking, as a program expects its inherited descriptors.
//
// A connected socket pair, not a pipe: open(2) of /proc/PID/fd/N opens a
// pipe a second time (a FIFO), but refuses a socket (ENXIO), so no other
// process can join the channel through /proc whether or not it may read
// there (the supervisor, non-dumpable, forbids that too: package nodump,
// once it has started). A copy taken before that, with pidfd_getfd(2),
// is another matter: PrivateChannel.
func channel() (ours, theirs *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("making the supervisor's channel: %w", err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("making the supervisor's channel: %w", err)
	}
	// os.NewFile makes a non-blocking descriptor pollable: deadlines work.
	return os.NewFile(uintptr(fds[0]), "channel"), os.NewFile(uintptr(fds[1]), "channel"), nil
}

// commandLine is the supervisor's command line: its command, the run's
// name and run id, wrapped in systemd-run for a Scope.
func commandLine(req LaunchRequest, root bool) []string {
	cmd := append(append([]string{}, req.Command...), req.Spec.Name, req.Spec.RunID)
	if !req.Scope {
		return cmd
	}
	args := []string{"systemd-run"}
	if !root {
		args = append(args, "--user")
	}
	// --scope runs the command in the foreground of systemd-run's own
	// process, so ChannelFD passes
	// through.
	runID := req.Spec.RunID
	args = append(args, "--scope", "--collect", "--quiet", "--unit", "agent-box-"+req.Spec.Name+"-"+runID[max(len(runID)-6, 0):])
	if req.Delegate {
		args = append(args, "--property=Delegate=yes")
	}
	return append(args, cmd...)
}

// Abort ends a supervisor that was never sent its spec.
func (l *Launched) Abort() {
	// Without a spec it exits by itself; the kill is for one that hangs.
	// Safe: the process is our unreaped child or a zombie, so the pid is
	// still its own.
	l.inherited.Close()
	if l.ch != nil {
		l.ch.Close()
	}
	_ = l.cmd.Process.Kill()
}

// DropReserve removes the reserve Start set aside, for a start that
// failed: its run is over before it began, and its dir is kept for the
// record and the supervisor's log.
func (l *Launched) DropReserve() {
	if l.reserve == "" {
		return
	}
	// Only the file Start made: the state dir is anybody's to edit, and
	// a path is resolved again on every use.
	if fi, err := os.Lstat(l.reserve); err == nil && l.reserveInfo != nil && os.SameFile(fi, l.reserveInfo) {
		os.Remove(l.reserve)
	}
	l.reserve = ""
}

// AwaitExit waits, at most d, for the supervisor to exit.
func (l *Launched) AwaitExit(d time.Duration) {
	select {
	case <-l.exited:
	case <-time.After(d):
	}
}

// ReportTimeoutError is Start's error for a supervisor that did not report
// in time; it was killed.
type ReportTimeoutError struct {
	PID   int
	After time.Duration
}

func (e *ReportTimeoutError) Error() string {
	return fmt.Sprintf("supervisor (pid %d) did not report within %s and was killed", e.PID, e.After)
}

// Start sets the run's reserve aside in its run dir (an adopted spare
// has), takes and checks the supervisor's private channel (an adopted
// spare's came when it was launched), sends it its spec (an adopted spare,
// which has it, the go-ahead) and waits, at most timeout (0:
// DefaultStartTimeout) in all, for its start report: the child's pid, or
// why it could not be started (ErrStartFailed, ErrNoReport, ErrUntrusted,
// *ReportTimeoutError). After a failure, DropReserve gives the reserve
// back.
func (l *Launched) Start(timeout time.Duration) (int, error) {
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	deadline := time.Now().Add(timeout)
	// Here, while the supervisor's runtime is still starting, rather than
	// by the supervisor on its way to the child: the same room, set aside
	// before the child can fill the disk, off process_start's path. After
	// the run's first record, which must fit first; before the spec, after
	// which the supervisor looks for it (takeReserve). Best effort, as the
	// supervisor's own try when this one failed.
	runDir := l.spec.runDir()
	path := filepath.Join(runDir, ReserveFile)
	if l.adopted {
		if fi, ok := reserveAt(path); ok {
			l.reserve, l.reserveInfo = path, fi
		}
	} else if makeReserve(runDir) {
		l.reserve = path
		l.reserveInfo, _ = os.Lstat(path)
	}
	if !l.adopted {
		if err := l.receiveChannel(deadline, timeout); err != nil {
			// Told nothing: it must not wait on. Our unreaped child,
			// so the pid is still its own.
			_ = l.cmd.Process.Kill()
			return 0, err
		}
	}
	defer l.ch.Close()
	l.ch.SetDeadline(deadline)
	var err error
	if l.adopted {
		_, err = io.WriteString(l.ch, goAhead)
	} else {
		err = encodeSpec(l.ch, l.spec)
	}
	if err == nil {
		// The end of what it is told: an adopted spare reads to it.
		err = l.ch.CloseWrite()
	}
	if err != nil {
		err = fmt.Errorf("sending spec to supervisor: %w", err)
	} else {
		var pid int
		if pid, err = l.nextReport(); err == nil {
			return pid, nil
		}
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// Killed, so that it cannot start the command after we said it
		// failed (a launcher such as systemd-run can block for a long
		// time and then exec it). It is our unreaped child, so the pid is
		// still its own. Had it started the child already, the run's
		// record names it, and it reads unsupervised.
		_ = l.cmd.Process.Kill()
		return 0, &ReportTimeoutError{PID: l.PID, After: timeout}
	}
	return 0, err
}

// nextReport reads the start report.
func (l *Launched) nextReport() (int, error) {
	return reportOf(l.rep.ReadString('\n'))
}

// LogHead returns the start of runDir's StderrFile, on one line, bounded
// and quoted: what the supervisor (or its launcher) said before it failed.
func LogHead(runDir string) string {
	f, err := runrecord.OpenFile(filepath.Join(runDir, StderrFile), os.O_RDONLY, 0, "the supervisor's log")
	if err != nil {
		return ""
	}
	defer f.Close()
	b := make([]byte, 300)
	n, _ := io.ReadFull(f, b)
	line := strings.Join(strings.Fields(strings.ToValidUTF8(string(b[:n]), "?")), " ")
	if line == "" {
		return ""
	}
	if n == len(b) {
		line += " ..."
	}
	return strconv.Quote(line)
}

// lookPath finds the executable file named name in the PATH of env, as
// exec.LookPath does in our own.
func lookPath(name string, env []string) (string, error) {
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			// "" and relative entries name the server's cwd, perhaps a
			// project's directory: exec.LookPath refuses them too
			// (ErrDot).
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return name, &exec.Error{Name: name, Err: exec.ErrNotFound}
}
