package session

import (
	"errors"
	"fmt"

	"mvdan.cc/sh/v3/shell"
)

// Box is how to reach one box's agent-box: a command whose stdin and
// stdout are its MCP stdio.
type Box struct {
	Name string   // what messages call it: the ssh destination, or the command
	Argv []string // the transport, run without a shell
}

// DefaultRemoteBin is where agent-box install puts agent-box on a box,
// relative to the home directory ssh starts in.
const DefaultRemoteBin = ".local/bin/agent-box"

// SSHOptions are the ssh options connect sets after the user's own -o and
// before ~/.ssh/config (ssh takes the first value it is given for an
// option: the user's -o win, then these, then the config's Host entries
// for everything not set here):
//   - BatchMode: never ask a question on a terminal the MCP client does
//     not show; fail with ssh's words instead (an unknown host key, a key
//     with a passphrase and no agent).
//   - ServerAliveInterval, ServerAliveCountMax: a link that died without
//     a reset (a laptop's sleep, a NAT's timeout) is noticed in seconds,
//     not at the kernel's TCP timeout.
//   - ConnectTimeout: a box that does not answer fails a dial in seconds.
var SSHOptions = []string{
	"-o", "BatchMode=yes",
	"-o", "ServerAliveInterval=5",
	"-o", "ServerAliveCountMax=2",
	"-o", "ConnectTimeout=10",
}

// SSH is a box reached with `ssh DEST -- REMOTEBIN`; extra are more ssh
// arguments (-p, -i, -o, -F), given first.
func SSH(dest, remoteBin string, extra []string) Box {
	if remoteBin == "" {
		remoteBin = DefaultRemoteBin
	}
	argv := append([]string{"ssh"}, extra...)
	argv = append(argv, SSHOptions...)
	argv = append(argv, "-T", "--", dest, remoteBin)
	return Box{Name: dest, Argv: argv}
}

// Exec is a box reached by any command whose stdin and stdout are its
// agent-box ("docker exec -i dev agent-box"). The command is split into
// words as a POSIX shell would, without running one: killing the
// transport then kills the command itself. env resolves $VARIABLES (nil:
// none are set).
func Exec(command string, env func(string) string) (Box, error) {
	if env == nil {
		env = func(string) string { return "" }
	}
	argv, err := shell.Fields(command, env)
	if err != nil {
		return Box{}, fmt.Errorf("--exec %q: %w", command, err)
	}
	if len(argv) == 0 {
		return Box{}, errors.New("--exec: the command is empty")
	}
	return Box{Name: command, Argv: argv}, nil
}
