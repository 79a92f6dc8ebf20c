// Command agent-box is an MCP server (on stdio) that runs long processes
// which outlive the connection, and a small CLI over the same runs.
//
//	ssh box -- agent-box          MCP server (stdin not a terminal)
//	agent-box ps|logs|start|kill|wait|doctor|version|help
//	agent-box install BOX             on the user's machine: copy agent-box to BOX
//	agent-box supervise NAME RUN_ID   internal: the per-run supervisor
package main

import (
	// For its init: until it has run, any process of the user can open
	// this one's descriptors and memory through /proc (package nodump
	// says when it runs).
	_ "github.com/agent-box/agent-box/internal/nodump"

	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/cli"
	"github.com/agent-box/agent-box/doctor"
	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
	"github.com/agent-box/agent-box/runs"
	"github.com/agent-box/agent-box/supervisor"
	"github.com/agent-box/agent-box/tools"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	// What our caller left open must not reach the supervisors and runs,
	// which outlive us (a caller waiting for EOF on it would hang).
	_ = proc.CloseOnExecFrom(3)
	if len(args) > 0 && args[0] == "supervise" {
		// Its stderr is the run dir's supervisor.log (supervisor.Launch).
		if err := supervisor.Main(supervisor.Config{Log: os.Stderr, Args: os.Args}); err != nil {
			fmt.Fprintf(os.Stderr, "agent-box supervise: %v\n", err)
			return 1
		}
		return 0
	}
	fs := flag.NewFlagSet("agent-box", flag.ContinueOnError)
	stateDir := fs.String("state-dir", "", "state directory (default $AGENT_BOX_STATE_DIR, $XDG_STATE_HOME/agent-box or ~/.local/state/agent-box)")
	defaultLimits := fs.String("default-limits", "", "caps for every run that sets none of its own, e.g. memory_mb=2048,cpu_percent=100,pids=512 (default $AGENT_BOX_DEFAULT_LIMITS)")
	fs.SetOutput(os.Stderr)
	fs.Usage = func() { usage(os.Stderr, fs) }
	// --state-dir is the one flag of every command: it may come before
	// the command or after it ("agent-box ps --state-dir D"), but not
	// after a "--", which starts a run's own command line.
	args, err := hoistStateDir(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "agent-box: %v\n", err)
		return cli.ExitUsage
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return cli.ExitUsage
	}
	rest := fs.Args()
	switch {
	case len(rest) > 0 && rest[0] == "version":
		return printVersion(rest[1:])
	case len(rest) > 0 && rest[0] == "help":
		return help(fs, rest[1:])
	case len(rest) > 0 && rest[0] == "doctor":
		return runDoctor(*stateDir, rest[1:])
	case len(rest) > 0 && rest[0] == "connect":
		return runConnect(rest[1:])
	case len(rest) > 0 && rest[0] == "install":
		return runInstall(rest[1:])
	case len(rest) == 0 && isTerminal(os.Stdin):
		usage(os.Stderr, fs)
		return cli.ExitUsage
	}
	w, err := processWiring()
	if err != nil {
		fmt.Fprintf(os.Stderr, "agent-box: %v\n", err)
		return 1
	}
	w.defaultLimits = *defaultLimits
	m, err := w.manager(*stateDir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "agent-box: %v\n", err)
		return 1
	}
	if len(rest) == 0 {
		return serve(m)
	}
	return runCLI(m, rest)
}

func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `agent-box: an MCP server (on stdin/stdout) that runs long processes which
outlive the connection, and a CLI over the same runs.

  ssh box -- agent-box                    serve MCP on stdio (what an MCP client runs)
  agent-box ps [-a] [--json]              list runs
  agent-box logs [-f] [--stream stdout|stderr] [--run-id ID] NAME
  agent-box start [--cwd DIR] [--framed] [--timeout S] [--limits L] NAME -- CMD [ARG...]
  agent-box kill [-s SIG] [--grace MS] NAME   signal every process of a run
  agent-box wait NAME                     wait for a run; exit with its status
  agent-box doctor [--json]               check this box: binaries, state dir, session, limits
  agent-box version [--json]
  agent-box install [-o OPTION] [--from DIR] BOX   on your machine: copy agent-box to BOX over ssh
  agent-box help [COMMAND]

flags (before or after the command):
`)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(os.Stderr)
}

// help prints the usage, or one command's, on stdout: asked for, it is
// the answer, not a diagnostic.
func help(fs *flag.FlagSet, args []string) int {
	switch {
	case len(args) == 0:
		usage(os.Stdout, fs)
		return 0
	case len(args) > 1:
		fmt.Fprintf(os.Stderr, "agent-box help: expected at most one COMMAND, got %d arguments\n", len(args))
		return cli.ExitUsage
	case args[0] == "install":
		return runInstall([]string{"-h"})
	case args[0] == "version" || args[0] == "help" || args[0] == "doctor":
		usage(os.Stdout, fs)
		return 0
	}
	return cli.Help(args[0], os.Stdout, os.Stderr)
}

// printVersion prints agent-box's version; with --json also what it was
// built from, for scripts (and doctor) to compare two binaries by.
func printVersion(args []string) int {
	asJSON, code, done := jsonFlagOnly("version", args)
	if done {
		return code
	}
	if !asJSON {
		fmt.Println("agent-box", version)
		return 0
	}
	b, _ := json.MarshalIndent(doctor.BuildOf(version), "", "  ")
	fmt.Println(string(b))
	return 0
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

// jsonFlagOnly parses the arguments of a command whose one flag is
// --json. done: the command is over, with status code (its help was
// asked for, or the arguments are wrong).
func jsonFlagOnly(command string, args []string) (asJSON bool, code int, done bool) {
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	j := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return false, 0, true
		}
		return false, cli.ExitUsage, true
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "agent-box %s: unexpected argument %q\n", command, fs.Arg(0))
		return false, cli.ExitUsage, true
	}
	return *j, 0, false
}

// hoistStateDir moves a --state-dir given after the command to the front,
// where the top-level flags are parsed. Arguments after "--" are a run's
// command line and stay as they are.
func hoistStateDir(args []string) ([]string, error) {
	var front, rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "state-dir" {
			rest = append(rest, a)
			continue
		}
		if !hasValue {
			// "--state-dir --" or "--state-dir -a" is a missing value,
			// not a directory of that name (--state-dir=-a says that).
			if i+1 >= len(args) || strings.HasPrefix(args[i+1], "-") {
				return nil, fmt.Errorf("%s needs a directory", a)
			}
			i++
			value = args[i]
		}
		front = append(front, "--state-dir="+value)
	}
	return append(front, rest...), nil
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
		mode, host := w.getenv("AGENT_BOX_LAUNCH"), runs.ProbeHost()
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
	// A session starts many runs: each takes a supervisor launched ahead.
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
