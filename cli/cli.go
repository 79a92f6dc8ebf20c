//go:build linux

package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agent-box/agent-box/runs"
)

// Words name the CLI's commands in runs' messages ("agent-box ps shows
// the runs there are"); what only MCP can do is named as the MCP tool.
var Words = runs.Words{
	List:    "agent-box ps",
	ListAll: "agent-box ps -a",
	Kill:    "agent-box kill",
	Restart: "the MCP tool process_restart",
	Remove:  "the MCP tool process_remove",
	Args:    map[string]string{"grace_ms": "--grace", "timeout_s": "--timeout", "stream": "--stream"},
}

// Run executes args (args[0] is the subcommand) and returns the exit status.
// The messages of m name CLI commands from here on (Words).
func Run(m *runs.Manager, args []string, stdout, stderr io.Writer) int {
	m.Words = Words
	return (&cmd{m: m, out: stdout, err: stderr}).run(args)
}

// Help prints the usage of command on stdout.
func Help(command string, stdout, stderr io.Writer) int {
	return (&cmd{out: stdout, err: stdout, helpOnly: stderr}).run([]string{command, "-h"})
}

func (c *cmd) run(args []string) int {
	switch args[0] {
	case "ps":
		return c.ps(args[1:])
	case "logs":
		return c.logs(args[1:])
	case "start":
		return c.start(args[1:])
	case "kill":
		return c.kill(args[1:])
	case "wait":
		return c.wait(args[1:])
	}
	errOut := c.err
	if c.helpOnly != nil {
		errOut = c.helpOnly
	}
	fmt.Fprintf(errOut, "agent-box: unknown command %q (commands: %s, doctor, version, help)\n", args[0], strings.Join(Commands, ", "))
	return ExitUsage
}

type cmd struct {
	m     *runs.Manager // nil for Help, which never gets past the flags
	out   io.Writer
	err   io.Writer
	usage string // the subcommand's arguments, for its usage line
	// helpOnly is where Help says a command does not exist (its usage
	// goes to stdout, its errors do not).
	helpOnly io.Writer
}

func (c *cmd) fail(err error) int {
	fmt.Fprintf(c.err, "agent-box: %v\n", err)
	if errors.Is(err, runs.ErrInvalid) {
		return ExitUsage
	}
	return ExitError
}

// flags returns the subcommand's flag set. It prints nothing itself: every
// usage error goes through c.bad, which says on one line what was wrong.
func (c *cmd) flags(name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	c.usage = usage
	return fs
}

// help prints the subcommand's usage and flags on stderr.
func (c *cmd) help(fs *flag.FlagSet) {
	fmt.Fprintf(c.err, "usage: agent-box %s %s\n", fs.Name(), c.usage)
	fs.SetOutput(c.err)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// bad reports a usage error: one line saying what was wrong, then the
// usage.
func (c *cmd) bad(fs *flag.FlagSet, format string, args ...any) int {
	fmt.Fprintf(c.err, "agent-box %s: %s\n", fs.Name(), fmt.Sprintf(format, args...))
	c.help(fs)
	return ExitUsage
}

// badFlags reports an error of parse; -h and --help are no error.
func (c *cmd) badFlags(fs *flag.FlagSet, err error) int {
	if errors.Is(err, flag.ErrHelp) {
		c.help(fs)
		return 0
	}
	return c.bad(fs, "%v", err)
}

// oneName checks that the positional arguments are exactly one NAME.
func (c *cmd) oneName(fs *flag.FlagSet, pos []string) (string, int, bool) {
	switch len(pos) {
	case 0:
		return "", c.bad(fs, "missing NAME"), false
	case 1:
		return pos[0], 0, true
	}
	return "", c.bad(fs, "expected one NAME, got %d arguments: %s", len(pos), quoted(pos)), false
}

func quoted(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = fmt.Sprintf("%q", a)
	}
	return strings.Join(q, " ")
}

// parse parses flags that may come before or after the positional args.
// Everything after a "--" is positional, kept with the "--" in front (it
// is the command of "start").
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for i, a := range args {
		if a == "--" {
			args, rest = args[:i], args[i:]
			break
		}
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return append(pos, rest...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func (c *cmd) ps(args []string) int {
	fs := c.flags("ps", "[-a] [--json] [NAME]")
	all := fs.Bool("a", false, "include older runs of each name")
	asJSON := fs.Bool("json", false, "print JSON, as process_list's structured content")
	pos, err := parse(fs, args)
	if err != nil {
		return c.badFlags(fs, err)
	}
	if len(pos) > 1 {
		return c.bad(fs, "expected at most one NAME, got %d arguments: %s", len(pos), quoted(pos))
	}
	name := ""
	if len(pos) == 1 {
		name = pos[0]
	}
	list, err := c.m.List(name, *all)
	if err != nil {
		return c.fail(err)
	}
	if *asJSON {
		enc := json.NewEncoder(c.out)
		enc.SetIndent("", "  ")
		// Printed for people and scripts, not embedded in HTML: a
		// command's "a && b > c" stays readable.
		enc.SetEscapeHTML(false)
		if err := enc.Encode(map[string]any{"runs": list}); err != nil {
			return c.fail(err)
		}
		return 0
	}
	tw := tabwriter.NewWriter(c.out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tRUN ID\tSTATE\tPID\tMEM\tPEAK\tCPU\tSTARTED\tLOG\tCOMMAND")
	for _, r := range list {
		started := ""
		if r.StartedAt != nil {
			started = r.StartedAt.Local().Format("01-02 15:04:05")
		}
		command := commandOf(r)
		if r.Pty {
			command = fmt.Sprintf("[pty %dx%d] %s", r.Cols, r.Rows, command)
		}
		mem, peak, cpu := usageCells(r.Usage)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", visible(r.Name, 0), visible(r.RunID, 0), visible(stateWord(r), 0),
			r.PID, mem, peak, cpu, started, logSize(r), command)
	}
	tw.Flush()
	return 0
}

// usageCells are ps's MEM (resident now), PEAK and CPU: "-" for what is
// not known, as for a run that is not running (MEM) or whose usage was
// not recorded.
func usageCells(u *runs.Usage) (mem, peak, cpu string) {
	mem, peak, cpu = "-", "-", "-"
	if u == nil {
		return
	}
	if u.From != runs.UsageAtExit {
		mem = size(u.MemoryBytes)
	}
	if u.PeakMemoryBytes > 0 {
		peak = size(u.PeakMemoryBytes)
	}
	return mem, peak, u.CPU()
}

// logSize is the log's size, and what of the output it lacks.
func logSize(r runs.Run) string {
	s := size(r.LogBytes)
	if r.LogDropped > 0 {
		s += " +" + size(r.LogDropped) + " dropped"
	}
	if r.LogCapped {
		s += " (capped)"
	}
	return s
}

// incomplete says what a run's log lacks, for stderr; "" when it is whole.
func incomplete(r runs.Run) string {
	if r.LogDropped == 0 && r.LogError == "" {
		return ""
	}
	why := "the cap"
	if r.LogError != "" {
		why = visible(r.LogError, 200)
	}
	return fmt.Sprintf("agent-box: log of run %s is incomplete: %d bytes of output were not written (%s)\n", visible(r.RunID, 0), r.LogDropped, why)
}

func stateWord(r runs.Run) string {
	switch {
	case r.Signal != "":
		return "exited(" + r.Signal + ")"
	case r.ExitCode != nil:
		return fmt.Sprintf("exited(%d)", *r.ExitCode)
	case string(r.State) != r.Reason && r.Reason != "":
		return string(r.State) + ": " + r.Reason
	}
	return string(r.State)
}

// commandWidth is where ps cuts a command, in characters.
const commandWidth = 60

func commandOf(r runs.Run) string {
	var s string
	if len(r.Argv) > 0 {
		s = strings.Join(r.Argv, " ")
	} else {
		s = r.Command
	}
	return visible(s, commandWidth)
}

// visible makes s safe to print on a terminal as one cell of a row: every
// character that is not printable is escaped — \n, \r, \t; other C0
// controls and DEL as \x1b; C1 controls and other non-printing characters
// (format characters such as bidi overrides, non-ASCII spaces) as \u009b;
// each byte of invalid UTF-8 as \xff. So a record's field can neither move
// the cursor, nor clear or recolour the screen, nor fake another row.
//
// With limit > 0, a longer result is cut to limit characters, the last
// three being "...", and never inside an escape or a character.
func visible(s string, limit int) string {
	var b strings.Builder
	chars := 0 // characters in b
	cut, cutAt := false, 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		var tok string
		switch {
		case r == utf8.RuneError && size == 1:
			tok = fmt.Sprintf(`\x%02x`, s[i])
		case r == '\n':
			tok = `\n`
		case r == '\r':
			tok = `\r`
		case r == '\t':
			tok = `\t`
		case r < utf8.RuneSelf && (r < 0x20 || r == 0x7f):
			tok = fmt.Sprintf(`\x%02x`, r)
		case r == ' ' || unicode.IsPrint(r):
			tok = s[i : i+size]
		case r <= 0xffff:
			tok = fmt.Sprintf(`\u%04x`, r)
		default:
			tok = fmt.Sprintf(`\U%08x`, r)
		}
		i += size
		n := utf8.RuneCountInString(tok)
		if limit > 0 && !cut && chars+n > limit-3 {
			cut, cutAt = true, b.Len() // where "..." goes if s is too long
		}
		b.WriteString(tok)
		chars += n
		if limit > 0 && chars > limit {
			return b.String()[:cutAt] + "..."
		}
	}
	return b.String()
}

func size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fG", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1fM", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fK", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}

// status is the CLI's exit status for a finished run: its exit code, or
// 128+N for a signal, as a shell reports it.
func status(r runs.Run) int {
	if code, ok := r.ShellStatus(); ok {
		return code
	}
	return ExitError
}

func (c *cmd) logs(args []string) int {
	fs := c.flags("logs", "[-f] [--stream stdout|stderr] [--run-id ID] NAME")
	follow := fs.Bool("f", false, "follow until the run ends, then exit with its status")
	stream := fs.String("stream", "", "framed runs: only stdout or stderr")
	runID := fs.String("run-id", "", "an older run of NAME")
	pos, err := parse(fs, args)
	if err != nil {
		return c.badFlags(fs, err)
	}
	name, code, ok := c.oneName(fs, pos)
	if !ok {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	wait := time.Duration(0)
	if *follow {
		wait = 10 * time.Second
	}
	var last runs.FollowChunk
	for ch, err := range c.m.Follow(ctx, runs.FollowRequest{Name: name, RunID: *runID, Stream: *stream, Wait: wait}) {
		if err != nil {
			return c.fail(err)
		}
		c.out.Write(ch.Output)
		if ch.Cut > 0 {
			// A crash or a full disk cut the last frame.
			fmt.Fprintf(c.err, "agent-box: log of run %s ends with %d bytes of a cut frame, left out\n", ch.Run.RunID, ch.Cut)
		}
		if ch.EOF {
			fmt.Fprint(c.err, incomplete(ch.Run))
		}
		last = ch
	}
	if *follow {
		return status(last.Run)
	}
	return 0
}

func (c *cmd) start(args []string) int {
	fs := c.flags("start", "[--cwd DIR] [--framed] [--timeout S] [--limits L] NAME -- CMD [ARG...]")
	cwd := fs.String("cwd", "", "working directory (default: the current one)")
	framed := fs.Bool("framed", false, "keep stdout and stderr apart")
	timeout := fs.Int("timeout", 0, "kill the run after this many seconds")
	limitsFlag := fs.String("limits", "", "caps, e.g. memory_mb=512,cpu_percent=50,pids=100")
	pos, err := parse(fs, args)
	if err != nil {
		return c.badFlags(fs, err)
	}
	var limits *runs.Limits
	if *limitsFlag != "" {
		l, err := runs.ParseLimits(*limitsFlag)
		if err != nil {
			return c.bad(fs, "--limits: %v", err)
		}
		limits = &l
	}
	switch {
	case len(pos) == 0:
		return c.bad(fs, "missing NAME and -- CMD")
	case pos[0] == "--":
		return c.bad(fs, "missing NAME before --")
	case len(pos) == 1:
		return c.bad(fs, "missing -- CMD after NAME %q", pos[0])
	case pos[1] != "--":
		return c.bad(fs, "expected -- after NAME %q, got %q (the command goes after --)", pos[0], pos[1])
	case len(pos) == 2:
		return c.bad(fs, "missing the command after --")
	}
	if *cwd == "" {
		*cwd, _ = os.Getwd()
	}
	mode := "combined"
	if *framed {
		mode = "framed"
	}
	r, err := c.m.Start(context.Background(), runs.StartRequest{Name: pos[0], Spec: runs.Spec{Argv: pos[2:], Cwd: *cwd, CaptureMode: mode, TimeoutS: *timeout, Limits: limits}})
	if err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(c.out, "started %s run_id=%s pid=%d log=%s\n", r.Run.Name, r.Run.RunID, r.Run.PID, r.Run.LogPath)
	return 0
}

func (c *cmd) kill(args []string) int {
	fs := c.flags("kill", "[-s SIG] [--grace MS] NAME")
	sigName := fs.String("s", "TERM", "signal: "+strings.Join(runs.SignalNames, " "))
	grace := fs.Int64("grace", 0, "milliseconds before SIGKILL if the group is still alive")
	pos, err := parse(fs, args)
	if err != nil {
		return c.badFlags(fs, err)
	}
	name, code, ok := c.oneName(fs, pos)
	if !ok {
		return code
	}
	sig, err := runs.ParseSignal(*sigName)
	if err != nil {
		return c.fail(err)
	}
	res, err := c.m.Kill(name, "", sig, runs.Duration(*grace, time.Millisecond))
	if err != nil {
		return c.fail(err)
	}
	fmt.Fprintln(c.out, res.Message)
	return 0
}

func (c *cmd) wait(args []string) int {
	fs := c.flags("wait", "NAME")
	pos, err := parse(fs, args)
	if err != nil {
		return c.badFlags(fs, err)
	}
	name, code, ok := c.oneName(fs, pos)
	if !ok {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for {
		// Nobody's request timeout to fit: wait as long as a call may.
		max := runs.MaxWaitTimeout
		res, err := c.m.Wait(ctx, runs.WaitRequest{Names: []string{name}, Timeout: &max, Watched: true})
		if err != nil {
			return c.fail(err)
		}
		if ctx.Err() != nil {
			return ExitError
		}
		if !res.WaitTimedOut {
			duration := "duration unknown"
			if res.DurationKnown {
				duration = res.Duration.Round(time.Millisecond).String()
			}
			fmt.Fprintf(c.out, "%s %s: %s (%s)\n", visible(res.Run.Name, 0), visible(res.Run.RunID, 0), visible(stateWord(res.Run), 0), duration)
			fmt.Fprint(c.err, incomplete(res.Run))
			return status(res.Run)
		}
	}
}
