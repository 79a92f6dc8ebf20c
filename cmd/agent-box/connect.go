package main

import (
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agent-box/agent-box/cli"
	relay "github.com/agent-box/agent-box/connect"
	"github.com/agent-box/agent-box/session"
)

const connectUsage = `usage: agent-box connect [--channel] [--remote-bin PATH] [-o SSH_OPTION]... DEST
       agent-box connect [--channel] --exec 'COMMAND'
       agent-box connect [--channel] [--boxes-file F] [NAME=DEST | --exec NAME='COMMAND']...

The MCP server an agent's client starts on this machine: it reaches the
box's agent-box over ssh (ssh DEST -- .local/bin/agent-box, with the
user's ~/.ssh/config), or through any command whose stdin and stdout are
the box's agent-box (--exec 'docker exec -i dev agent-box'), and keeps the
client's connection alive across drops: it redials and re-sends what was
in flight.

  claude mcp add box -- agent-box connect box

Several boxes are one MCP server with one tool list, each tool taking box
(one of the names): NAME=DEST and --exec NAME='COMMAND', any number, in
any order, and the boxes of --boxes-file. A DEST that is a name itself
(dev, box1.example.com) may go without one; user@host may not. Given no
box at all, connect reads $XDG_CONFIG_HOME/agent-box/boxes.toml (else
~/.config/agent-box/boxes.toml), one table a box:

  [boxes.dev]
  ssh = "dev.example.com"          # or: exec = "docker exec -i dev agent-box"
  options = ["Port=2222"]          # ssh -o options (optional)
  remote_bin = ".local/bin/agent-box"   # (optional)

`

// runConnect is agent-box connect.
func runConnect(args []string) int {
	fs := flag.NewFlagSet("agent-box connect", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	remoteBin := fs.String("remote-bin", session.DefaultRemoteBin, "agent-box's path on the box (relative to the home directory)")
	var gave []given
	fs.Var(boxFlag{&gave, "--exec"}, "exec", "a box reached through a command whose stdin/stdout are its agent-box, instead of ssh: 'COMMAND' or NAME='COMMAND' (repeatable)")
	boxesFile := fs.String("boxes-file", "", "a TOML file of boxes, one table [boxes.NAME] each (default, when no box is given: $XDG_CONFIG_HOME/agent-box/boxes.toml or ~/.config/agent-box/boxes.toml, if it exists)")
	giveUp := fs.Duration("give-up", 20*time.Second, "how long a call waits for a box that went away before it fails")
	keepalive := fs.Duration("keepalive", 10*time.Second, "how often to check that the box answers; a check unanswered as long ends the connection, which is dialled again (0: never)")
	channel := fs.Bool("channel", false, "also be a Claude Code channel (a research preview of Claude Code's): send the model the box's ended runs (docs/hooks.md)")
	var sshOpts multiFlag
	fs.Var(&sshOpts, "o", "an ssh option (as ssh -o), for every box over ssh: it wins over connect's own, the boxes file's and ~/.ssh/config's")
	// DESTs and flags in any order: the flag package stops at the first
	// word that is not a flag, so parse again after each.
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			if err == flag.ErrHelp {
				fmt.Fprint(os.Stdout, connectUsage)
				fs.SetOutput(os.Stdout)
				fs.PrintDefaults()
				return 0
			}
			fmt.Fprintf(os.Stderr, "agent-box connect: %v\n%s", err, connectUsage)
			return cli.ExitUsage
		}
		if rest = fs.Args(); len(rest) == 0 {
			break
		}
		gave = append(gave, given{value: rest[0]})
		rest = rest[1:]
	}
	boxes, err := connectBoxes(gave, *boxesFile, transport{remoteBin: *remoteBin, sshOpts: sshOpts, getenv: os.Getenv})
	if err != nil {
		fmt.Fprintf(os.Stderr, "agent-box connect: %v\n", err)
		return cli.ExitUsage
	}
	if len(boxes) == 0 {
		fmt.Fprintf(os.Stderr, "agent-box connect: give a DEST, --exec 'COMMAND', several NAME=DEST or --exec NAME='COMMAND', or --boxes-file F\n%s", connectUsage)
		return cli.ExitUsage
	}
	if *keepalive == 0 {
		*keepalive = -1 // session.Options: negative is never
	}
	// The client reads stdout; a client gone must not kill connect before
	// the box has been told (EOF) to finish what is in flight.
	signal.Ignore(syscall.SIGPIPE, syscall.SIGHUP)
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	// The first signal ends connect the polite way (the box finishes what
	// is in flight); a second one, with the default handling back, at once.
	go func() { <-ctx.Done(); cancel() }()
	logger := log.New(os.Stderr, "agent-box connect: ", 0)
	// The box's last answers, for a start while it is away (package
	// connect's cache.go); without a cache directory, none are kept.
	cacheDir := ""
	if dir, err := os.UserCacheDir(); err == nil {
		cacheDir = filepath.Join(dir, "agent-box", "connect")
	}
	srv := &relay.Server{Boxes: boxes, CacheDir: cacheDir, Options: session.Options{Stderr: os.Stderr, GiveUp: *giveUp, Keepalive: *keepalive}, Log: logger}
	if *channel {
		// A cursor file per box, or per list of boxes: only the newest
		// connect of a file sends.
		dir, err := defaultCursorFile(os.Getenv)
		if err != nil {
			fmt.Fprintf(os.Stderr, "agent-box connect: --channel: %v\n", err)
			return cli.ExitUsage
		}
		srv.Channel = &relay.Channel{CursorFile: channelCursorFile(filepath.Dir(dir), boxes)}
		if ms, err := strconv.Atoi(os.Getenv("AGENT_BOX_WATCH_POLL_MS")); err == nil && ms > 0 {
			srv.Channel.Poll = time.Duration(ms) * time.Millisecond // a test knob, as watch's
		}
	}
	if err := srv.Serve(ctx, os.Stdin, os.Stdout); err != nil && ctx.Err() == nil {
		logger.Print(err)
		return 1
	}
	return 0
}

// channelCursorFile is the cursor file of connect --channel over boxes,
// in dir: one for each list of boxes, by their names in order.
func channelCursorFile(dir string, boxes []session.Box) string {
	names := make([]string, len(boxes))
	for i, b := range boxes {
		names[i] = b.Name
	}
	// One box: the hash of its name, as before there were several. Several
	// boxes' names have no newline (fleet.CheckName): they join one way.
	sum := sha256.Sum256([]byte(strings.Join(names, "\n")))
	return filepath.Join(dir, fmt.Sprintf("channel-%x.json", sum[:8]))
}

// multiFlag is a flag given any number of times.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }
