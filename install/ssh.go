package install

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
)

// Remote runs a command line on the box, with stdin as its input, and
// returns its stdout.
type Remote interface {
	Run(ctx context.Context, command string, stdin io.Reader) ([]byte, error)
}

// SSH is Remote through the ssh client, in batch mode: no password or
// host key question can wait for an answer nobody gives (a user who wants
// one passes -o BatchMode=no). ssh's user config applies (Host entries,
// keys, ControlMaster).
type SSH struct {
	Program string   // default "ssh"
	Dest    string   // as ssh takes it: host, user@host, an ssh_config Host
	Options []string // each passed as -o OPTION, before ours (ssh takes the first value of each)
}

var _ Remote = SSH{}

func (s SSH) Run(ctx context.Context, command string, stdin io.Reader) ([]byte, error) {
	prog := s.Program
	if prog == "" {
		prog = "ssh"
	}
	var args []string
	for _, o := range s.Options {
		args = append(args, "-o", o)
	}
	// -T: no terminal, so the bytes on stdin reach the command unchanged.
	// "--" ends the options: a destination that starts with "-" is not one.
	args = append(args, "-o", "BatchMode=yes", "-T", "--", s.Dest, command)
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err == nil {
		return stdout.Bytes(), nil
	}
	e := &SSHError{Dest: s.Dest, Command: command, Code: -1, Stderr: cleanStderr(stderr.String()), Err: err}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		e.Code = ee.ExitCode()
	}
	return stdout.Bytes(), e
}

// SSHError is an ssh command that failed: ssh itself (exit status 255: no
// connection, an unknown or changed host key, no key the box takes), or
// the command on the box. Stderr is what they said, verbatim.
type SSHError struct {
	Dest    string
	Command string
	Code    int // the exit status; -1 when ssh did not exit by itself
	Stderr  string
	Err     error
}

func (e *SSHError) Error() string {
	var b strings.Builder
	switch {
	case e.Code == 255:
		fmt.Fprintf(&b, "ssh %s failed", e.Dest)
	case e.Code >= 0:
		fmt.Fprintf(&b, "the command on %s failed (exit status %d)", e.Dest, e.Code)
	default:
		fmt.Fprintf(&b, "ssh %s: %v", e.Dest, e.Err)
	}
	if e.Stderr != "" {
		b.WriteString(":\n")
		b.WriteString(e.Stderr)
	} else if e.Code >= 0 {
		b.WriteString(", saying nothing")
	}
	return b.String()
}

func (e *SSHError) Unwrap() error { return e.Err }

// cleanStderr is ssh's messages without the carriage returns it ends its
// lines with (it writes "\r\n" in case the terminal is raw) and without
// trailing blank lines.
func cleanStderr(s string) string {
	return strings.TrimRight(strings.ReplaceAll(s, "\r\n", "\n"), "\r\n \t")
}

// shellQuote quotes s for a POSIX shell, the box's login shell that ssh
// hands the command line to.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-=:,+@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
