package supervisor

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/capture"
	"github.com/agent-box/agent-box/cgroup"
	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
)

// pipeSize is asked of the kernel for the child's output pipes: a larger
// pipe lets a fast writer run ahead of the copier instead of blocking every
// 64 KiB (fcntl(2) F_SETPIPE_SZ; capped by /proc/sys/fs/pipe-max-size).
const pipeSize = 1 << 20

// copyBuf is the copier's read size.
const copyBuf = 256 << 10

// DefaultKillGrace is the wait between SIGTERM and SIGKILL at a timeout.
const DefaultKillGrace = 5 * time.Second

// Config is what the supervisor's main wires in.
type Config struct {
	// Log is the supervisor's own log, a line per message: main's
	// stderr, which Launch points at the run dir's StderrFile (a spare
	// points it there itself). Nil discards.
	Log io.Writer
	// Args is the process's command line, os.Args: a spare's ends with
	// spareArg, and it rewrites it (retitle).
	Args []string
}

// spare reports whether args are a spare supervisor's (LaunchSpare).
func spare(args []string) bool {
	return len(args) >= 3 && args[len(args)-2] == spareArg
}

// Main is the body of "agent-box supervise". It sends the server its
// private channel over ChannelFD (PrivateChannel), reads the Spec from it,
// reports on it, and returns when the child has exited, its output is
// drained and recorded, and every process of the run is reaped
// (supervise). The returned error is for the supervisor's own log only.
func Main(c Config) error {
	caught := make(chan struct{})
	go func() {
		catchSignals()
		close(caught)
	}()
	// Inherited descriptors arrive without close-on-exec; the child must
	// hold neither the channel nor anything agent-box's own caller left
	// open.
	if err := proc.CloseOnExecFrom(ChannelFD); err != nil {
		syscall.CloseOnExec(ChannelFD)
	}
	// First: nothing is read before the channel no other process can
	// hold.
	ch, err := PrivateChannel()
	if err != nil {
		return fmt.Errorf("supervise: %w (this subcommand is internal: agent-box starts it with its channel as fd %d)", err, ChannelFD)
	}
	s := &supervisor{cfg: c, caught: caught}
	// The supervisors of runs started from inside this one run the files
	// this one runs: by those a nested supervisor is told from a process
	// that only borrows a supervisor's command line. (Before the spec: a
	// spare does it before it is needed.)
	if exe, err := os.Executable(); err == nil {
		s.nested = InstalledWith(exe)
	}
	if spare(c.Args) {
		err = s.adopt(ch)
	} else if err = decodeSpec(ch, &s.spec); err != nil {
		err = fmt.Errorf("reading spec: %w", err)
	}
	if errors.Is(err, errAbandoned) {
		return nil
	}
	if err != nil {
		writeReport(ch, 0, err)
		return err
	}
	debug.SetGCPercent(25)
	return s.run(ch)
}

// catchSignals keeps the supervisor alive through the signals that would
// end it: it must outlive the SSH session (SIGHUP, SIGINT) and see write
// errors (EPIPE, EFBIG) rather than die of them.
//
// Caught, not ignored: an ignored signal stays ignored across execve, and
// the child must start with default dispositions (a kill -INT must stop
// it, a pipeline must get SIGPIPE). Caught ones reset at exec.
//
// It must be done before the child is forked: agent-box serve ignores
// SIGHUP and SIGPIPE, the supervisor inherits that, and the Go runtime
// keeps an inherited ignore of SIGHUP and SIGINT (and never handles TTIN
// and TTOU) until Notify installs its handler, so a child forked before
// would start with SIGHUP ignored. Main runs it in a goroutine from its
// start, beside the spec's decode, the record's read and the log's and
// pipes' setup, and startIn, the one fork of a child, waits for it
// (supervisor.caught): the first Notify starts a thread of its own, which
// cost process_start when it ran first (performance.md, "Figures behind
// code comments"). Until it is
// done the supervisor, in a session of its own with no terminal, gets
// SIGHUP or SIGINT only from an explicit kill, and SIGPIPE and SIGXFSZ
// only fail the write (stdout and stderr are not pipes here).
func catchSignals() {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGINT, syscall.SIGPIPE, syscall.SIGXFSZ, syscall.SIGTTOU, syscall.SIGTTIN)
	go func() {
		for range sigs {
		}
	}()
}

type supervisor struct {
	spec   Spec
	cfg    Config
	nested *Executables    // what the supervisors of runs started from this one run
	caught <-chan struct{} // closed once catchSignals is done
	store  *runrecord.Store
	rec    *runrecord.Record
	log    *capture.Log
	pty    *os.File // the terminal's master, for a pty run
	ptyIn  *os.File // the master's descriptor the stdin server writes to
	// ptySlave is the supervisor's own descriptor of the slave, held
	// until the leader is reaped (startOnPty).
	ptySlave *os.File
	group    *cgroup.Group // the run's cgroup, when it has limits
	// control takes process_kill's requests; nil when its socket failed.
	control *controlServer
	mu      sync.Mutex // guards rec and record writes
	// reserve is the path of the space kept for the record, "" once used.
	reserve string
}

// logf writes to the supervisor's own log, if main gave it one.
func (s *supervisor) logf(format string, args ...any) {
	if s.cfg.Log != nil {
		fmt.Fprintf(s.cfg.Log, format+"\n", args...)
	}
}

// secrets are the run's secrets, as capture takes them.
func (s *supervisor) secrets() [][]byte {
	secrets := make([][]byte, len(s.spec.Secrets))
	for i, v := range s.spec.Secrets {
		secrets[i] = []byte(v)
	}
	return secrets
}

// redact masks the run's secrets in text the supervisor writes or reports
// (as it is: such text never passes through the run's terminal).
func (s *supervisor) redact(text string) string {
	if len(s.spec.Secrets) == 0 {
		return text
	}
	return capture.NewRedactor(s.secrets()).String(text)
}

// listenStdin serves the run's stdin socket for the child's input w (nil:
// the run has no stdin), or nil when it cannot: the run goes on, and
// process_write says the pipe is unreachable.
func (s *supervisor) listenStdin(w *os.File) *stdinServer {
	if w == nil {
		return nil
	}
	sp := &s.spec
	stdin, err := serveStdin(sp.runDir(), w, s.terminal())
	if err != nil {
		// A terminal's input stays open to the end: see closeInput.
		if s.ptyIn == nil {
			w.Close()
		}
		s.logf("supervise: stdin socket: %v", err)
		return nil
	}
	return stdin
}

// listenControl serves the run's control socket, or leaves s.control nil
// when it cannot: the run goes on, and process_kill signals the run itself
// (and waits out the grace itself).
func (s *supervisor) listenControl() {
	c, err := serveControl(s.spec.runDir())
	if err != nil {
		s.logf("supervise: control socket: %v", err)
		return
	}
	s.control = c
}

func (s *supervisor) run(report *os.File) error {
	if err := s.claim(); err != nil {
		writeReport(report, 0, err)
		return err
	}
	// Set aside room for the exit before the child can fill the disk (an
	// adopted spare has).
	if s.reserve == "" {
		s.takeReserve(s.spec.runDir())
	}
	child, outs, stdinW, err := s.startChild()
	if err != nil {
		werr := s.writeRecord(func(r *runrecord.Record) {
			r.StartError = s.redact(err.Error())
			r.OutputClosed = true
		})
		writeReport(report, 0, errors.New(s.redact(errors.Join(err, werr).Error())))
		s.dropReserve() // the run is over; its dir stays for the record
		return errors.New(s.redact(err.Error()))
	}
	pid := child.Process.Pid
	durable, err := s.recordLeader(child)
	if err != nil {
		writeReport(report, 0, fmt.Errorf("recording pid %d: %w", pid, err))
		s.dropReserve()
		return err
	}
	// Listen on the stdin and control sockets before reporting, so that a
	// process_write or process_kill right after process_start finds them.
	stdin := s.listenStdin(stdinW)
	s.listenControl()
	writeReport(report, pid, nil)
	report.Close()
	if err := durable(); err != nil {
		s.logf("supervise: writing record: %v", err)
	}
	// The supervisor lives as long as its run: give back what start-up
	// allocated (as "agent-box supervise", mcp-go's JSON Schema library
	// compiles its meta-schemas at package init). After the report,
	// so that process_start does not wait for it.
	debug.FreeOSMemory()

	return s.supervise(pid, outs, stdin)
}

// claim reads the run's record and makes the run the supervisor's: its
// subreaper, and the supervisor the record names.
func (s *supervisor) claim() error {
	sp := &s.spec
	s.store = &runrecord.Store{Root: sp.StateDir}
	rec, err := s.store.Read(sp.Name, sp.RunID)
	if err != nil {
		return err
	}
	s.rec = rec

	// A subreaper inherits the orphans of the child's descendants, so
	// they are reaped here instead of by init, and survivors stay ours.
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

	self := os.Getpid()
	selfStat, err := proc.ReadStat(self)
	if err != nil {
		return err
	}
	// agent-box records our pid before the record is visible; a launcher
	// that forked instead of exec'ing us would leave another pid there.
	if rec.SupervisorPID == self && rec.SupervisorStartTime == selfStat.StartTime {
		return nil
	}
	return s.writeRecord(func(r *runrecord.Record) {
		r.SupervisorPID = self
		r.SupervisorStartTime = selfStat.StartTime
	})
}

// recordLeader records the started child's pid and start time (writePID).
// When it cannot, it kills the child: without a recorded pid nobody could
// ever control it.
func (s *supervisor) recordLeader(child *exec.Cmd) (durable func() error, err error) {
	pid := child.Process.Pid
	// The child is not reaped before we read its start time, so even a
	// child that exited at once still has its /proc entry (as a zombie).
	st, serr := proc.ReadStat(pid)
	durable, werr := s.writePID(pid, st.StartTime)
	if err := errors.Join(serr, werr); err != nil {
		unix.Kill(-pid, unix.SIGKILL)
		if s.group != nil {
			// Empty once the child is gone; else runs.Remove tries again.
			child.Wait()
			s.group.Remove()
		}
		return nil, err
	}
	return durable, nil
}

// createLog creates the run's log in runDir.
func (s *supervisor) createLog(runDir string) error {
	sp := &s.spec
	// A pty run's output is the terminal's: the line discipline may
	// have changed a secret's bytes before the master reads them.
	log, err := capture.Create(filepath.Join(runDir, runrecord.LogFile), capture.Mode(sp.Run.CaptureMode), capture.Options{
		MaxBytes: sp.Run.MaxLogBytes, Secrets: s.secrets(), Terminal: sp.Run.Pty,
	})
	if err != nil {
		return fmt.Errorf("creating log: %w", err)
	}
	s.log = log
	return nil
}

func (s *supervisor) startChild() (*exec.Cmd, []output, *os.File, error) {
	sp := &s.spec
	mode := capture.Mode(sp.Run.CaptureMode)
	if s.log == nil { // an adopted spare made it
		if err := s.createLog(sp.runDir()); err != nil {
			return nil, nil, nil, err
		}
	}
	log := s.log

	if sp.Run.Pty {
		return s.startOnPty(log)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, err
	}
	for _, f := range []*os.File{outR, errR} {
		// Best effort: a smaller pipe only costs throughput.
		_, _ = unix.FcntlInt(f.Fd(), unix.F_SETPIPE_SZ, pipeSize)
	}
	cmd := &exec.Cmd{
		Path:   sp.Path,
		Args:   sp.Argv,
		Env:    sp.Env,
		Dir:    sp.Dir,
		Stdout: outW,
		Stderr: errW,
		// Its own process group, so a kill reaches every descendant that
		// did not leave the group on purpose.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if mode == capture.Combined {
		// One pipe for both streams keeps their relative order exactly as
		// the child wrote it, as a terminal would show it.
		cmd.Stderr = outW
		errR.Close()
		errW.Close()
		errR, errW = nil, nil
	}
	var stdinW *os.File
	if sp.Run.Stdin == "pipe" {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, nil, nil, err
		}
		cmd.Stdin = r
		stdinW = w
		defer r.Close()
	}
	if err := s.startIn(cmd); err != nil {
		outR.Close()
		outW.Close()
		if errR != nil {
			errR.Close()
			errW.Close()
		}
		if stdinW != nil {
			stdinW.Close()
		}
		log.Close()
		return nil, nil, nil, err
	}
	outW.Close()
	outs := []output{{outR, log.Stdout()}}
	if errR != nil {
		errW.Close()
		outs = append(outs, output{errR, log.Stderr()})
	}
	return cmd, outs, stdinW, nil
}
