package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/agent-box/agent-box/cli"
	"github.com/agent-box/agent-box/session"
	"github.com/agent-box/agent-box/watch"
)

// Exit statuses of agent-box watch. A hook of Claude Code wakes the model
// on 2, so 2 means a report and nothing else: a bad command line is
// agent-box's own failure here (125), not cli.ExitUsage.
const (
	watchReported = 2
	watchFailed   = cli.ExitError
)

const watchUsage = `usage: agent-box watch [--box [NAME=]DEST | --exec [NAME=]'COMMAND']... [--boxes-file F] [--cursor-file F] [--no-wait] [--stdout] [--max-wait DURATION]

Waits until a run ends on any of the boxes that the cursor file has not
reported yet (also one that ended while no watch ran), prints one line per
ended run on stderr, advances the cursor file, and exits 2: the exit that
wakes Claude Code from an asyncRewake hook.

Exit status: 2 a report was printed; 0 nothing to report (--no-wait found
nothing, --max-wait passed, a newer watch took the cursor file over, or
SIGTERM, SIGINT or SIGHUP), or --stdout printed one; 125 agent-box's own
failure, a bad command line included (never 2, which would wake the model).

Boxes: every --box and --exec given, and those of --boxes-file; else
$AGENT_BOX_BOX; else this machine (Linux). Reports call a box by its NAME
if given one, else by its DEST or COMMAND. A box that cannot be reached is said once on stderr and
tried again; the others are watched meanwhile.

flags:
`

// runWatch is agent-box watch. The boxes given before the command
// (agent-box --box b watch) count as given to it.
func runWatch(stateDir, defaultLimits string, gave []given, boxesFile, remoteBin string, sshOpts multiFlag, args []string) int {
	fs := flag.NewFlagSet("agent-box watch", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var(boxFlag{&gave, "--box"}, "box", "a box to watch, over ssh: DEST or NAME=DEST (repeatable)")
	fs.Var(boxFlag{&gave, "--exec"}, "exec", "a box to watch, through a command whose stdin and stdout are its agent-box: 'COMMAND' or NAME='COMMAND' (repeatable)")
	fs.StringVar(&boxesFile, "boxes-file", boxesFile, "a TOML file of boxes to watch, one table [boxes.NAME] each (as connect's)")
	fs.Var(&sshOpts, "o", "with --box: an ssh option (as ssh -o)")
	fs.StringVar(&remoteBin, "remote-bin", remoteBin, "with --box: agent-box's path on the box")
	fs.StringVar(&stateDir, "state-dir", stateDir, "this machine's state directory, when it is the box watched")
	cursorFile := fs.String("cursor-file", "", "the cursor file (default $XDG_STATE_HOME/agent-box/watch-cursor.json or ~/.local/state/agent-box/watch-cursor.json)")
	noWait := fs.Bool("no-wait", false, "look once: exit 2 with a report if a run ended, else 0 (Codex's hooks)")
	toStdout := fs.Bool("stdout", false, "print the report on stdout and exit 0 (Codex's UserPromptSubmit adds stdout to the turn)")
	maxWait := fs.Duration("max-wait", 0, "give up after this long (e.g. 50m), with exit 0 and no output: end before the hook's timeout")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(os.Stdout, watchUsage)
			fs.SetOutput(os.Stdout)
			fs.PrintDefaults()
			return 0
		}
		fmt.Fprintf(os.Stderr, "agent-box watch: %v (agent-box watch --help; exit 125, not 2, which would wake the model)\n", err)
		return watchFailed
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "agent-box watch: unexpected argument %q (agent-box watch --help)\n", fs.Arg(0))
		return watchFailed
	}
	if *maxWait < 0 {
		fmt.Fprintln(os.Stderr, "agent-box watch: --max-wait must not be negative")
		return watchFailed
	}
	someBox := len(gave) > 0 || boxesFile != ""
	if stateDir != "" && someBox {
		fmt.Fprintln(os.Stderr, "agent-box watch: --state-dir is a directory of this machine; it does not go with --box, --exec or --boxes-file")
		return watchFailed
	}
	if !someBox && stateDir == "" {
		if env := os.Getenv("AGENT_BOX_BOX"); env != "" {
			gave = []given{{"$AGENT_BOX_BOX", env}}
		}
	}
	// A box given without a name keeps its DEST or command as its name,
	// under which the cursor file has kept its place.
	boxes, err := givenBoxes(gave, boxesFile, transport{remoteBin: remoteBin, sshOpts: sshOpts, getenv: os.Getenv}, ownNames)
	if err != nil {
		fmt.Fprintf(os.Stderr, "agent-box watch: %v\n", err)
		return watchFailed
	}
	if *cursorFile == "" {
		f, err := defaultCursorFile(os.Getenv)
		if err != nil {
			fmt.Fprintf(os.Stderr, "agent-box watch: %v\n", err)
			return watchFailed
		}
		*cursorFile = f
	}

	var tools []session.Tools
	var sessions []*session.Session
	defer func() { closeAll(sessions) }()
	for _, b := range boxes {
		s := session.Open(b, cliInit(), session.Options{})
		sessions = append(sessions, s)
		tools = append(tools, session.Tools{Caller: s, Box: b.Name})
	}
	if len(tools) == 0 {
		local, err := localWatchBox(stateDir, defaultLimits)
		if err != nil {
			fmt.Fprintf(os.Stderr, "agent-box watch: %v\n", err)
			return watchFailed
		}
		tools = append(tools, local)
	}

	// A reader gone (a hook's pipe closed) fails the report's write, and
	// the watch with 125, its cursor as it was; SIGPIPE would end it
	// without a word.
	signal.Ignore(syscall.SIGPIPE)
	// A signal ends the watch quietly: what it had not reported stays
	// unreported, for the next watch.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()
	if *maxWait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *maxWait)
		defer cancel()
	}
	o := watch.Options{Boxes: tools, CursorFile: *cursorFile, NoWait: *noWait, Report: os.Stderr, Diag: os.Stderr}
	if *toStdout {
		o.Report = os.Stdout
	}
	if ms, err := strconv.Atoi(os.Getenv("AGENT_BOX_WATCH_POLL_MS")); err == nil && ms > 0 {
		// A test knob: a suite cannot wait seconds for each look.
		o.Poll = time.Duration(ms) * time.Millisecond
		o.OwnerPoll, o.MinBackoff = o.Poll, o.Poll
	}
	outcome, err := watch.Run(ctx, o)
	switch {
	case err != nil:
		fmt.Fprintf(os.Stderr, "agent-box watch: %v\n", err)
		return watchFailed
	case outcome == watch.Reported && !*toStdout:
		return watchReported
	}
	return 0
}

// defaultCursorFile is $XDG_STATE_HOME/agent-box/watch-cursor.json, else
// ~/.local/state/agent-box/watch-cursor.json.
func defaultCursorFile(getenv func(string) string) (string, error) {
	if d := getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "agent-box", "watch-cursor.json"), nil
	}
	home := getenv("HOME")
	if home == "" {
		return "", errors.New("no $HOME for the cursor file: give --cursor-file")
	}
	return filepath.Join(home, ".local", "state", "agent-box", "watch-cursor.json"), nil
}

// closeAll ends the sessions, waiting a moment at most: a box finishes a
// wait in flight before its transport exits, and the watch's answer must
// not wait for that (the transport gets EOF either way when we exit).
func closeAll(sessions []*session.Session) {
	done := make(chan struct{})
	go func() {
		for _, s := range sessions {
			s.Close()
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Second):
	}
}
