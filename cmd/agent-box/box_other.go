//go:build !linux

// The box side runs only on Linux: its packages read /proc and use
// cgroups, prctl(2) and syscalls only Linux has. On any other system the
// local side works and each command of the box's says so.

package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/agent-box/agent-box/cli"
	"github.com/agent-box/agent-box/session"
)

// closeInherited does nothing here: only the box side starts processes
// that outlive agent-box (supervisors and runs).
func closeInherited() {}

func supervise() int { return boxOnly("supervise") }

func runDoctor(string, []string) int { return boxOnly("doctor") }

// box answers what on Linux would serve MCP (no command) or run a command
// of the CLI over runs.
func box(_, _ string, rest []string) int {
	if len(rest) == 0 {
		return boxOnly("serve")
	}
	return notHere(rest[0])
}

// localWatchBox: this machine is no box; agent-box watch needs one given.
func localWatchBox(string, string) (session.Tools, error) {
	return session.Tools{}, errors.New("no box given, and this machine is no box (the box side runs only on Linux): give --box DEST or --exec 'COMMAND', or set AGENT_BOX_BOX")
}

// notHere answers a command this system cannot run: one of the box's, or
// none at all.
func notHere(command string) int {
	if slices.Contains(cli.Commands, command) {
		fmt.Fprintf(os.Stderr, "agent-box %s: no box given, and this machine is no box (the box side runs only on Linux): give --box DEST or --exec 'COMMAND', or set AGENT_BOX_BOX\n", command)
		return cli.ExitUsage
	}
	fmt.Fprintf(os.Stderr, "agent-box: unknown command %q (commands here: connect, install, version, help, and with --box: %s)\n", command, strings.Join(cli.Commands, ", "))
	return cli.ExitUsage
}

// boxOnly refuses a command of the box side. It is not a usage error: the
// command line is right, for a Linux box.
func boxOnly(command string) int {
	fmt.Fprintf(os.Stderr, "agent-box %s: the box side runs only on Linux; on this machine agent-box connect and agent-box install work\n", command)
	return cli.ExitError
}

// isTerminal says whether f is a character device: a terminal, mostly.
// Without a command agent-box serves MCP on stdio unless a person typed
// it; here either answer ends in an error, and this one needs no ioctl.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
