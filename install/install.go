package install

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The two binaries a box needs: agent-box starts agent-box-supervisor
// from its own directory for every run.
const (
	AgentBox   = "agent-box"
	Supervisor = "agent-box-supervisor"
)

// DefaultRemoteDir is where on the box the binaries go, from the home
// directory: the client runs ".local/bin/agent-box" (the PATH of a command
// ssh runs lacks ~/.local/bin on stock Debian and Ubuntu).
const DefaultRemoteDir = ".local/bin"

// LibDir is where, from an installation's prefix (the directory above
// agent-box's bin/), `make install` puts the builds for boxes:
// PREFIX/lib/agent-box/linux-arm64/agent-box.
const LibDir = "lib/agent-box"

// Options says what to install where.
type Options struct {
	Dest      string // the box, for messages
	Remote    Remote // runs commands there
	RemoteDir string // default DefaultRemoteDir; relative to the box's home; "~/" is the home too
	// From is a directory of builds: From/linux-amd64/ or, when that does
	// not exist, From itself. "": beside Exe, or in its prefix's LibDir.
	From string
	Exe  string // the running agent-box, symlinks resolved
}

// Result is what was installed.
type Result struct {
	Platform  Platform
	From      string // the local directory (or executable) the binaries came from
	AgentBox  string // the local file copied as agent-box
	RemoteDir string
	Version   string // what the installed agent-box's version printed
}

// Platform asks the box for its OS and architecture.
func PlatformOf(ctx context.Context, o Options) (Platform, error) {
	out, err := o.Remote.Run(ctx, "uname -sm", nil)
	if err != nil {
		return Platform{}, fmt.Errorf("asking %s for its OS and architecture (uname -sm): %w", o.Dest, err)
	}
	p, err := ParseUname(string(out))
	if err != nil {
		return Platform{}, fmt.Errorf("%s: %w", o.Dest, err)
	}
	return p, nil
}

// Install copies the binaries for the box's platform to the box and runs
// its new agent-box's version.
func Install(ctx context.Context, o Options) (Result, error) {
	if o.RemoteDir == "" {
		o.RemoteDir = DefaultRemoteDir
	}
	p, err := PlatformOf(ctx, o)
	if err != nil {
		return Result{}, err
	}
	src, err := Find(p, o.Exe, o.From)
	if err != nil {
		return Result{}, fmt.Errorf("%s is %s: %w", o.Dest, p, err)
	}
	dir := remoteDir(o.RemoteDir)
	// The supervisor first: an agent-box started in between finds the
	// supervisor of its own build beside it, or an older agent-box a
	// newer supervisor, which speaks the launch protocol of its build.
	for _, f := range []struct{ local, name string }{{src.Supervisor, Supervisor}, {src.AgentBox, AgentBox}} {
		if err := copyFile(ctx, o, f.local, dir, f.name); err != nil {
			return Result{}, err
		}
	}
	out, err := o.Remote.Run(ctx, dir+"/"+AgentBox+" version", nil)
	if err != nil {
		return Result{}, fmt.Errorf("installed agent-box in %s:%s, but it does not run there: %w", o.Dest, o.RemoteDir, err)
	}
	return Result{Platform: p, From: src.From, AgentBox: src.AgentBox, RemoteDir: o.RemoteDir, Version: strings.TrimSpace(string(out))}, nil
}

// copyFile puts the local file into dir/name on the box: it writes a
// temporary file of a unique name in dir, checks its size (a connection
// that drops mid-copy ends cat's input early, not with an error), makes it
// executable and renames it over name. The rename keeps the old file for
// whoever runs it: writing into a running binary is ETXTBSY, and its
// pages would change under it.
func copyFile(ctx context.Context, o Options, local, dir, name string) error {
	f, err := os.Open(local)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := strconv.FormatInt(fi.Size(), 10)
	// One line for sh, which runs it whatever the login shell is (ssh
	// hands the command line to that), and no single quote inside, so it
	// quotes plainly for csh and fish too.
	script := strings.Join([]string{
		"set -e",
		"umask 022",
		"d=" + dir,
		`mkdir -p -- "$d"`,
		`t="$d/.` + name + `.$$.tmp"`,
		`clean() { rm -f -- "$t"; }`,
		"trap clean EXIT",
		"trap \"clean; exit 1\" HUP INT TERM PIPE",
		`cat >"$t"`,
		`n=$(wc -c <"$t")`,
		`if [ $((n)) -ne ` + size + ` ]; then echo "received $((n)) of ` + size + ` bytes" >&2; exit 1; fi`,
		`chmod 755 "$t"`,
		`mv -f -- "$t" "$d/` + name + `"`,
		"trap - EXIT HUP INT TERM PIPE",
	}, "; ")
	if _, err := o.Remote.Run(ctx, "sh -c "+shellQuote(script), f); err != nil {
		return fmt.Errorf("copying %s to %s:%s: %w", local, o.Dest, o.RemoteDir, err)
	}
	return nil
}

// remoteDir is dir quoted for the box's shell: relative to the home (ssh
// runs commands there), "~" and "~/..." as $HOME, which sh expands there,
// not here.
func remoteDir(dir string) string {
	dir = strings.TrimSuffix(dir, "/")
	if dir == "~" {
		return `"$HOME"`
	}
	if rest, ok := strings.CutPrefix(dir, "~/"); ok {
		return `"$HOME"/` + shellQuote(rest)
	}
	if dir == "" {
		return "/"
	}
	return shellQuote(dir)
}

// Source is a pair of binaries to install.
type Source struct {
	From       string // where they were found, for messages
	AgentBox   string
	Supervisor string
}

// Find picks the binaries for platform p. With from, from/OS-ARCH/ or
// from itself. Without, the running executable exe with the supervisor
// beside it, when they run on p (same platform, static); else the builds
// in the prefix's LibDir (exe's dir/../lib/agent-box/OS-ARCH/). Each
// candidate is checked by CheckBinary; the error says what each lacked
// and how to build what is missing.
func Find(p Platform, exe, from string) (Source, error) {
	var cands []Source
	if from != "" {
		for _, d := range []string{filepath.Join(from, p.Dir()), from} {
			cands = append(cands, Source{From: d, AgentBox: filepath.Join(d, AgentBox), Supervisor: filepath.Join(d, Supervisor)})
		}
	} else {
		bin := filepath.Dir(exe)
		lib := filepath.Join(filepath.Dir(bin), LibDir, p.Dir())
		cands = []Source{
			{From: exe, AgentBox: exe, Supervisor: filepath.Join(bin, Supervisor)},
			{From: lib, AgentBox: filepath.Join(lib, AgentBox), Supervisor: filepath.Join(lib, Supervisor)},
		}
	}
	var why []string
	for _, c := range cands {
		err := checkPair(c, p)
		if err == nil {
			return c, nil
		}
		why = append(why, "  "+err.Error())
	}
	dir := from
	if dir == "" {
		dir = "DIR"
	}
	how := fmt.Sprintf("  GOOS=%s GOARCH=%s CGO_ENABLED=0 go build -o %s/ ./cmd/agent-box ./cmd/agent-box-supervisor   # in a checkout; then install --from %s",
		p.OS, p.Arch, filepath.Join(dir, p.Dir()), dir)
	if from == "" {
		how = "  make install                    # in a checkout: builds for linux-amd64 and linux-arm64 into PREFIX/" + LibDir + "\n" +
			"  make install-remote BOX=HOST    # in a checkout: builds for that box's platform and installs it\n" + how
	}
	return Source{}, fmt.Errorf("no agent-box build for %s here:\n%s\nget one with:\n%s", p, strings.Join(why, "\n"), how)
}

// checkPair checks that both binaries of c exist and run on p.
func checkPair(c Source, p Platform) error {
	for _, f := range []string{c.AgentBox, c.Supervisor} {
		if _, err := os.Stat(f); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: not there", f)
		} else if err != nil {
			return err
		}
		if err := CheckBinary(f, p); err != nil {
			return err
		}
	}
	return nil
}
