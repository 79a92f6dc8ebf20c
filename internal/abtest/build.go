package abtest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// Build compiles agent-box and returns the path of a copy of it in a
// temporary directory of its own, and a cleanup. It builds the binary the
// way the test binary itself was built: with -race under go test -race
// (RaceEnabled), without it under plain go test. A race-built server and
// supervisor find the races the tests drive them into; a plain build keeps
// the fast lane fast (the race detector makes every start several times
// slower), and its different timing finds what the slow one hides (STYLE
// 21).
//
// The lean supervisor goes beside it, as make install puts it: what runs
// in production. A plain build is static (CGO_ENABLED=0) as the Makefile's
// is: the loader and libc of a dynamic one cost every start CPU before
// main (docs/architecture/performance.md, "The test suite"), and the tests
// start thousands of processes. -race needs cgo, so a race build stays
// dynamic. AGENT_BOX_TEST_NO_LEAN_SUPERVISOR tests the fallback,
// "agent-box supervise".
//
// For a race build it also sets atexit_sleep_ms=0 in this process's GORACE
// (unless GORACE names it), which every server, supervisor and CLI call
// the tests start inherits: a -race binary otherwise sleeps a second at
// exit before it reports, and a test pays that second for every server it
// closes. Races are still reported, as they happen.
func Build() (string, func(), error) {
	if RaceEnabled {
		if g := os.Getenv("GORACE"); !strings.Contains(g, "atexit_sleep_ms") {
			os.Setenv("GORACE", strings.TrimSpace(g+" atexit_sleep_ms=0"))
		}
	}
	root, err := RepoRoot()
	if err != nil {
		return "", nil, err
	}
	names := []string{"agent-box"}
	if os.Getenv("AGENT_BOX_TEST_NO_LEAN_SUPERVISOR") == "" {
		names = append(names, "agent-box-supervisor")
	}
	dir, err := os.MkdirTemp("", "agent-box-bin-")
	if err != nil {
		return "", nil, err
	}
	if err := BuildInto(root, dir, names...); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("building agent-box: %w", err)
	}
	return filepath.Join(dir, "agent-box"), func() { os.RemoveAll(dir) }, nil
}

// BuildInto puts the binaries names (each built from ./cmd/NAME of the
// module in root) into dir, built as Build builds them.
//
// Every package of a go test ./... that drives agent-box builds it, each
// in a test process of its own. They build into one directory per
// checkout and mode under the user's cache directory, one at a time
// (flock): go build leaves a target alone whose build ID says it is up to
// date, so only the first links (the links are most of a build's cost),
// and the others copy its output. Each test process runs its own copy,
// which no later build can change under it.
func BuildInto(root, dir string, names ...string) error {
	return buildInto(root, dir, RaceEnabled, names)
}

// BuildStaticInto is BuildInto for a plain static build (CGO_ENABLED=0,
// no -race) whatever the test binary is: for a machine that has neither
// our libc nor a race runtime, such as a container made from nothing but
// these binaries and busybox.
func BuildStaticInto(root, dir string, names ...string) error {
	return buildInto(root, dir, false, names)
}

func buildInto(root, dir string, race bool, names []string) error {
	shared, unlock, err := sharedBuildDir(root, race)
	if err != nil {
		// No cache directory (no $HOME): build right where the copy goes.
		return goBuild(root, dir, race, names)
	}
	defer unlock()
	if err := goBuild(root, shared, race, names); err != nil {
		return err
	}
	for _, n := range names {
		if err := CopyFile(filepath.Join(shared, n), filepath.Join(dir, n), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// goBuild runs one go build for every name, which links them in parallel.
func goBuild(root, dir string, race bool, names []string) error {
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	if race {
		args = append(args, "-race")
	}
	for _, n := range names {
		args = append(args, "./cmd/"+n)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if !race {
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

// sharedBuildDir is the build directory of this checkout (root) and mode,
// locked until unlock is called.
func sharedBuildDir(root string, race bool) (dir string, unlock func(), err error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", nil, err
	}
	sum := sha256.Sum256([]byte(root))
	mode := "norace"
	if race {
		mode = "race"
	}
	dir = filepath.Join(cache, "agent-box-test", hex.EncodeToString(sum[:6])+"-"+mode)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, err
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return "", nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		lock.Close()
		return "", nil, err
	}
	return dir, func() { lock.Close() }, nil // closing drops the lock
}

// CopyFile copies src to a new file dst with mode perm. No fork may happen
// while dst is open for writing (syscall.ForkLock): a child forked then would hold
// the descriptor until its exec, and an exec of dst in between fails with
// ETXTBSY (golang.org/issue/22315). A test may build while others start
// processes.
func CopyFile(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	syscall.ForkLock.Lock()
	defer syscall.ForkLock.Unlock()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
