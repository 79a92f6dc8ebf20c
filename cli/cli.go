// Package cli is agent-box's command line for people: ps, logs, start,
// kill, wait. It reads and changes the same runs through package runs as the
// MCP tools do; there is no second implementation.
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

	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/logread"
	"github.com/agent-box/agent-box/runs"
)

// Exit statuses of the CLI itself, besides a run's own status.
const (
	ExitError = 1 // the operation failed
	ExitUsage = 2 // bad command line
)

// Commands lists the subcommands Run knows.
var Commands = []string{"ps", "logs", "start", "kill", "wait"}

// Run executes args (args[0] is the subcommand) and returns the exit status.
func Run(m *runs.Manager, args []string, stdout, stderr io.Writer) int {
	c := &cmd{m: m, out: stdout, err: stderr}
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
	fmt.Fprintf(stderr, "agent-box: unknown command %q (commands: %s, version)\n", args[0], strings.Join(Commands, ", "))
	return ExitUsage
}

type cmd struct {
	m   *runs.Manager
	out io.Writer
	err io.Writer
}

func (c *cmd) fail(err error) int {
	fmt.Fprintf(c.err, "agent-box: %v\n", err)
	if errors.Is(err, runs.ErrInvalid) {
		return ExitUsage
	}
	return ExitError
}

func (c *cmd) flags(name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(c.err)
	fs.Usage = func() {
		fmt.Fprintf(c.err, "usage: agent-box %s %s\n", name, usage)
		fs.PrintDefaults()
	}
	return fs
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
	if err != nil || len(pos) > 1 {
		return ExitUsage
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
		if err := enc.Encode(map[string]any{"runs": list}); err != nil {
			return c.fail(err)
		}
		return 0
	}
	tw := tabwriter.NewWriter(c.out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tRUN ID\tSTATE\tPID\tSTARTED\tLOG\tCOMMAND")
	for _, r := range list {
		started := ""
		if r.StartedAt != nil {
			started = r.StartedAt.Local().Format("01-02 15:04:05")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.Name, r.RunID, stateWord(r), r.PID, started, size(r.LogBytes), commandOf(r))
	}
	tw.Flush()
	return 0
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

func commandOf(r runs.Run) string {
	var s string
	if len(r.Argv) > 0 {
		s = strings.Join(r.Argv, " ")
	} else {
		s = r.Command
	}
	// One line a run: a newline in a command must not fake another row.
	s = strings.NewReplacer("\n", `\n`, "\r", `\r`, "\t", `\t`).Replace(s)
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
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
	if r.ExitCode != nil {
		return *r.ExitCode
	}
	if r.Signal != "" {
		if sig := unix.SignalNum(r.Signal); sig != 0 {
			return 128 + int(sig)
		}
		return 128
	}
	return ExitError
}

func (c *cmd) logs(args []string) int {
	fs := c.flags("logs", "[-f] [--stream stdout|stderr] [--run-id ID] NAME")
	follow := fs.Bool("f", false, "follow until the run ends, then exit with its status")
	stream := fs.String("stream", "", "framed runs: only stdout or stderr")
	runID := fs.String("run-id", "", "an older run of NAME")
	pos, err := parse(fs, args)
	if err != nil || len(pos) != 1 {
		fs.Usage()
		return ExitUsage
	}
	if *stream != "" && *stream != "stdout" && *stream != "stderr" {
		return c.fail(fmt.Errorf("%w: --stream must be stdout or stderr", runs.ErrInvalid))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	off := int64(0)
	for {
		wait := time.Duration(0)
		if *follow {
			wait = 10 * time.Second
		}
		res, err := c.m.Tail(ctx, runs.TailRequest{Name: pos[0], RunID: *runID, Wait: wait,
			Request: logread.Request{Offset: off, MaxBytes: logread.MaxWindow, Exact: true}})
		if err != nil {
			return c.fail(err)
		}
		if *stream != "" && res.Run.CaptureMode != "framed" {
			return c.fail(fmt.Errorf("%w: run %s is %s; --stream needs a framed run", runs.ErrInvalid, res.Run.RunID, res.Run.CaptureMode))
		}
		w := res.Window
		switch {
		case res.Run.CaptureMode != "framed":
			c.out.Write(w.Bytes)
		case *stream == "stdout":
			c.out.Write(w.StdoutBytes)
		case *stream == "stderr":
			c.out.Write(w.StderrBytes)
		default:
			for _, ch := range w.Chunks {
				io.WriteString(c.out, ch.Text)
			}
		}
		*runID = res.Run.RunID
		off = w.EndOffset
		if res.EOF || ctx.Err() != nil {
			if *follow {
				return status(res.Run)
			}
			return 0
		}
		if !*follow && !w.Truncated {
			return 0
		}
	}
}

func (c *cmd) start(args []string) int {
	fs := c.flags("start", "[--cwd DIR] [--framed] [--timeout S] NAME -- CMD [ARG...]")
	cwd := fs.String("cwd", "", "working directory (default: the current one)")
	framed := fs.Bool("framed", false, "keep stdout and stderr apart")
	timeout := fs.Int("timeout", 0, "kill the run after this many seconds")
	pos, err := parse(fs, args)
	if err != nil {
		return ExitUsage
	}
	if len(pos) < 3 || pos[1] != "--" {
		fs.Usage()
		return ExitUsage
	}
	if *cwd == "" {
		*cwd, _ = os.Getwd()
	}
	mode := "combined"
	if *framed {
		mode = "framed"
	}
	r, err := c.m.Start(context.Background(), runs.StartRequest{Name: pos[0], Argv: pos[2:], Cwd: *cwd, CaptureMode: mode, TimeoutS: *timeout})
	if err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(c.out, "started %s run_id=%s pid=%d log=%s\n", r.Name, r.RunID, r.PID, r.LogPath)
	return 0
}

func (c *cmd) kill(args []string) int {
	fs := c.flags("kill", "[-s SIG] [--grace MS] NAME")
	sigName := fs.String("s", "TERM", "signal: "+strings.Join(runs.SignalNames, " "))
	grace := fs.Int("grace", 0, "milliseconds before SIGKILL if the group is still alive")
	pos, err := parse(fs, args)
	if err != nil || len(pos) != 1 {
		fs.Usage()
		return ExitUsage
	}
	sig, err := runs.ParseSignal(*sigName)
	if err != nil {
		return c.fail(err)
	}
	res, err := c.m.Kill(pos[0], "", sig, time.Duration(*grace)*time.Millisecond)
	if err != nil {
		return c.fail(err)
	}
	fmt.Fprintln(c.out, res.Message)
	return 0
}

func (c *cmd) wait(args []string) int {
	fs := c.flags("wait", "NAME")
	pos, err := parse(fs, args)
	if err != nil || len(pos) != 1 {
		fs.Usage()
		return ExitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for {
		res, err := c.m.Wait(ctx, pos[0], "", runs.MaxWaitTimeout, nil)
		if err != nil {
			return c.fail(err)
		}
		if ctx.Err() != nil {
			return ExitError
		}
		if !res.TimedOut {
			fmt.Fprintf(c.out, "%s %s: %s (%s)\n", res.Run.Name, res.Run.RunID, stateWord(res.Run), res.Duration.Round(time.Millisecond))
			return status(res.Run)
		}
	}
}
