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

	"github.com/agent-box/agent-box/session"
	"github.com/agent-box/agent-box/wire"
)

// Run executes args (args[0] is the subcommand) on box and returns the
// exit status.
func Run(box Box, args []string, stdin *os.File, stdout, stderr io.Writer) int {
	return (&cmd{box: box, in: stdin, out: stdout, err: stderr}).run(args)
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
	case "stop":
		return c.stop(args[1:])
	case "rm":
		return c.rm(args[1:])
	case "restart":
		return c.restart(args[1:])
	case "write":
		return c.write(args[1:])
	}
	fmt.Fprintf(c.err, "agent-box: unknown command %q (commands: %s, doctor, version, help)\n", args[0], strings.Join(Commands, ", "))
	return ExitUsage
}

type cmd struct {
	box   Box
	ctx   context.Context // the command's, once it has one (interrupted)
	in    *os.File        // stdin: input for write, run -i and attach (a terminal, or not)
	out   io.Writer       // stdout: the answer, and usage that was asked for
	err   io.Writer
	usage string // the subcommand's arguments, for its usage line
}

// input is the command's stdin (none: empty).
func (c *cmd) input() io.Reader {
	if c.in == nil {
		return strings.NewReader("")
	}
	return c.in
}

// fail reports err: a call the box refused as a bad argument is a usage
// error, anything else agent-box's own failure.
func (c *cmd) fail(err error) int {
	var i interruption
	if c.ctx != nil && errors.As(context.Cause(c.ctx), &i) {
		return 128 + int(i.sig)
	}
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

// nameArg parses the flags of a command whose one argument is NAME. ok
// false: the command is over, with status code (its help was asked for,
// or the arguments are wrong).
func (c *cmd) nameArg(fs *flag.FlagSet, args []string) (name string, code int, ok bool) {
	pos, err := parse(fs, args)
	if err != nil {
		return "", c.badFlags(fs, err), false
	}
	return c.oneName(fs, pos)
}

// oneName checks that the positional arguments are exactly one NAME.
func (c *cmd) oneName(fs *flag.FlagSet, pos []string) (string, int, bool) {
	switch len(pos) {
	case 0:
		return "", c.bad(fs, "missing NAME"), false
	case 1:
		return c.runOn(pos[0]), 0, true
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

// interrupted is a context that ends at Ctrl-C or SIGTERM. A command
// that ends so exits as a shell reports a command that signal killed
// (130, 143), saying nothing more (fail).
func (c *cmd) interrupted() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(context.Background())
	c.ctx = ctx
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case s := <-ch:
			cancel(interruption{s.(syscall.Signal)})
		case <-ctx.Done():
		}
	}()
	return ctx, func() { signal.Stop(ch); cancel(nil) }
}

// interruption is the cause of a command's end by a signal.
type interruption struct{ sig syscall.Signal }

func (i interruption) Error() string { return "interrupted by " + i.sig.String() }

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
		q["name"] = c.runOn(pos[0])
	}
	ctx, stop := c.interrupted()
	defer stop()
	var list struct {
		Runs json.RawMessage `json:"runs"`
		// A fleet's boxes that did not answer (package fleet).
		Unreachable []struct {
			Box    string `json:"box"`
			Reason string `json:"reason"`
		} `json:"unreachable"`
	}
	if err := c.call(ctx, "process_list", q, &list); err != nil {
		return c.fail(err)
	}
	// The boxes that answered are listed; those that did not are said,
	// and fail ps only when none answered.
	for _, u := range list.Unreachable {
		fmt.Fprintf(c.err, "agent-box: box %s unreachable: %s\n", visible(u.Box, 0), visible(u.Reason, 0))
	}
	status := 0
	if len(c.box.Boxes) > 0 && len(list.Unreachable) >= len(c.box.Boxes) {
		status = ExitError
	}
	if *asJSON {
		var b bytes.Buffer
		if err := json.Indent(&b, append(append([]byte(`{"runs":`), list.Runs...), '}'), "", "  "); err != nil {
			return c.fail(fmt.Errorf("the box's list of runs: %w", err))
		}
		b.WriteByte('\n')
		c.out.Write(readableJSON(b.Bytes()))
		return status
	}
	var runs []run
	if err := json.Unmarshal(list.Runs, &runs); err != nil {
		return c.fail(fmt.Errorf("the box's list of runs: %w", err))
	}
	tw := tabwriter.NewWriter(c.out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BOX\tNAME\tRUN ID\tSTATE\tPID\tMEM\tPEAK\tCPU\tLIMITS\tSTARTED\tLOG\tCOMMAND")
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
		box := r.Box
		if box == "" {
			box = c.box.Box
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", visible(box, 0), visible(r.Name, 0), visible(r.RunID, 0), visible(stateWord(r), 0),
			r.PID, mem, peak, cpu, limitsCell(r), started, logSize(r), command)
	}
	tw.Flush()
	return status
}

func (c *cmd) logs(args []string) int {
	fs := c.flags("logs", "[-f] [-n N] [--stream stdout|stderr] [--run-id ID] NAME")
	follow := fs.Bool("f", false, "follow until the run ends, then exit with its status")
	lines := fs.Int("n", -1, "only the last N lines (then, with -f, what follows); at most a window of 1 MiB")
	stream := fs.String("stream", "", "framed runs: only stdout or stderr")
	runID := fs.String("run-id", "", "an older run of NAME")
	name, code, ok := c.nameArg(fs, args)
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
	if *lines < -1 {
		return c.bad(fs, "-n %d: the number of lines is 0 or more", *lines)
	}
	ctx, stop := c.interrupted()
	defer stop()
	from := int64(0)
	if *lines >= 0 {
		// The follow reads the run these lines are of, whatever starts
		// under the name meanwhile.
		var err error
		if *runID, from, err = c.lastLines(ctx, name, *runID, *lines); err != nil {
			return c.fail(err)
		}
	}
	end, err := c.box.Follow(ctx, session.Follow{Name: name, RunID: *runID, Offset: from, Now: !*follow}, stdout, stderr)
	if err != nil {
		return c.fail(err)
	}
	if !*follow {
		return 0
	}
	return shellStatus(end.ExitCode, end.Signal)
}

func (c *cmd) start(args []string) int {
	fs := c.flags("start", "[--cwd DIR] [--framed] [-i] [--pty] [--timeout S] [--limits L] NAME -- CMD [ARG...]")
	sf := addStartFlags(fs)
	framed := fs.Bool("framed", false, "keep stdout and stderr apart")
	stdin := fs.Bool("i", false, "keep stdin open, for agent-box write and attach")
	pty := fs.Bool("pty", false, "run on a terminal (its input: agent-box write and attach)")
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
	if *stdin {
		req["stdin"] = "pipe"
	}
	if *pty {
		req["pty"] = true
	}
	ctx, stop := c.interrupted()
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

// lastLines is where the last n lines of a run's log begin (n 0: its
// end), and the run's id (runID "": the newest of name). The box counts
// them: in a framed log, from the start of the frame that holds the first.
func (c *cmd) lastLines(ctx context.Context, name, runID string, n int) (string, int64, error) {
	q := map[string]any{"name": name, "tail_lines": max(n, 1), "encoding": "base64", "max_bytes": maxWindow}
	if runID != "" {
		q["run_id"] = runID
	}
	var w struct {
		RunID     string `json:"run_id"`
		Offset    int64  `json:"offset"`
		EndOffset int64  `json:"end_offset"`
	}
	if err := c.call(ctx, "tail_log", q, &w); err != nil {
		return "", 0, err
	}
	if n == 0 {
		return w.RunID, w.EndOffset, nil
	}
	return w.RunID, w.Offset, nil
}

// maxWindow is the most a tail_log answer holds (logread's MaxWindow).
const maxWindow = 1 << 20

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
	name, code, ok := c.nameArg(fs, args)
	if !ok {
		return code
	}
	req := map[string]any{"name": name, "signal": strings.TrimPrefix(strings.ToUpper(*sigName), "SIG")}
	if *grace != 0 {
		req["grace_ms"] = *grace
	}
	ctx, stop := c.interrupted()
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
	name, code, ok := c.nameArg(fs, args)
	if !ok {
		return code
	}
	ctx, stop := c.interrupted()
	defer stop()
	res, err := c.waitFor(ctx, name)
	if err != nil {
		return c.fail(err)
	}
	c.printEnd(res)
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
