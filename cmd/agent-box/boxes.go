package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	"github.com/BurntSushi/toml"

	"github.com/agent-box/agent-box/fleet"
	"github.com/agent-box/agent-box/session"
)

// boxArg is one box as the user gave it: a DEST or NAME=DEST, an --exec
// 'COMMAND' or --exec NAME='COMMAND', or a table of a boxes file. connect,
// the CLI and watch read boxes the same way, here.
type boxArg struct {
	name      string   // the name given; "" when none was
	dest      string   // the ssh destination; "" for a box reached by command
	command   string   // the command whose stdin and stdout are the box's agent-box
	options   []string // ssh -o options of this box alone (a boxes file's)
	remoteBin string   // agent-box's path on the box; "" for the command line's
	from      string   // where it was given, for messages
}

// destArg is a DEST or NAME=DEST (via: the flag or word that gave it, for
// messages). It splits at the first '=': an ssh destination has none.
func destArg(s, via string) (boxArg, error) {
	b := boxArg{dest: s, from: strings.TrimPrefix(fmt.Sprintf("%s %q", via, s), " ")}
	if name, dest, ok := strings.Cut(s, "="); ok {
		if err := fleet.CheckName(name); err != nil {
			return b, fmt.Errorf("%s: %w", b.from, err)
		}
		b.name, b.dest = name, dest
	}
	if b.dest == "" || strings.HasPrefix(b.dest, "-") {
		return b, fmt.Errorf("%s is not a destination", b.from)
	}
	return b, nil
}

// namedExec is --exec NAME='COMMAND': a box name, then '='. A command
// that starts so was no command before: no shell runs it (session.Exec),
// so VAR=value cmd never set VAR; a program whose name holds '=' is given
// by its path (./a=b).
var namedExec = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}=`)

// execArg is --exec 'COMMAND' or --exec NAME='COMMAND'.
func execArg(s string) (boxArg, error) {
	b := boxArg{command: s, from: fmt.Sprintf("--exec %q", s)}
	if namedExec.MatchString(s) {
		b.name, b.command, _ = strings.Cut(s, "=")
	}
	if strings.TrimSpace(b.command) == "" {
		return b, fmt.Errorf("%s: the command is empty", b.from)
	}
	return b, nil
}

// given is a box as the command line gives it, read by readGiven once
// the flags are parsed (the flag package would wrap its words in its own).
type given struct {
	via   string // --box, --exec, $AGENT_BOX_BOX; "" for a word (connect's DEST)
	value string
}

// boxFlag is a flag that adds a box each time it is given (--box,
// --exec), to a list shared with the others, so the boxes keep the
// command line's order.
type boxFlag struct {
	list *[]given
	via  string
}

func (f boxFlag) String() string     { return "" }
func (f boxFlag) Set(s string) error { *f.list = append(*f.list, given{f.via, s}); return nil }

// readGiven reads the boxes of a command line.
func readGiven(list []given) ([]boxArg, error) {
	var out []boxArg
	for _, g := range list {
		var b boxArg
		var err error
		if g.via == "--exec" {
			b, err = execArg(g.value)
		} else {
			b, err = destArg(g.value, g.via)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// maxBoxesFile bounds a boxes file: a few lines a box.
const maxBoxesFile = 1 << 20

// fileBox is one table of a boxes file.
type fileBox struct {
	SSH       *string  `toml:"ssh"`
	Exec      *string  `toml:"exec"`
	Options   []string `toml:"options"`
	RemoteBin string   `toml:"remote_bin"`
}

// readBoxesFile reads a boxes file: one table a box, in the file's order,
//
//	[boxes.dev]
//	ssh = "dev.example.com"      # or exec = "docker exec -i dev agent-box"
//	options = ["Port=2222"]       # ssh -o options
//	remote_bin = ".local/bin/agent-box"
func readBoxesFile(path string) ([]boxArg, error) {
	data, err := readSmallFile(path, maxBoxesFile)
	if err != nil {
		return nil, fmt.Errorf("boxes file: %w", err)
	}
	var doc struct {
		Boxes map[string]fileBox `toml:"boxes"`
	}
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(&doc)
	if err != nil {
		return nil, fmt.Errorf("boxes file %s: %w", path, err)
	}
	if extra := md.Undecoded(); len(extra) > 0 {
		k := extra[0]
		if len(k) >= 3 && k[0] == "boxes" {
			return nil, fmt.Errorf("boxes file %s: box %q: unknown key %q (a box takes ssh or exec, options, remote_bin)", path, k[1], strings.Join(k[2:], "."))
		}
		return nil, fmt.Errorf("boxes file %s: unknown key %q (boxes are tables [boxes.NAME])", path, k.String())
	}
	// The boxes in the file's order: answers list them so.
	var names []string
	seen := map[string]bool{}
	for _, k := range md.Keys() {
		if len(k) == 2 && k[0] == "boxes" && !seen[k[1]] {
			seen[k[1]] = true
			names = append(names, k[1])
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("boxes file %s has no box: give each a table [boxes.NAME] with ssh or exec", path)
	}
	var boxes []boxArg
	for _, name := range names {
		fb := doc.Boxes[name]
		b := boxArg{name: name, options: fb.Options, remoteBin: fb.RemoteBin, from: fmt.Sprintf("boxes file %s: box %q", path, name)}
		if err := fleet.CheckName(name); err != nil {
			return nil, fmt.Errorf("boxes file %s: %w", path, err)
		}
		switch {
		case fb.SSH != nil && fb.Exec != nil:
			return nil, fmt.Errorf("%s: give ssh or exec, not both", b.from)
		case fb.SSH != nil:
			b.dest = *fb.SSH
			if b.dest == "" || strings.HasPrefix(b.dest, "-") {
				return nil, fmt.Errorf("%s: ssh %q is not a destination", b.from, b.dest)
			}
		case fb.Exec != nil:
			b.command = *fb.Exec
			if strings.TrimSpace(b.command) == "" {
				return nil, fmt.Errorf("%s: exec: the command is empty", b.from)
			}
			if len(fb.Options) > 0 || fb.RemoteBin != "" {
				return nil, fmt.Errorf("%s: options and remote_bin go with ssh, not exec", b.from)
			}
		default:
			return nil, fmt.Errorf("%s: give ssh = \"DEST\" or exec = \"COMMAND\"", b.from)
		}
		boxes = append(boxes, b)
	}
	return boxes, nil
}

// readSmallFile reads a regular file of at most limit bytes. It follows
// a symlink (dotfiles are often links), and opens without blocking: a
// FIFO in the file's place must not hang connect as its client starts it.
func readSmallFile(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return data, nil
}

// defaultBoxesFile is $XDG_CONFIG_HOME/agent-box/boxes.toml, else
// ~/.config/agent-box/boxes.toml ("" when there is no home).
func defaultBoxesFile(getenv func(string) string) string {
	if d := getenv("XDG_CONFIG_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "agent-box", "boxes.toml")
	}
	if home := getenv("HOME"); home != "" {
		return filepath.Join(home, ".config", "agent-box", "boxes.toml")
	}
	return ""
}

// transport is how the command line reaches a box given without its own
// settings: --remote-bin, and -o options for every ssh box.
type transport struct {
	remoteBin string
	sshOpts   []string
	getenv    func(string) string // what $VARIABLES of an --exec command are
}

// naming is how boxes given without a name are named when there are
// several.
type naming int

const (
	// fleetNames: as a fleet's boxes, every box by a name fleet.CheckName
	// takes; a DEST that is one may be its own name.
	fleetNames naming = iota
	// ownNames: a box without a name is called by its DEST or command, as
	// a single box is (watch, whose cursor file keeps each box's place
	// under that name).
	ownNames
)

// givenBoxes are the boxes of the boxes file, then those of the command
// line in their order.
func givenBoxes(list []given, boxesFile string, t transport, n naming) ([]session.Box, error) {
	args, err := readGiven(list)
	if err != nil {
		return nil, err
	}
	if boxesFile != "" {
		fromFile, err := readBoxesFile(boxesFile)
		if err != nil {
			return nil, err
		}
		args = append(fromFile, args...)
	}
	return resolveBoxes(args, t, n)
}

// connectBoxes are connect's boxes: those given, and given none, those of
// the default boxes file if there is one.
func connectBoxes(list []given, boxesFile string, t transport) ([]session.Box, error) {
	if boxesFile == "" && len(list) == 0 {
		boxesFile = defaultBoxesFile(t.getenv)
		if _, err := os.Stat(boxesFile); boxesFile == "" || errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
	}
	return givenBoxes(list, boxesFile, t, fleetNames)
}

// resolveBoxes makes the boxes to dial of what the user gave. One box is
// as it always was, called by its name if given, else by its DEST or
// command. Several need names that differ, and as a fleet's
// (fleetNames), that fleet.CheckName takes.
func resolveBoxes(args []boxArg, t transport, n naming) ([]session.Box, error) {
	var boxes []session.Box
	seen := map[string]string{}
	for _, a := range args {
		var b session.Box
		if a.command != "" {
			var err error
			if b, err = session.Exec(a.command, t.getenv); err != nil {
				return nil, err
			}
		} else {
			var extra []string
			for _, o := range append(append([]string(nil), t.sshOpts...), a.options...) {
				extra = append(extra, "-o", o)
			}
			bin := a.remoteBin
			if bin == "" {
				bin = t.remoteBin
			}
			b = session.SSH(a.dest, bin, extra)
		}
		switch {
		case a.name != "":
			b.Name = a.name
		case len(args) == 1 || n == ownNames:
		case a.command != "":
			return nil, fmt.Errorf("%s: with several boxes, each needs a name: --exec NAME='COMMAND'", a.from)
		case fleet.CheckName(a.dest) != nil:
			return nil, fmt.Errorf("%s: with several boxes, each needs a name: write NAME=%s", a.from, a.dest)
		}
		if prev, dup := seen[b.Name]; dup {
			return nil, fmt.Errorf("box name %q is given twice (%s, %s): give each box its own NAME=", b.Name, prev, a.from)
		}
		seen[b.Name] = a.from
		boxes = append(boxes, b)
	}
	return boxes, nil
}
