//go:build linux

// The box side: the MCP server, the CLI over runs, doctor and the
// supervisor, wired to the Linux-only packages (proc, cgroup, supervisor,
// runs). box_other.go stands in for it elsewhere.

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/cli"
	"github.com/agent-box/agent-box/doctor"
	"github.com/agent-box/agent-box/live"
	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
	"github.com/agent-box/agent-box/runs"
	"github.com/agent-box/agent-box/session"
	"github.com/agent-box/agent-box/supervisor"
	"github.com/agent-box/agent-box/tools"
)

// closeInherited marks every descriptor above stderr close-on-exec.
func closeInherited() {
	// What our caller left open must not reach the supervisors and runs,
	// which outlive us (a caller waiting for EOF on it would hang).
	_ = proc.CloseOnExecFrom(3)
}

// supervise is agent-box supervise: the per-run supervisor.
func supervise() int {
	// Its stderr is the run dir's supervisor.log (supervisor.Launch).
	if err := supervisor.Main(supervisor.Config{Log: os.Stderr, Args: os.Args}); err != nil {
		fmt.Fprintf(os.Stderr, "agent-box supervise: %v\n", err)
		return 1
	}
	return 0
}

// box serves MCP on stdio (no command) or runs a command of the CLI over
// runs (rest[0]).
func box(stateDir, defaultLimits string, rest []string) int {
	w, err := processWiring()
	if err != nil {
		fmt.Fprintf(os.Stderr, "agent-box: %v\n", err)
		return 1
	}
	w.defaultLimits = defaultLimits
	m, err := w.manager(stateDir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "agent-box: %v\n", err)
		return 1
	}
	if len(rest) == 0 {
		return serve(m)
	}
	return runCLI(m, rest)
}

// runCLI runs a command of the CLI on this machine's runs, through the
// same tools a client calls, served in process.
func runCLI(m *runs.Manager, args []string) int {
	return cli.Run(cli.Box{Tools: localTools(m), Local: true}, args, os.Stdin, os.Stdout, os.Stderr)
}

// localTools are the tools of this machine's runs, served in process, for
// a person: their messages name the CLI's commands.
func localTools(m *runs.Manager) session.Tools {
	m.Words = cliWords
	call := inProcess(tools.InProcess(&tools.Handlers{M: m}, version))
	// Named as ps shows this box, and as ssh would reach it.
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return session.Tools{Caller: call, Box: host}
}

// localWatchBox is this machine's box for agent-box watch: its tools,
// served in process by a Manager built as box builds it.
func localWatchBox(stateDir, defaultLimits string) (session.Tools, error) {
	w, err := processWiring()
	if err != nil {
		return session.Tools{}, err
	}
	w.defaultLimits = defaultLimits
	m, err := w.manager(stateDir)
	if err != nil {
		return session.Tools{}, err
	}
	t := localTools(m)
	if stateDir != "" {
		// The cursor file keys cursors by box: another state directory
		// is another box.
		abs, err := filepath.Abs(stateDir)
		if err != nil {
			return session.Tools{}, err
		}
		t.Box = "this machine (state dir " + abs + ")"
	}
	return t, nil
}

// cliWords name the CLI's commands in runs' messages ("agent-box ps shows
// the runs there are").
var cliWords = runs.Words{
	List:    "agent-box ps",
	ListAll: "agent-box ps -a",
	Kill:    "agent-box kill",
	Restart: "agent-box restart",
	Remove:  "agent-box rm",
	Args:    map[string]string{"grace_ms": "--grace", "timeout_s": "--timeout", "stream": "--stream"},
}

// inProcess is a tools.InProcess server as the session's Caller.
type inProcess func(ctx context.Context, request json.RawMessage) (json.RawMessage, error)

func (serve inProcess) CallTool(ctx context.Context, params json.RawMessage, _ func(line []byte)) (session.Answer, error) {
	req, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
	if err != nil {
		return session.Answer{}, err
	}
	resp, err := serve(ctx, req)
	if err != nil {
		return session.Answer{}, err
	}
	if ctx.Err() != nil {
		// As a session's call cut by its ctx: a wait cut short answers as
		// if its time was up, which is not what happened.
		return session.Answer{}, ctx.Err()
	}
	var a session.Answer
	if err := json.Unmarshal(resp, &a); err != nil {
		return session.Answer{}, fmt.Errorf("the tools' answer: %w", err)
	}
	return a, nil
}

// runDoctor checks the box (doctor.Checks) and exits 1 when a check fails.
func runDoctor(stateDir string, args []string) int {
	asJSON, code, done := jsonFlagOnly("doctor", args)
	if done {
		return code
	}
	o := doctor.Options{Version: version, Launch: os.Getenv("AGENT_BOX_LAUNCH"), UnderSSH: os.Getenv("SSH_CONNECTION") != ""}
	o.Exe, _ = os.Executable()
	if stateDir == "" {
		stateDir, o.StateDirErr = runrecord.DefaultRoot(os.Getenv)
	}
	if o.StateDirErr == nil {
		o.StateDir, o.StateDirErr = filepath.Abs(stateDir)
	}
	checks := doctor.Checks(doctor.Gather(o))
	if asJSON {
		doctor.JSON(os.Stdout, checks)
	} else {
		doctor.Text(os.Stdout, checks)
	}
	if doctor.Failed(checks) {
		return 1
	}
	return 0
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// wiring is what main takes from its process to build a Manager: the
// environment, its own executable (the supervisor is found beside it) and
// where diagnostics go. The tests build the Manager of a server they run
// in their own process (tools.Serve over pipes) the same way.
type wiring struct {
	getenv  func(string) string
	environ []string
	exe     string
	stderr  io.Writer
	// defaultLimits is --default-limits; "" takes AGENT_BOX_DEFAULT_LIMITS.
	defaultLimits string
}

func processWiring() (wiring, error) {
	exe, err := os.Executable()
	if err != nil {
		return wiring{}, fmt.Errorf("finding own executable: %w", err)
	}
	return wiring{getenv: os.Getenv, environ: os.Environ(), exe: exe, stderr: os.Stderr}, nil
}

func (w wiring) manager(stateDir string) (*runs.Manager, error) {
	if stateDir == "" {
		var err error
		if stateDir, err = runrecord.DefaultRoot(w.getenv); err != nil {
			return nil, err
		}
	}
	stateDir, err := filepath.Abs(stateDir)
	if err != nil {
		return nil, err
	}
	store, warning, err := runrecord.Open(stateDir)
	if err != nil {
		return nil, err
	}
	if warning != "" {
		fmt.Fprintf(w.stderr, "agent-box: %s\n", warning)
	}
	supervisorCmd := runs.SupervisorCommand(w.exe)
	sys, err := runs.NewLiveSystem(supervisor.InstalledWith(w.exe, supervisorCmd[0]))
	if err != nil {
		return nil, fmt.Errorf("reading the live system: %w", err)
	}
	// Probed once, at the first start: it may ask logind over D-Bus.
	launch := sync.OnceValue(func() string {
		mode, host := w.getenv("AGENT_BOX_LAUNCH"), live.ProbeHost()
		launch, reason := runs.ChooseLaunch(mode, host)
		if launch != runs.LaunchSetsid || runs.EndsWithSession(launch, host) || mode == runs.LaunchSystemd {
			fmt.Fprintf(w.stderr, "agent-box: supervisors: %s (%s)\n", launch, reason)
		}
		return launch
	})
	m := &runs.Manager{Store: store, Sys: sys, Supervisor: supervisorCmd, Launch: launch,
		Env: w.environ, Logf: logTo(w.stderr, "agent-box: ")}
	// Test knobs: a suite cannot wait 50 s to see a wait cut short, nor 5 s
	// of grace for every run whose timeout_s it tests.
	m.Waits.Unwatched = millis(w.getenv("AGENT_BOX_WAIT_UNWATCHED_MS"))
	m.Waits.ProgressEvery = millis(w.getenv("AGENT_BOX_PROGRESS_MS"))
	m.Waits.TimeoutGrace = millis(w.getenv("AGENT_BOX_TIMEOUT_GRACE_MS"))
	// A setting for users too (docs/architecture/README.md), and a Go
	// duration ("30s"), unlike the knobs above.
	if d, err := time.ParseDuration(w.getenv("AGENT_BOX_STDIN_WRITE_TIMEOUT")); err == nil && d > 0 {
		m.Waits.StdinWrite = d
	}
	if err := w.limits(m); err != nil {
		return nil, err
	}
	return m, nil
}

// limits sets m's default limits from --default-limits or the
// environment. Limits this box cannot enforce are said at once; each start
// is then refused with the reason, never run without them.
func (w wiring) limits(m *runs.Manager) error {
	what, v := "--default-limits", w.defaultLimits
	if v == "" {
		what, v = "AGENT_BOX_DEFAULT_LIMITS", w.getenv("AGENT_BOX_DEFAULT_LIMITS")
	}
	l, err := runs.ParseLimits(v)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if l.Zero() {
		return nil
	}
	m.DefaultLimits = &l
	if err := m.CheckEnforceable(l); err != nil {
		fmt.Fprintf(w.stderr, "agent-box: %s: every run will be refused: %v\n", what, err)
	}
	return nil
}

// logTo writes each message to w as a line of its own, after prefix.
func logTo(w io.Writer, prefix string) func(format string, args ...any) {
	return func(format string, args ...any) { fmt.Fprintf(w, prefix+format+"\n", args...) }
}

// millis reads a duration in milliseconds from a setting; unset or not a
// positive number means zero (the default).
func millis(v string) time.Duration {
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(n) * time.Millisecond
}

func serve(m *runs.Manager) int {
	out, err := protocolStdout()
	if err != nil {
		fmt.Fprintf(os.Stderr, "agent-box: %v\n", err)
		return 1
	}
	// A client that hangs up must not kill us mid-write; the write fails
	// and the session ends at stdin EOF.
	signal.Ignore(syscall.SIGPIPE, syscall.SIGHUP)

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	errLog := log.New(os.Stderr, "agent-box: ", log.LstdFlags)
	// A session that starts runs starts many: each after the first takes
	// a supervisor launched ahead (none is, before the first).
	defer m.KeepSpare()()
	if err := tools.Serve(ctx, &tools.Handlers{M: m}, version, os.Stdin, out, errLog); err != nil && !errors.Is(err, context.Canceled) {
		errLog.Printf("serve: %v", err)
		return 1
	}
	return 0
}

// protocolStdout moves the MCP stream off fd 1 and points fd 1 at stderr.
// A stray print (ours or a library's) then lands in the diagnostics instead
// of corrupting the protocol. Swapping os.Stdout alone is not enough: the
// *os.File for fd 1 would become garbage, its finalizer would close fd 1,
// and the next file opened (a run's lock or record) would get fd 1 and
// whatever a stray write to it.
func protocolStdout() (*os.File, error) {
	fd, err := unix.FcntlInt(1, unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return nil, fmt.Errorf("moving the protocol off stdout: %w", err)
	}
	if err := unix.Dup3(2, 1, 0); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("pointing stdout at stderr: %w", err)
	}
	return os.NewFile(uintptr(fd), "mcp-stdout"), nil
}
