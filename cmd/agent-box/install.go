package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/agent-box/agent-box/install"
)

// exitUsage is cli.ExitUsage, which this file cannot import: it builds on
// every OS a user's machine runs (package cli runs processes, on Linux
// only). install_test.go pins the two together.
const exitUsage = 2

// stringsFlag is a flag that may be given many times.
type stringsFlag []string

func (s *stringsFlag) String() string     { return strings.Join(*s, " ") }
func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }

// runInstall is agent-box install: it puts agent-box and its supervisor
// on a box over ssh (package install).
func runInstall(args []string) int {
	fs := flag.NewFlagSet("install", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	var sshOpts stringsFlag
	fs.Var(&sshOpts, "o", "an ssh option (as ssh -o OPTION), e.g. -o Port=2222; may repeat")
	fs.Var(&sshOpts, "ssh-option", "the same as -o")
	from := fs.String("from", "", "a directory of builds: DIR/linux-amd64/, or DIR itself (default: this agent-box when the box runs it, else PREFIX/"+install.LibDir+"/OS-ARCH beside it)")
	remoteDir := fs.String("remote-dir", install.DefaultRemoteDir, "the directory on the box, from its home")
	printPlatform := fs.Bool("print-platform", false, "only print the box's platform as OS-ARCH (the name of its build directory)")
	fs.Usage = func() {
		fmt.Fprint(os.Stderr, `usage: agent-box install [-o OPTION]... [--from DIR] [--remote-dir DIR] BOX

Copies agent-box and agent-box-supervisor, built for BOX's OS and
architecture (ssh BOX uname -sm), into ~/.local/bin on BOX over ssh
(batch mode: no password prompts), replacing them atomically, and runs
the new agent-box's version there. BOX needs no Go and no checkout.

`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(os.Stderr, "agent-box install: expected one BOX (an ssh destination), got %d arguments\n", fs.NArg())
		fs.Usage()
		return exitUsage
	}
	dest := fs.Arg(0)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o := install.Options{
		Dest:      dest,
		Remote:    install.SSH{Dest: dest, Options: sshOpts},
		RemoteDir: *remoteDir,
		From:      *from,
	}
	if *printPlatform {
		p, err := install.PlatformOf(ctx, o)
		if err != nil {
			fmt.Fprintf(os.Stderr, "agent-box install: %v\n", err)
			return 1
		}
		fmt.Println(p.Dir())
		return 0
	}
	if o.From == "" {
		exe, err := os.Executable()
		if err == nil {
			exe, err = filepath.EvalSymlinks(exe)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "agent-box install: finding this executable: %v (name the builds with --from DIR)\n", err)
			return 1
		}
		o.Exe = exe
	}
	res, err := install.Install(ctx, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "agent-box install: %v\n", err)
		return 1
	}
	fmt.Printf("%s: installed %s (%s) and %s in %s, from %s\n", dest, res.Version, res.Platform, install.Supervisor, res.RemoteDir, res.From)
	return 0
}
