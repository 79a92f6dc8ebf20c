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

The MCP server an agent's client starts on this machine: it reaches the
box's agent-box over ssh (ssh DEST -- .local/bin/agent-box, with the
user's ~/.ssh/config), or through any command whose stdin and stdout are
the box's agent-box (--exec 'docker exec -i dev agent-box'), and keeps the
client's connection alive across drops: it redials and re-sends what was
in flight.

  claude mcp add box -- agent-box connect box

`

// runConnect is agent-box connect.
func runConnect(args []string) int {
	fs := flag.NewFlagSet("agent-box connect", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	remoteBin := fs.String("remote-bin", session.DefaultRemoteBin, "agent-box's path on the box (relative to the home directory)")
	execCmd := fs.String("exec", "", "a command whose stdin/stdout are the box's agent-box, instead of ssh")
	giveUp := fs.Duration("give-up", 20*time.Second, "how long a call waits for a box that went away before it fails")
	keepalive := fs.Duration("keepalive", 10*time.Second, "how often to check that the box answers; a check unanswered as long ends the connection, which is dialled again (0: never)")
	channel := fs.Bool("channel", false, "also be a Claude Code channel (a research preview of Claude Code's): send the model the box's ended runs (docs/hooks.md)")
	var sshOpts multiFlag
	fs.Var(&sshOpts, "o", "an ssh option (as ssh -o): it wins over connect's own and ~/.ssh/config's")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			fmt.Fprint(os.Stdout, connectUsage)
			fs.SetOutput(os.Stdout)
			fs.PrintDefaults()
			return 0
		}
		fmt.Fprintf(os.Stderr, "agent-box connect: %v\n%s", err, connectUsage)
		return cli.ExitUsage
	}
	var box session.Box
	switch rest := fs.Args(); {
	case *execCmd != "" && len(rest) == 0:
		var err error
		if box, err = session.Exec(*execCmd, os.Getenv); err != nil {
			fmt.Fprintf(os.Stderr, "agent-box connect: %v\n", err)
			return cli.ExitUsage
		}
	case *execCmd == "" && len(rest) == 1 && !strings.HasPrefix(rest[0], "-"):
		box = sshBox(rest[0], *remoteBin, sshOpts)
	default:
		fmt.Fprintf(os.Stderr, "agent-box connect: give one DEST, or --exec 'COMMAND'\n%s", connectUsage)
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
	srv := &relay.Server{Boxes: []session.Box{box}, CacheDir: cacheDir, Options: session.Options{Stderr: os.Stderr, GiveUp: *giveUp, Keepalive: *keepalive}, Log: logger}
	if *channel {
		// A cursor file per box: only the newest connect of a file sends.
		dir, err := defaultCursorFile(os.Getenv)
		if err != nil {
			fmt.Fprintf(os.Stderr, "agent-box connect: --channel: %v\n", err)
			return cli.ExitUsage
		}
		sum := sha256.Sum256([]byte(box.Name))
		srv.Channel = &relay.Channel{CursorFile: filepath.Join(filepath.Dir(dir), fmt.Sprintf("channel-%x.json", sum[:8]))}
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

// sshBox is a box reached over ssh, with the user's -o options.
func sshBox(dest, remoteBin string, opts []string) session.Box {
	var extra []string
	for _, o := range opts {
		extra = append(extra, "-o", o)
	}
	return session.SSH(dest, remoteBin, extra)
}

// multiFlag is a flag given any number of times.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }
