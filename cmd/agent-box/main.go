// Command agent-box is an MCP server (on stdio) that runs long processes
// which outlive the connection, and a small CLI over the same runs.
//
//	ssh box -- agent-box          MCP server (stdin not a terminal)
//	agent-box ps|logs|start|kill|wait|doctor|version|help
//	agent-box install BOX             on the user's machine: copy agent-box to BOX
//	agent-box supervise NAME RUN_ID   internal: the per-run supervisor
//	agent-box connect|install         the local side, on the user's machine
//
// The box side (the server, the CLI over runs, doctor, supervise) runs
// only on Linux and is wired in box_linux.go. This file and the local side
// build on every system (macOS laptops run connect and install); elsewhere
// box_other.go answers the box's commands with an error.
package main

import (
	// For its init: until it has run, any process of the user can open
	// this one's descriptors and memory through /proc (package nodump
	// says when it runs).
	_ "github.com/agent-box/agent-box/internal/nodump"

	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/agent-box/agent-box/cli"
	"github.com/agent-box/agent-box/doctor"
	"github.com/agent-box/agent-box/session"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	closeInherited()
	if len(args) > 0 && args[0] == "supervise" {
		return supervise()
	}
	fs := flag.NewFlagSet("agent-box", flag.ContinueOnError)
	stateDir := fs.String("state-dir", "", "state directory (default $AGENT_BOX_STATE_DIR, $XDG_STATE_HOME/agent-box or ~/.local/state/agent-box)")
	defaultLimits := fs.String("default-limits", "", "caps for every run that sets none of its own, e.g. memory_mb=2048,cpu_percent=100,pids=512 (default $AGENT_BOX_DEFAULT_LIMITS)")
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var gave []given
	fs.Var(boxFlag{&gave, "--box"}, "box", "the box to act on, over ssh: DEST, or NAME=DEST with several boxes (repeatable; default $AGENT_BOX_BOX; none: this machine)")
	fs.Var(boxFlag{&gave, "--exec"}, "exec", "the box to act on, through a command whose stdin and stdout are its agent-box: 'COMMAND', or NAME='COMMAND' with several boxes (repeatable)")
	boxesFile := fs.String("boxes-file", "", "a TOML file of boxes to act on, one table [boxes.NAME] each (as connect's)")
	remoteBin := fs.String("remote-bin", session.DefaultRemoteBin, "with --box: agent-box's path on the box (relative to the home directory)")
	var sshOpts multiFlag
	fs.Var(&sshOpts, "o", "with --box: an ssh option (as ssh -o), over ~/.ssh/config's")
	// The global flags may come before the command or after it
	// ("agent-box ps --state-dir D"), but not after a "--", which starts
	// a run's own command line.
	// A hook runs watch, and status 2 wakes the model: a wrong flag before
	// it is agent-box's own failure there, as one after it is.
	badUsage := cli.ExitUsage
	if commandWord(args) == "watch" {
		badUsage = watchFailed
	}
	args, err := hoistGlobals(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "agent-box: %v\n", err)
		return badUsage
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			// Asked for, the usage is the answer: agent-box --help | less.
			usage(os.Stdout, fs)
			return 0
		}
		fmt.Fprintf(os.Stderr, "agent-box: %v\n", err)
		if badUsage == cli.ExitUsage {
			usage(os.Stderr, fs)
		}
		return badUsage
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
	case len(rest) > 0 && rest[0] == "watch":
		return runWatch(*stateDir, *defaultLimits, gave, *boxesFile, *remoteBin, sshOpts, rest[1:])
	case len(rest) == 0 && (len(gave) > 0 || *boxesFile != ""):
		// Served here, the box named would be ignored.
		fmt.Fprintln(os.Stderr, "agent-box: --box, --exec and --boxes-file go with a command (agent-box --box DEST ps); agent-box connect DEST is the MCP server of a box")
		return cli.ExitUsage
	case len(rest) == 0 && isTerminal(os.Stdin):
		usage(os.Stderr, fs)
		return cli.ExitUsage
	}
	if len(rest) > 0 && slices.Contains(cli.Commands, rest[0]) {
		if len(gave) == 0 && *boxesFile == "" && *stateDir == "" {
			if env := os.Getenv("AGENT_BOX_BOX"); env != "" {
				gave = []given{{"$AGENT_BOX_BOX", env}}
			}
		}
		switch {
		case *stateDir != "" && (len(gave) > 0 || *boxesFile != ""):
			fmt.Fprintln(os.Stderr, "agent-box: --state-dir is a directory of this machine; it does not go with --box, --exec or --boxes-file")
			return cli.ExitUsage
		case len(gave) > 0 || *boxesFile != "":
			boxes, err := givenBoxes(gave, *boxesFile, transport{remoteBin: *remoteBin, sshOpts: sshOpts, getenv: os.Getenv}, fleetNames)
			if err != nil {
				fmt.Fprintf(os.Stderr, "agent-box: %v\n", err)
				return cli.ExitUsage
			}
			return remote(boxes, rest)
		}
	}
	return box(*stateDir, *defaultLimits, rest)
}

func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `agent-box: an MCP server (on stdin/stdout) that runs long processes which
outlive the connection, and a CLI over the same runs, on this box or any other.

  agent-box connect DEST                  on your machine: the MCP server your client runs;
  agent-box connect --exec 'COMMAND'      reaches the box over ssh or COMMAND, survives drops
  agent-box connect NAME=DEST... --exec NAME='COMMAND'... [--boxes-file F]   several boxes, one tool list
  agent-box install DEST                  put agent-box on a box over ssh (no Go needed there)
  ssh box -- agent-box                    serve MCP on stdio (what connect runs on the box)

  agent-box [--box DEST | --exec 'COMMAND'] COMMAND ...   the runs of another box ($AGENT_BOX_BOX)
  agent-box [--box NAME=DEST | --exec NAME='COMMAND']... [--boxes-file F] COMMAND ...
                                          the runs of several boxes: a run is NAME, or NAME@BOX
  agent-box ps [-a] [--json]              list runs
  agent-box logs [-f] [-n N] [--stream stdout|stderr] [--run-id ID] NAME
  agent-box start [--cwd DIR] [--framed] [-i] [--pty] [--timeout S] [--limits L] NAME -- CMD [ARG...]
  agent-box kill [-s SIG] [--grace MS] NAME   signal every process of a run
  agent-box stop [-t SECONDS] NAME        SIGTERM, then SIGKILL; back when it has ended
  agent-box wait NAME                     wait for a run; exit with its status
  agent-box run [--cwd DIR] [--timeout S] [--limits L] [-i] NAME -- CMD [ARG...]
  agent-box attach [--detach-keys KEYS] [--no-stdin] [-n N] NAME
  agent-box write [-n] [--eof] NAME [TEXT...]   input for a run started with -i or --pty
  agent-box restart NAME                  stop a run and start its command again
  agent-box rm [-a] NAME                  forget a finished run and its log
  agent-box doctor [--json]               check this box: binaries, state dir, session, limits
  agent-box version [--json]
  agent-box install [-o OPTION] [--from DIR] BOX   on your machine: copy agent-box to BOX over ssh
  agent-box watch [--box DEST|--exec CMD]... [--boxes-file F] [--no-wait] [--stdout] [--max-wait D]
                                          wait for runs to end: report them on stderr, exit 2 (errors: 125)
  agent-box help [COMMAND]

`)
	fmt.Fprint(w, `flags (before or after the command):
`)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
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
	case args[0] == "connect" || args[0] == "install" || args[0] == "watch":
		return run([]string{args[0], "--help"})
	}
	return commandHelp(args[0])
}

// commandHelp prints the usage of one of the CLI's commands.
func commandHelp(command string) int {
	return cli.Help(command, os.Stdout, os.Stderr)
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

// globals are the flags of every command of the CLI, with what their
// value is.
var globals = map[string]string{"state-dir": "a directory", "box": "a destination", "exec": "a command",
	"boxes-file": "a file", "o": "an ssh option", "remote-bin": "a path"}

// commandWord is the command of a command line: its first word that is a
// command, neither a flag nor a global flag's value; past an unknown flag,
// whose value a word may be, the first word that names a command ("" when
// there is none).
func commandWord(args []string) string {
	commands := append([]string{"watch", "connect", "install", "doctor", "version", "help"}, cli.Commands...)
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return ""
		}
		if !strings.HasPrefix(a, "-") {
			if slices.Contains(commands, a) {
				return a
			}
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if _, global := globals[name]; (global || name == "default-limits") && !hasValue {
			i++ // its value
		}
	}
	return ""
}

// hoistGlobals moves the global flags given after the command to the
// front, where the top-level flags are parsed: "agent-box ps --box b" as
// "agent-box --box b ps". Arguments after "--" are a run's command line
// and stay as they are, and so do those of connect, install and watch,
// which have an --exec of their own.
func hoistGlobals(args []string) ([]string, error) {
	var front, rest []string
	command := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || command == "connect" || command == "install" || command == "watch" {
			rest = append(rest, args[i:]...)
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		what, global := globals[name]
		if !strings.HasPrefix(a, "-") || !global {
			if command == "" && !strings.HasPrefix(a, "-") {
				command = a
			}
			rest = append(rest, a)
			continue
		}
		if !hasValue {
			// "--state-dir --" or "--state-dir -a" is a missing value,
			// not a directory of that name (--state-dir=-a says that).
			if i+1 >= len(args) || strings.HasPrefix(args[i+1], "-") {
				return nil, fmt.Errorf("%s needs %s", a, what)
			}
			i++
			value = args[i]
		}
		front = append(front, "--"+name+"="+value)
	}
	return append(front, rest...), nil
}
