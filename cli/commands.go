package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/agent-box/agent-box/session"
	"github.com/agent-box/agent-box/wire"
)

// Run executes args (args[0] is the subcommand) on box and returns the
// exit status.
func Run(box Box, args []string, stdout, stderr io.Writer) int {
	return (&cmd{box: box, in: os.Stdin, out: stdout, err: stderr}).run(args)
}

// Help prints the usage of command on stdout.
func Help(command string, stdout, stderr io.Writer) int {
	return (&cmd{out: stdout, err: stderr}).run([]string{command, "-h"})
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
	case "run":
		return c.runForeground(args[1:])
	case "attach":
		return c.attach(args[1:])
	}
	fmt.Fprintf(c.err, "agent-box: unknown command %q (commands: %s, doctor, version, help)\n", args[0], strings.Join(Commands, ", "))
	return ExitUsage
}

type cmd struct {
	box   Box
	in    *os.File  // stdin, for run -i and attach (a terminal, or not)
	out   io.Writer // stdout: the answer, and usage that was asked for
	err   io.Writer
	usage string // the subcommand's arguments, for its usage line
}

// fail reports err: a call the box refused as a bad argument is a usage
// error, anything else agent-box's own failure.
func (c *cmd) fail(err error) int {
	var te *session.ToolError
	if errors.As(err, &te) && te.Err.Message != "" {
		// The box's words alone: the tool's name means nothing here.
		fmt.Fprintf(c.err, "agent-box: %s\n", te.Err.Message)
	} else {
		fmt.Fprintf(c.err, "agent-box: %v\n", err)
	}
	if errors.As(err, &te) && te.Err.Code == wire.InvalidArgument {
		return ExitUsage
	}
	return ExitError
}

// call calls a tool on the box.
func (c *cmd) call(ctx context.Context, tool string, args map[string]any, out any) error {
	return c.box.Call(ctx, tool, args, out)
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

// help prints the subcommand's usage and flags to w.
func (c *cmd) help(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: agent-box %s %s\n", fs.Name(), c.usage)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// bad reports a usage error: one line saying what was wrong, then the
// usage, on stderr.
func (c *cmd) bad(fs *flag.FlagSet, format string, args ...any) int {
	fmt.Fprintf(c.err, "agent-box %s: %s\n", fs.Name(), fmt.Sprintf(format, args...))
	c.help(c.err, fs)
	return ExitUsage
}

// badFlags reports an error of parse; -h and --help are no error, and
// their answer goes to stdout (agent-box logs --help | less).
func (c *cmd) badFlags(fs *flag.FlagSet, err error) int {
	if errors.Is(err, flag.ErrHelp) {
		c.help(c.out, fs)
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

// interrupted is a context that ends at Ctrl-C or SIGTERM: a command that
// waits ends then, with ExitError.
func interrupted() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
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
	q := map[string]any{"all": *all}
	if len(pos) == 1 {
		q["name"] = pos[0]
	}
	ctx, stop := interrupted()
	defer stop()
	var list struct {
		Runs json.RawMessage `json:"runs"`
	}
	if err := c.call(ctx, "process_list", q, &list); err != nil {
		return c.fail(err)
	}
	if *asJSON {
		var b bytes.Buffer
		if err := json.Indent(&b, append(append([]byte(`{"runs":`), list.Runs...), '}'), "", "  "); err != nil {
			return c.fail(fmt.Errorf("the box's list of runs: %w", err))
		}
		b.WriteByte('\n')
		c.out.Write(readableJSON(b.Bytes()))
		return 0
	}
	var runs []run
	if err := json.Unmarshal(list.Runs, &runs); err != nil {
		return c.fail(fmt.Errorf("the box's list of runs: %w", err))
	}
	tw := tabwriter.NewWriter(c.out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tRUN ID\tSTATE\tPID\tMEM\tPEAK\tCPU\tSTARTED\tLOG\tCOMMAND")
	for _, r := range runs {
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
	stdout, stderr := c.out, c.err
	switch *stream {
	case "":
	case "stdout":
		stderr = io.Discard
	case "stderr":
		stdout, stderr = io.Discard, c.out
	default:
		return c.bad(fs, "--stream must be stdout or stderr, not %q", *stream)
	}
	ctx, stop := interrupted()
	defer stop()
	end, err := c.box.Follow(ctx, session.Follow{Name: name, RunID: *runID, Now: !*follow}, stdout, stderr)
	if err != nil {
		return c.fail(err)
	}
	if !*follow {
		return 0
	}
	return shellStatus(end.ExitCode, end.Signal)
}

func (c *cmd) start(args []string) int {
	fs := c.flags("start", "[--cwd DIR] [--framed] [--timeout S] [--limits L] NAME -- CMD [ARG...]")
	sf := addStartFlags(fs)
	framed := fs.Bool("framed", false, "keep stdout and stderr apart")
	pos, err := parse(fs, args)
	if err != nil {
		return c.badFlags(fs, err)
	}
	req, code, ok := c.startRequest(fs, sf, pos)
	if !ok {
		return code
	}
	if *framed {
		req["capture_mode"] = "framed"
	}
	ctx, stop := interrupted()
	defer stop()
	var res struct {
		Run run `json:"run"`
	}
	if err := c.call(ctx, "process_start", req, &res); err != nil {
		return c.fail(err)
	}
	r := res.Run
	fmt.Fprintf(c.out, "started %s run_id=%s pid=%d log=%s\n", visible(r.Name, 0), visible(r.RunID, 0), r.PID, visible(r.LogPath, 0))
	return 0
}

// parseLimits reads --limits: KEY=N pairs, comma-separated. What the keys
// and numbers may be, the box says.
func parseLimits(s string) (map[string]any, error) {
	limits := map[string]any{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not KEY=N", kv)
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("%s=%s: not a whole number", k, v)
		}
		limits[k] = n
	}
	return limits, nil
}

func (c *cmd) kill(args []string) int {
	fs := c.flags("kill", "[-s SIG] [--grace MS] NAME")
	sigName := fs.String("s", "TERM", "signal: "+strings.Join(signalNames, " "))
	grace := fs.Int64("grace", 0, "milliseconds before SIGKILL if the group is still alive")
	pos, err := parse(fs, args)
	if err != nil {
		return c.badFlags(fs, err)
	}
	name, code, ok := c.oneName(fs, pos)
	if !ok {
		return code
	}
	req := map[string]any{"name": name, "signal": strings.TrimPrefix(strings.ToUpper(*sigName), "SIG")}
	if *grace != 0 {
		req["grace_ms"] = *grace
	}
	ctx, stop := interrupted()
	defer stop()
	var res struct {
		Message string `json:"message"`
	}
	if err := c.call(ctx, "process_kill", req, &res); err != nil {
		return c.fail(err)
	}
	fmt.Fprintln(c.out, visible(res.Message, 0))
	return 0
}

// waitEnd is what process_wait answers about one run's end.
type waitEnd struct {
	Run          run    `json:"run"`
	WaitTimedOut bool   `json:"wait_timed_out"`
	DurationMS   *int64 `json:"duration_ms"`
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
	ctx, stop := interrupted()
	defer stop()
	res, err := c.waitFor(ctx, name)
	if err != nil {
		return c.fail(err)
	}
	duration := "duration unknown"
	if res.DurationMS != nil {
		duration = (time.Duration(*res.DurationMS) * time.Millisecond).String()
	}
	fmt.Fprintf(c.out, "%s %s: %s (%s)\n", visible(res.Run.Name, 0), visible(res.Run.RunID, 0), visible(stateWord(res.Run), 0), duration)
	fmt.Fprint(c.err, incomplete(res.Run))
	return shellStatus(res.Run.ExitCode, res.Run.Signal)
}

// waitFor waits for the end of the newest run of name, however long it
// takes: one process_wait after another, each as long as the box lets a
// call wait.
func (c *cmd) waitFor(ctx context.Context, name string) (waitEnd, error) {
	for {
		var res waitEnd
		if err := c.call(ctx, "process_wait", map[string]any{"name": name}, &res); err != nil {
			return res, err
		}
		if !res.WaitTimedOut {
			return res, nil
		}
	}
}

// readableJSON undoes the escapes of <, > and & that encoding/json writes
// for HTML: printed for people and scripts, a command's "a && b > c"
// stays readable. Every backslash in JSON text begins an escape, so an
// escape is read whole and only those three are undone.
func readableJSON(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			out = append(out, b[i])
			continue
		}
		if b[i+1] == 'u' && i+6 <= len(b) {
			switch strings.ToLower(string(b[i+2 : i+6])) {
			case "0026", "003c", "003e":
				r, _ := strconv.ParseUint(string(b[i+2:i+6]), 16, 8)
				out = append(out, byte(r))
				i += 5
				continue
			}
		}
		out = append(out, b[i], b[i+1])
		i++
	}
	return out
}
