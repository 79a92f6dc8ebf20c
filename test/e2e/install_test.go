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
	"runtime"
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

// TestReadmeInstall follows the README's "Set up" verbatim on a stock
// Debian sshd, as a normal user and as root: `make install` on this
// machine (into a temporary PREFIX), `agent-box install box` with that
// agent-box first on PATH, then the client config's command and args, and
// the inspector commands, run as written. Nothing on the box is built: the
// box needs no Go. `ssh box` reaches the test's sshd through an ssh_config
// "Host box" entry, as a user's ~/.ssh/config would (sshBox).
//
// What is stock: sshd's config is the openssh-server package's pristine
// /usr/share/openssh/sshd_config (UsePAM yes, the default PATH and
// AuthorizedKeysFile), with only the listen address, port, host key, pid
// file, AllowUsers and LogLevel set on the command line. The normal user's
// shell is bash with /etc/skel's dot files (useradd -m); root's home is a
// fresh directory with Debian's stock root dot files (base-files'
// dot.profile and dot.bashrc) mounted over /root in a mount namespace of
// its own, so that the test touches neither root's real home nor its
// profile.
//
// The client config runs `agent-box connect box`; until connect is built
// (issue 31) the test runs what connect runs underneath, `ssh box --
// .local/bin/agent-box` (readmeInstall.server).
func TestReadmeInstall(t *testing.T) {
	// In parallel with the ssh lanes, and the two users with each other:
	// each has its own sshd, home and directory (root's in a mount
	// namespace of its own), and the user's home is locked.
	t.Parallel()
	if testing.Short() {
		t.Skip("install lane: builds agent-box and starts two sshds")
	}
	if !abtest.RaceEnabled {
		// What this lane runs is the same in both lanes: make install's
		// binaries (never race-built), sshd and the pinned inspector. So
		// make test, the README's test command, runs it, and the plain
		// lane (make test-plain, go test ./...) runs TestInstallCommand
		// instead, which goes further into agent-box install.
		t.Skip("install lane: runs under make test (-race) only; its binaries are make install's in either lane")
	}
	if os.Geteuid() != 0 {
		missing(t, "the install lane runs as root: it starts sshd for another user and installs into that user's home")
	}
	readme := readReadme(t)
	prefix := makeInstall(t, readme.install)
	t.Run("user", func(t *testing.T) {
		t.Parallel()
		u, err := user.Lookup(installUser)
		if err != nil {
			missing(t, "user %s does not exist (.ci/setup creates it): %v", installUser, err)
		}
		testReadmeInstall(t, readme, prefix, u)
	})
	t.Run("root", func(t *testing.T) {
		t.Parallel()
		u, err := user.LookupId("0")
		require.NoError(t, err)
		testReadmeInstall(t, readme, prefix, u)
	})
}

func testReadmeInstall(t *testing.T, readme readmeInstall, prefix string, u *user.User) {
	b := newUserBox(t, u)

	// agent-box install box, as the README says, with make install's
	// agent-box first on PATH (as ~/.local/bin is in a login shell).
	out, err := b.local(prefix, readme.boxInstall...).CombinedOutput()
	require.NoError(t, err, "%s as %s:\n%s", readme.boxInstall, u.Username, out)
	version := localVersion(t, prefix)
	require.Equal(t, "box: installed "+version+" (linux/"+runtime.GOARCH+") and agent-box-supervisor in .local/bin, from "+filepath.Join(prefix, "bin", "agent-box")+"\n", string(out))
	b.requireInstalled(prefix, "bin")
	out, err = b.run(".local/bin/agent-box version")
	require.NoError(t, err, "%s", out)
	require.Equal(t, version+"\n", string(out), "ssh box -- .local/bin/agent-box version")

	// The bug this lane is about: a command ssh runs does not have
	// ~/.local/bin on its PATH, even once it exists, so the plain name the
	// README once gave is not found. (Not asserted where some other
	// agent-box is on that PATH.)
	out, err = b.run(`echo "$PATH"`)
	require.NoError(t, err, "%s", out)
	path := strings.TrimSpace(string(out))
	require.NotContains(t, strings.Split(path, ":"), b.remoteHome+"/.local/bin",
		"a non-interactive ssh command has ~/.local/bin on its PATH here: this harness is not a stock sshd and profile")
	if !onPath(path, "agent-box") {
		out, err = b.run("agent-box")
		require.Error(t, err)
		require.Contains(t, string(out), "agent-box: command not found", "ssh box -- agent-box")
	}

	// The README's client config, run as written: `ssh` is the first on
	// PATH, where sshBox's wrapper adds the ssh_config naming "box".
	server := readme.server()
	cmd := b.local(prefix, server...)
	s := connect(t, cmd)

	var sleeper runInfo
	s.ok("process_start", map[string]any{"name": "sleeper", "argv": []any{"sleep", "300"}}, underRun(&sleeper))
	killAtCleanup(t, sleeper.PID)
	// agent-box found the supervisor agent-box install put beside it.
	_, _, ppid, err := procStat(sleeper.PID)
	require.NoError(t, err)
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", ppid))
	require.NoError(t, err)
	require.Equal(t, b.remoteHome+"/.local/bin/agent-box-supervisor", exe, "the run's supervisor")
	var k struct{}
	s.ok("process_kill", map[string]any{"name": "sleeper", "signal": "KILL"}, &k)

	var started struct {
		runInfo
		LogPath string `json:"log_path"`
	}
	s.ok("process_start", map[string]any{"name": "whoami", "command": "id -un"}, underRun(&started))
	// The default state dir, in the user's home.
	require.True(t, strings.HasPrefix(started.LogPath, b.remoteHome+"/.local/state/agent-box/"), "log_path %s", started.LogPath)
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
		stdout, stderr := runInspectorEnv(t, b.env(filepath.Join(prefix, "bin")), "", args...)
		var res map[string]any
		require.NoError(t, json.Unmarshal(stdout, &res), "inspector %v printed no JSON object:\n%s\nstderr: %s", args, stdout, stderr)
		require.NotEqual(t, true, res["isError"], "inspector %v: %s", args, stdout)
		require.NotRegexp(t, lint, string(stderr), "inspector %v", args)
	}
}

// makeInstall runs the README's make install (words) in this checkout,
// into a temporary PREFIX, and returns the prefix.
func makeInstall(t *testing.T, words []string) string {
	t.Helper()
	prefix := filepath.Join(t.TempDir(), "prefix")
	cmd := exec.Command(words[0], append(words[1:], "PREFIX="+prefix)...)
	cmd.Dir = repoRoot
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s PREFIX=%s:\n%s", words, prefix, out)
	for _, dir := range []string{"bin", "lib/agent-box/linux-amd64", "lib/agent-box/linux-arm64"} {
		for _, bin := range []string{"agent-box", "agent-box-supervisor"} {
			fi, err := os.Stat(filepath.Join(prefix, dir, bin))
			require.NoError(t, err, "make install did not put %s in PREFIX/%s:\n%s", bin, dir, out)
			require.NotZero(t, fi.Mode()&0o100, "%s is not executable", bin)
		}
	}
	return prefix
}

// localVersion is what make install's agent-box version prints, without
// the newline.
func localVersion(t *testing.T, prefix string) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(prefix, "bin", "agent-box"), "version").Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

// readmeInstall is what the README tells a user to run.
type readmeInstall struct {
	install    []string   // the make install command line
	boxInstall []string   // agent-box install box
	command    string     // the client config's command
	args       []string   // and its args
	inspector  [][]string // each inspector --cli command's arguments
}

// server is the command line the client config runs: agent-box connect
// box, which runs ssh box -- .local/bin/agent-box underneath.
func (r readmeInstall) server() []string {
	return append([]string{r.command}, r.args...)
}

func readReadme(t *testing.T) readmeInstall {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	require.NoError(t, err)
	readme := string(b)
	var r readmeInstall

	m := regexp.MustCompile("(?s)\n## Set up\n.*?```sh\n(.*?)```.*?```sh\n(.*?)```").FindStringSubmatch(readme)
	require.NotNil(t, m, "README has no two sh blocks under \"## Set up\"")
	first, _, _ := strings.Cut(strings.Split(m[1], "\n")[0], "#")
	r.install = strings.Fields(first)
	require.Equal(t, []string{"make", "install"}, r.install, "the README's first install command")
	first, _, _ = strings.Cut(strings.Split(m[2], "\n")[0], "#")
	r.boxInstall = strings.Fields(first)
	require.Equal(t, []string{"agent-box", "install", "box"}, r.boxInstall, "the README's install on the box")

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
	require.Equal(t, "agent-box", box.Command)
	require.Equal(t, []string{"connect", "box"}, box.Args, "the config's agent-box connect BOX")
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
	client := r.command + " " + strings.Join(r.args, " ")
	for _, line := range strings.Split(readme, "\n") {
		if rest, ok := strings.CutPrefix(line, npx); ok && strings.HasPrefix(rest, "--cli ") {
			rest, _, _ = strings.Cut(rest, "#")
			// The server command the inspector runs is the client config's.
			require.Contains(t, rest+" ", " "+client+" ", "inspector command %s", line)
			r.inspector = append(r.inspector, strings.Fields(rest))
		}
	}
	require.NotEmpty(t, r.inspector, "README has no %s--cli command", npx)
	return r
}

// userBox is a stock Debian sshd for user u on loopback, reached as `ssh
// box`, with u's home fresh: authorized_keys and stock dot files, nothing
// of agent-box.
type userBox struct {
	*boxSSH
	u                *user.User
	uid, gid         int
	home, remoteHome string // the home as this test sees it, and as the box's commands do
}

// newUserBox starts the sshd, with sshdOpts (-o ...) after the test's own.
func newUserBox(t *testing.T, u *user.User, sshdOpts ...string) *userBox {
	t.Helper()
	sshd := requireSSHD(t)
	b := &userBox{u: u, remoteHome: u.HomeDir}
	b.uid, _ = strconv.Atoi(u.Uid)
	b.gid, _ = strconv.Atoi(u.Gid)
	dir := t.TempDir()
	var wrap func(cmd *exec.Cmd) *exec.Cmd
	if b.uid == 0 {
		b.home, wrap = privateRootHome(t, dir, b.remoteHome)
	} else {
		b.home = resetUserHome(t, u)
		wrap = func(cmd *exec.Cmd) *exec.Cmd { return cmd }
	}

	hostKey, clientKey, pub := sshKeys(t, dir)
	// The stock AuthorizedKeysFile, .ssh/authorized_keys in the home.
	sshDir := filepath.Join(b.home, ".ssh")
	require.NoError(t, os.MkdirAll(sshDir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(sshDir, "authorized_keys"), pub, 0o600))
	chownTree(t, sshDir, b.uid, b.gid)

	config := "/usr/share/openssh/sshd_config"
	if _, err := os.Stat(config); err != nil {
		missing(t, "the stock sshd config %s is missing (Debian package openssh-server)", config)
	}
	port := listenSSHD(t, sshd, dir, func(port int) *exec.Cmd {
		return wrap(exec.Command(sshd, append([]string{"-D", "-e", "-f", config,
			"-o", "ListenAddress=127.0.0.1",
			"-o", "Port=" + strconv.Itoa(port),
			"-o", "HostKey=" + hostKey,
			"-o", "PidFile=" + filepath.Join(dir, "sshd.pid"),
			"-o", "AllowUsers=" + u.Username,
			"-o", "LogLevel=VERBOSE"}, sshdOpts...)...))
	})
	b.boxSSH = sshBox(t, dir, port, u.Username, clientKey)
	return b
}

// local is a command of this machine, argv, with the box's ssh first on
// PATH and then the dirs, where argv[0] is looked up.
func (b *userBox) local(prefix string, argv ...string) *exec.Cmd {
	env := b.env(filepath.Join(prefix, "bin"))
	// exec.Command looks a name up in this process's PATH, not env's.
	name := argv[0]
	path, _ := strings.CutPrefix(env[0], "PATH=")
	for _, d := range filepath.SplitList(path) {
		if onPath(d, argv[0]) {
			name = filepath.Join(d, argv[0])
			break
		}
	}
	cmd := exec.Command(name, argv[1:]...)
	cmd.Env = env
	return cmd
}

// requireInstalled checks that ~/.local/bin on the box holds agent-box
// and agent-box-supervisor, the user's, executable, and the same bytes as
// prefix/dir's.
func (b *userBox) requireInstalled(prefix, dir string) {
	t := b.t
	t.Helper()
	for _, bin := range []string{"agent-box", "agent-box-supervisor"} {
		p := filepath.Join(b.home, ".local", "bin", bin)
		fi, err := os.Stat(p)
		require.NoError(t, err, "agent-box install did not put %s in ~/.local/bin", bin)
		require.Equal(t, os.FileMode(0o755), fi.Mode().Perm(), "%s's mode", bin)
		require.Equal(t, uint32(b.uid), fi.Sys().(*syscall.Stat_t).Uid, "%s is not the user's", bin)
		got, err := os.ReadFile(p)
		require.NoError(t, err)
		want, err := os.ReadFile(filepath.Join(prefix, dir, bin))
		require.NoError(t, err)
		require.True(t, bytes.Equal(want, got), "%s on the box is not %s", bin, filepath.Join(prefix, dir, bin))
	}
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

// env is this process's environment with the wrapper first on PATH, and
// then dirs.
func (b *boxSSH) env(dirs ...string) []string {
	path := append(append([]string{b.dir}, dirs...), os.Getenv("PATH"))
	env := []string{"PATH=" + strings.Join(path, string(os.PathListSeparator))}
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
// has Debian's stock root dot files.
func privateRootHome(t *testing.T, dir, realHome string) (home string, wrap func(*exec.Cmd) *exec.Cmd) {
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
	script := "set -e\nmount --rbind " + shellQuote(home) + " " + shellQuote(realHome) + "\nexec \"$@\"\n"
	wrap = func(cmd *exec.Cmd) *exec.Cmd {
		// sh mounts, then execs the command (its path, absolute, as argv[0]
		// of "$@"): sshd keeps sh's pid.
		w := exec.Command("/bin/sh", append([]string{"-c", script, "sh", cmd.Path}, cmd.Args[1:]...)...)
		w.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
		return w
	}
	return home, wrap
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
		for _, p := range []string{".local/bin/agent-box", ".local/bin/agent-box-supervisor", ".local/state/agent-box", ".ssh/authorized_keys", ".ssh/environment", "fakebin"} {
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

func chownTree(t *testing.T, root string, uid, gid int) {
	t.Helper()
	require.NoError(t, filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	}))
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
