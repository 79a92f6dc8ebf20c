package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
)

// installUser is the normal user .ci/setup creates for this test: the test
// owns its home.
const installUser = "agent-box-e2e"

// TestReadmeInstall follows the README's "Install on a box" and "Point your
// agent at it" verbatim on a stock Debian sshd, as a normal user and as
// root: `make install` in a checkout in the user's home, then the client
// config's command and args, and the inspector commands, run as written.
// `ssh box` reaches the test's sshd through an ssh_config "Host box" entry,
// as a user's ~/.ssh/config would (sshBox).
//
// What is stock: sshd's config is the openssh-server package's pristine
// /usr/share/openssh/sshd_config (UsePAM yes, the default PATH and
// AuthorizedKeysFile), with only the listen address, port, host key, pid
// file, AllowUsers and LogLevel set on the command line. The normal user's
// shell is bash with /etc/skel's dot files (useradd -m); root's home is a
// fresh directory with Debian's stock root dot files (base-files'
// dot.profile and dot.bashrc) mounted over /root in a mount namespace of
// its own, so that the test touches neither root's real home nor its
// profile. What is not: the checkout is a copy of this one's working tree,
// without .git (VERSION is then "dev"); make runs with Go's bin on PATH, as
// in the README's "Try it", and, for root, with the test's Go caches
// (hidden by the mount), so that it builds offline.
func TestReadmeInstall(t *testing.T) {
	// In parallel with the ssh lanes, and the two users with each other:
	// each has its own sshd, home and directory (root's in a mount
	// namespace of its own), and the user's home is locked.
	t.Parallel()
	if testing.Short() {
		t.Skip("install lane: builds agent-box as two users and starts two sshds")
	}
	if !abtest.RaceEnabled {
		// What this lane runs is the same in both lanes: make install's
		// binaries (never race-built), sshd and the pinned inspector. So
		// make test, the README's test command, runs it, and the plain
		// lane (make test-plain, go test ./...) does not run it a second time: it is a
		// fifth of that lane's CPU.
		t.Skip("install lane: runs under make test (-race) only; its binaries are make install's in either lane")
	}
	if os.Geteuid() != 0 {
		missing(t, "the install lane runs as root: it starts sshd for another user and builds in that user's home")
	}
	readme := readReadme(t)
	t.Run("user", func(t *testing.T) {
		t.Parallel()
		u, err := user.Lookup(installUser)
		if err != nil {
			missing(t, "user %s does not exist (.ci/setup creates it): %v", installUser, err)
		}
		testReadmeInstall(t, readme, u)
	})
	t.Run("root", func(t *testing.T) {
		t.Parallel()
		u, err := user.LookupId("0")
		require.NoError(t, err)
		testReadmeInstall(t, readme, u)
	})
}

func testReadmeInstall(t *testing.T, readme readmeInstall, u *user.User) {
	sshd := requireSSHD(t)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	remoteHome := u.HomeDir // the home as the remote commands see it
	dir := t.TempDir()
	var home string // the same directory as this test sees it
	var goEnv []string
	var wrap func(cmd *exec.Cmd) *exec.Cmd
	if uid == 0 {
		home, goEnv, wrap = privateRootHome(t, dir, remoteHome)
	} else {
		home = resetUserHome(t, u)
		wrap = func(cmd *exec.Cmd) *exec.Cmd { return cmd }
	}

	// The checkout, on the box, in the user's home.
	src := filepath.Join(home, "src", "agent-box")
	copyCheckout(t, src)
	chownTree(t, filepath.Join(home, "src"), uid, gid)

	hostKey, clientKey, pub := sshKeys(t, dir)
	// The stock AuthorizedKeysFile, .ssh/authorized_keys in the home.
	sshDir := filepath.Join(home, ".ssh")
	require.NoError(t, os.MkdirAll(sshDir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(sshDir, "authorized_keys"), pub, 0o600))
	chownTree(t, sshDir, uid, gid)

	config := "/usr/share/openssh/sshd_config"
	if _, err := os.Stat(config); err != nil {
		missing(t, "the stock sshd config %s is missing (Debian package openssh-server)", config)
	}
	port := listenSSHD(t, sshd, dir, func(port int) *exec.Cmd {
		return wrap(exec.Command(sshd, "-D", "-e", "-f", config,
			"-o", "ListenAddress=127.0.0.1",
			"-o", "Port="+strconv.Itoa(port),
			"-o", "HostKey="+hostKey,
			"-o", "PidFile="+filepath.Join(dir, "sshd.pid"),
			"-o", "AllowUsers="+u.Username,
			"-o", "LogLevel=VERBOSE"))
	})
	box := sshBox(t, dir, port, u.Username, clientKey)

	// make install, as the README says, in the checkout.
	makeCmd := "export PATH=" + shellQuote(filepath.Dir(goBinary(t))) + ":$PATH"
	for _, kv := range goEnv {
		makeCmd += " " + shellQuote(kv)
	}
	makeCmd += "; cd src/agent-box && " + strings.Join(readme.install, " ")
	out, err := box.run(makeCmd)
	require.NoError(t, err, "%s as %s:\n%s", readme.install, u.Username, out)
	for _, bin := range []string{"agent-box", "agent-box-supervisor"} {
		fi, err := os.Stat(filepath.Join(home, ".local", "bin", bin))
		require.NoError(t, err, "make install did not put %s in ~/.local/bin:\n%s", bin, out)
		require.NotZero(t, fi.Mode()&0o100, "%s is not executable", bin)
		require.Equal(t, uint32(uid), fi.Sys().(*syscall.Stat_t).Uid, "%s is not the user's", bin)
	}

	// The bug this lane is about: a command ssh runs does not have
	// ~/.local/bin on its PATH, even once it exists, so the plain name the
	// README once gave is not found. (Not asserted where some other
	// agent-box is on that PATH.)
	out, err = box.run(`echo "$PATH"`)
	require.NoError(t, err, "%s", out)
	path := strings.TrimSpace(string(out))
	require.NotContains(t, strings.Split(path, ":"), remoteHome+"/.local/bin",
		"a non-interactive ssh command has ~/.local/bin on its PATH here: this harness is not a stock sshd and profile")
	if !onPath(path, "agent-box") {
		out, err = box.run("agent-box")
		require.Error(t, err)
		require.Contains(t, string(out), "agent-box: command not found", "ssh box -- agent-box")
	}

	// The README's client config, run as written: `ssh` is the first on
	// PATH, where sshBox's wrapper adds the ssh_config naming "box".
	cmd := exec.Command(readme.command, readme.args...)
	cmd.Path = box.ssh
	cmd.Env = box.env()
	s := connect(t, cmd)

	var sleeper runInfo
	s.ok("process_start", map[string]any{"name": "sleeper", "argv": []any{"sleep", "300"}}, &sleeper)
	killAtCleanup(t, sleeper.PID)
	// agent-box found the supervisor make install put beside it.
	_, _, ppid, err := procStat(sleeper.PID)
	require.NoError(t, err)
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", ppid))
	require.NoError(t, err)
	require.Equal(t, remoteHome+"/.local/bin/agent-box-supervisor", exe, "the run's supervisor")
	var k struct{}
	s.ok("process_kill", map[string]any{"name": "sleeper", "signal": "KILL"}, &k)

	var started struct {
		runInfo
		LogPath string `json:"log_path"`
	}
	s.ok("process_start", map[string]any{"name": "whoami", "command": "id -un"}, &started)
	// The default state dir, in the user's home.
	require.True(t, strings.HasPrefix(started.LogPath, remoteHome+"/.local/state/agent-box/"), "log_path %s", started.LogPath)
	var w waitOut
	s.ok("process_wait", map[string]any{"name": "whoami", "timeout_ms": 30000}, &w)
	require.Equal(t, "exited", w.Run.State)
	require.NotNil(t, w.Run.ExitCode)
	require.Equal(t, 0, *w.Run.ExitCode)
	var tail tailOut
	s.ok("tail_log", map[string]any{"name": "whoami"}, &tail)
	require.Equal(t, u.Username+"\n", tail.Content, "the run runs as the ssh user")
	s.ok("process_wait", map[string]any{"name": "sleeper", "timeout_ms": 30000}, &w)
	require.Equal(t, "exited", w.Run.State)
	s.close()

	// The README's inspector commands, with the pinned inspector.
	if _, err := os.Stat(filepath.Join(repoRoot, inspectorBin)); err != nil {
		missing(t, "the MCP Inspector is not installed at %s", inspectorBin)
	}
	lint := regexp.MustCompile(`(?m)^(Warning|Error): tool |^\d+ errors?, \d+ warnings? across `)
	for _, args := range readme.inspector {
		stdout, stderr := runInspectorEnv(t, box.env(), "", args...)
		var res map[string]any
		require.NoError(t, json.Unmarshal(stdout, &res), "inspector %v printed no JSON object:\n%s\nstderr: %s", args, stdout, stderr)
		require.NotEqual(t, true, res["isError"], "inspector %v: %s", args, stdout)
		require.NotRegexp(t, lint, string(stderr), "inspector %v", args)
	}
}

// readmeInstall is what the README tells a user to run.
type readmeInstall struct {
	install   []string   // the make install command line
	command   string     // the client config's command
	args      []string   // and its args
	inspector [][]string // each inspector --cli command's arguments
}

func readReadme(t *testing.T) readmeInstall {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	require.NoError(t, err)
	readme := string(b)
	var r readmeInstall

	m := regexp.MustCompile("(?s)\n## Install on a box\n.*?```sh\n(.*?)```").FindStringSubmatch(readme)
	require.NotNil(t, m, "README has no sh block under \"## Install on a box\"")
	first, _, _ := strings.Cut(strings.Split(m[1], "\n")[0], "#")
	r.install = strings.Fields(first)
	require.Equal(t, []string{"make", "install"}, r.install, "the README's first install command")

	m = regexp.MustCompile("(?s)```json\n(.*?)```").FindStringSubmatch(readme)
	require.NotNil(t, m, "README has no JSON client config")
	var cfg struct {
		MCPServers map[string]struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"mcpServers"`
	}
	require.NoError(t, json.Unmarshal([]byte(m[1]), &cfg))
	box := cfg.MCPServers["box"]
	require.Equal(t, "ssh", box.Command)
	require.NotEmpty(t, box.Args)
	require.Equal(t, "box", box.Args[0], "the config's ssh destination")
	r.command, r.args = box.Command, box.Args

	// Codex's TOML says the same (its array of strings is JSON too).
	m = regexp.MustCompile("(?s)```toml\n.*?\ncommand = \"([^\"]*)\"\nargs = (\\[.*?\\])\n").FindStringSubmatch(readme)
	require.NotNil(t, m, "README has no Codex config")
	var tomlArgs []string
	require.NoError(t, json.Unmarshal([]byte(m[2]), &tomlArgs))
	require.Equal(t, r.command, m[1], "the Codex config's command")
	require.Equal(t, r.args, tomlArgs, "the Codex config's args")

	// The inspector commands name the pinned version.
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	b, err = os.ReadFile(filepath.Join(repoRoot, "testdata/fixtures/e2e/inspector/package.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &pkg))
	npx := "npx @modelcontextprotocol/inspector@" + pkg.Dependencies["@modelcontextprotocol/inspector"] + " "
	for _, line := range strings.Split(readme, "\n") {
		if rest, ok := strings.CutPrefix(line, npx); ok && strings.HasPrefix(rest, "--cli ") {
			rest, _, _ = strings.Cut(rest, "#")
			r.inspector = append(r.inspector, strings.Fields(rest))
		}
	}
	require.NotEmpty(t, r.inspector, "README has no %s--cli command", npx)
	for _, args := range r.inspector {
		// The server command the inspector runs is the client config's.
		require.Contains(t, strings.Join(args, " ")+" ", " ssh "+strings.Join(r.args, " ")+" ", "inspector command %v", args)
	}
	return r
}

// boxSSH is `ssh box` for this test's sshd: a directory holding an ssh that
// runs the real one with an ssh_config whose "Host box" entry names the
// test's port, user and key.
type boxSSH struct {
	t   *testing.T
	dir string // holds ssh
	ssh string
}

func sshBox(t *testing.T, dir string, port int, userName, key string) *boxSSH {
	t.Helper()
	real := lookPath("ssh", "/usr/bin/ssh")
	config := filepath.Join(dir, "ssh_config")
	require.NoError(t, os.WriteFile(config, []byte(strings.Join([]string{
		"Host box",
		"  HostName 127.0.0.1",
		"  Port " + strconv.Itoa(port),
		"  User " + userName,
		"  IdentityFile " + key,
		"  IdentitiesOnly yes",
		"  IdentityAgent none",
		"  BatchMode yes",
		"  StrictHostKeyChecking no",
		"  UserKnownHostsFile /dev/null",
		"  LogLevel ERROR",
		"  ConnectTimeout 15",
		"",
	}, "\n")), 0o600))
	bin := filepath.Join(dir, "bin")
	require.NoError(t, os.Mkdir(bin, 0o755))
	wrapper := filepath.Join(bin, "ssh")
	require.NoError(t, os.WriteFile(wrapper, []byte("#!/bin/sh\nexec "+shellQuote(real)+" -F "+shellQuote(config)+` "$@"`+"\n"), 0o755))
	return &boxSSH{t: t, dir: bin, ssh: wrapper}
}

// env is this process's environment with the wrapper first on PATH.
func (b *boxSSH) env() []string {
	env := []string{"PATH=" + b.dir + string(os.PathListSeparator) + os.Getenv("PATH")}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	return env
}

// run runs `ssh box -- remote` and returns its combined output.
func (b *boxSSH) run(remote string) ([]byte, error) {
	cmd := exec.Command(b.ssh, "box", "--", remote)
	cmd.Env = b.env()
	cmd.Stdin = nil
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.Bytes(), err
	case <-time.After(5 * time.Minute):
		// A bound against hanging: a cold make install takes a minute or two.
		cmd.Process.Kill()
		<-done
		return out.Bytes(), errors.New("ssh box: no end after 5 minutes")
	}
}

// privateRootHome makes dir/root root's home (realHome, /root) for sshd
// and everything it starts: the returned wrap runs a command in a mount
// namespace of its own where dir/root is mounted over realHome. The home
// has Debian's stock root dot files. The test's Go caches, when under
// realHome, are mounted into it at the same paths, and goEnv names them
// for make.
func privateRootHome(t *testing.T, dir, realHome string) (home string, goEnv []string, wrap func(*exec.Cmd) *exec.Cmd) {
	t.Helper()
	// Go makes a new mount namespace's mounts private (SysProcAttr's
	// Unshareflags), so nothing mounted in it reaches the machine's own.
	probe := exec.Command("/bin/sh", "-c", ":")
	probe.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	if err := probe.Run(); err != nil {
		missing(t, "no mount namespace for the root lane: %v", err)
	}
	home = filepath.Join(dir, "root")
	require.NoError(t, os.Mkdir(home, 0o700))
	for _, f := range []string{"profile", "bashrc"} {
		b, err := os.ReadFile("/usr/share/base-files/dot." + f)
		if err != nil {
			missing(t, "Debian's stock root dot files are missing (package base-files): %v", err)
		}
		require.NoError(t, os.WriteFile(filepath.Join(home, "."+f), b, 0o644))
	}
	script := "set -e\n"
	for _, v := range []string{"GOCACHE", "GOMODCACHE"} {
		out, err := exec.Command(goBinary(t), "env", v).Output()
		require.NoError(t, err, "go env %s", v)
		p := strings.TrimSpace(string(out))
		goEnv = append(goEnv, v+"="+p)
		rel, err := filepath.Rel(realHome, p)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue // not under /root: visible as it is
		}
		require.NoError(t, os.MkdirAll(filepath.Join(home, rel), 0o755))
		script += "mount --bind " + shellQuote(p) + " " + shellQuote(filepath.Join(home, rel)) + "\n"
	}
	script += "mount --rbind " + shellQuote(home) + " " + shellQuote(realHome) + "\nexec \"$@\"\n"
	wrap = func(cmd *exec.Cmd) *exec.Cmd {
		// sh mounts, then execs the command (its path, absolute, as argv[0]
		// of "$@"): sshd keeps sh's pid.
		w := exec.Command("/bin/sh", append([]string{"-c", script, "sh", cmd.Path}, cmd.Args[1:]...)...)
		w.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
		return w
	}
	return home, goEnv, wrap
}

// resetUserHome gives the install user's home back its stock dot files
// and nothing of an earlier run, and takes away what this run adds when
// it ends.
func resetUserHome(t *testing.T, u *user.User) string {
	t.Helper()
	home := u.HomeDir
	// One home, so test processes that run this lane at once (a race and
	// a plain go test) take turns; unlocked last, after the cleanup below.
	lock, err := os.OpenFile(filepath.Join(home, ".agent-box-e2e.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(t, err)
	require.NoError(t, syscall.Flock(int(lock.Fd()), syscall.LOCK_EX))
	t.Cleanup(func() { lock.Close() })
	clean := func() {
		for _, p := range []string{".local/bin/agent-box", ".local/bin/agent-box-supervisor", ".local/state/agent-box", "src/agent-box", ".ssh/authorized_keys"} {
			require.NoError(t, os.RemoveAll(filepath.Join(home, p)))
		}
	}
	clean()
	t.Cleanup(clean)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	skel, err := os.ReadDir("/etc/skel")
	require.NoError(t, err)
	for _, e := range skel {
		if e.Type().IsRegular() {
			b, err := os.ReadFile(filepath.Join("/etc/skel", e.Name()))
			require.NoError(t, err)
			dst := filepath.Join(home, e.Name())
			require.NoError(t, os.WriteFile(dst, b, 0o644))
			require.NoError(t, os.Chown(dst, uid, gid))
		}
	}
	return home
}

// copyCheckout copies this checkout's working tree (tracked files and
// untracked ones not ignored) to dst.
func copyCheckout(t *testing.T, dst string) {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		missing(t, "git ls-files in %s: %v", repoRoot, err)
	}
	for _, name := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		from := filepath.Join(repoRoot, name)
		fi, err := os.Lstat(from)
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the working tree, or not a file
		}
		to := filepath.Join(dst, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(to), 0o755))
		require.NoError(t, abtest.CopyFile(from, to, fi.Mode().Perm()))
	}
}

func chownTree(t *testing.T, root string, uid, gid int) {
	t.Helper()
	require.NoError(t, filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	}))
}

// goBinary is the go command the test runs with.
func goBinary(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("go")
	require.NoError(t, err)
	p, err = filepath.Abs(p)
	require.NoError(t, err)
	return p
}

// onPath reports whether a directory of path holds an executable name.
func onPath(path, name string) bool {
	for _, d := range strings.Split(path, ":") {
		if fi, err := os.Stat(filepath.Join(d, name)); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return true
		}
	}
	return false
}
