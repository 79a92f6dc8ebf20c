package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// sshServer is an sshd the test started for itself: its own host key, one
// authorized client key, listening on 127.0.0.1 only, in the foreground as
// a child of the test. The system's sshd (if any) is never used.
type sshServer struct {
	port int
	user string
	key  string // the client's private key
}

// sshKeys makes a host key and a client key in dir: their paths, and the
// client's public key for an authorized_keys file.
func sshKeys(t *testing.T, dir string) (hostKey, clientKey string, clientPub []byte) {
	t.Helper()
	hostKey = filepath.Join(dir, "host_ed25519")
	clientKey = filepath.Join(dir, "client_ed25519")
	keygen(t, hostKey)
	keygen(t, clientKey)
	pub, err := os.ReadFile(clientKey + ".pub")
	require.NoError(t, err)
	return hostKey, clientKey, pub
}

func startSSHD(t *testing.T) *sshServer {
	t.Helper()
	sshd := requireSSHD(t)
	u, err := user.Current()
	require.NoError(t, err)

	dir := t.TempDir()
	hostKey, clientKey, pub := sshKeys(t, dir)
	authorized := filepath.Join(dir, "authorized_keys")
	require.NoError(t, os.WriteFile(authorized, pub, 0o600))
	// Registered before sshd's own cleanup, so it runs after sshd stopped.
	race := filepath.Join(dir, "race")
	t.Cleanup(func() { checkRaceLogs(t, race) })

	port := listenSSHD(t, sshd, dir, func(port int) *exec.Cmd {
		config := filepath.Join(dir, fmt.Sprintf("sshd_config.%d", port))
		require.NoError(t, os.WriteFile(config, []byte(sshdConfig(port, dir, hostKey, authorized, u.Username, race)), 0o600))
		return exec.Command(sshd, "-D", "-e", "-f", config)
	})
	return &sshServer{port: port, user: u.Username, key: clientKey}
}

// requireSSHD returns the path of sshd, once the tools the ssh lanes need
// are known to be there; it skips the test, or fails it in CI, otherwise.
func requireSSHD(t *testing.T) string {
	t.Helper()
	sshd := lookPath("sshd", "/usr/sbin/sshd")
	if sshd == "" {
		missing(t, "sshd (Debian package openssh-server) is not installed")
	}
	for _, tool := range []string{"ssh", "ssh-keygen"} {
		if lookPath(tool, "/usr/bin/"+tool) == "" {
			missing(t, "%s (Debian package openssh-client) is not installed", tool)
		}
	}
	if os.Geteuid() == 0 {
		// sshd running as root chroots its pre-auth child into this
		// directory and will not start without it; only the service's start
		// script creates it, and the tests never start the service.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			missing(t, "sshd's privilege separation directory /run/sshd is missing (%v)", err)
		}
	}
	return sshd
}

// listenSSHD runs the sshd that command gives for a free port and returns
// the port once it accepts connections. The port is chosen by binding :0
// and closing it, so another process may take it before sshd binds; sshd
// then exits and we try another.
func listenSSHD(t *testing.T, sshd, dir string, command func(port int) *exec.Cmd) int {
	t.Helper()
	for attempt := 1; ; attempt++ {
		port := freePort(t)
		logPath := filepath.Join(dir, fmt.Sprintf("sshd.%d.log", attempt))
		err := runSSHD(t, command(port), sshd, port, logPath)
		if err == nil {
			return port
		}
		log, _ := os.ReadFile(logPath)
		if attempt < 3 && strings.Contains(string(log), "Address already in use") {
			continue
		}
		t.Fatalf("sshd: %v\n%s", err, log)
	}
}

func sshdConfig(port int, dir, hostKey, authorized, userName, race string) string {
	return strings.Join([]string{
		"ListenAddress 127.0.0.1",
		"Port " + strconv.Itoa(port),
		"HostKey " + hostKey,
		"PidFile " + filepath.Join(dir, "sshd.pid"),
		"AuthorizedKeysFile " + authorized,
		"AllowUsers " + userName,
		"UsePAM no",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"PubkeyAuthentication yes",
		"PermitRootLogin prohibit-password",
		// The key files live in t.TempDir, whose parents sshd's ownership
		// checks would reject.
		"StrictModes no",
		"PrintMotd no",
		"LogLevel VERBOSE",
		// For an agent-box built with -race: no 1 s pause at every exit,
		// and reports in files the test reads (a server's stderr goes to a
		// client that may be dead).
		//
		// SHLVL=1: bash run by sshd reads ~/.bashrc unless SHLVL says it
		// is a nested shell. The user's rc is not what these tests test,
		// and one that sets up a toolchain (pyenv init) costs a second of
		// CPU per connection, some thirty times a run. (sshd takes only
		// its first SetEnv line: both go on this one.)
		`SetEnv GORACE="atexit_sleep_ms=0 log_path=` + race + `" SHLVL=1`,
		"",
	}, "\n")
}

// runSSHD starts cmd, an sshd -D -e (or a wrapper that execs one), as a
// child of the test in its own process group and returns once its port
// accepts connections. t.Cleanup stops it and every sshd process below
// it, whether or not the test failed.
func runSSHD(t *testing.T, cmd *exec.Cmd, sshd string, port int, logPath string) error {
	logf, err := os.Create(logPath)
	require.NoError(t, err)
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		stopSSHD(t, pid, sshd, exited)
		if t.Failed() {
			if b, _ := os.ReadFile(logPath); len(b) > 0 {
				t.Logf("sshd log (%s):\n%s", logPath, b)
			}
		}
	})

	// sshd says nothing on its own when it starts listening but to its log;
	// a connection that is accepted is the fact that matters.
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case <-exited:
			return fmt.Errorf("sshd exited before accepting connections: %v", waitErr)
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("port %d not accepting after 20s: %v", port, err)
		}
		time.Sleep(20 * time.Millisecond) // polling; no event says "listening"
	}
}

// stopSSHD SIGKILLs the listening sshd, its process group, and the
// per-connection sshd processes forked below it (which may have left the
// group), each by pid and only if it is still the process we saw.
func stopSSHD(t *testing.T, pid int, sshd string, exited <-chan struct{}) {
	type proc struct {
		pid   int
		start uint64
	}
	var conns []proc
	for _, p := range descendants(pid) {
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p)); err == nil && sameFile(exe, sshd) {
			if _, start, _, err := procStat(p); err == nil {
				conns = append(conns, proc{p, start})
			}
		}
	}
	syscall.Kill(-pid, syscall.SIGKILL) // the group is pid's own (Setpgid)
	for _, c := range conns {
		if alive(c.pid, c.start) {
			syscall.Kill(c.pid, syscall.SIGKILL)
		}
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Errorf("sshd (pid %d) still running 10s after SIGKILL", pid)
	}
}

// command returns ssh running remote (each argument quoted for the remote
// shell) as the test user on this sshd.
func (s *sshServer) command(remote ...string) *exec.Cmd {
	args := []string{
		"-F", "/dev/null", // no user or system client config
		"-T",
		"-p", strconv.Itoa(s.port),
		"-i", s.key,
		"-o", "IdentitiesOnly=yes",
		"-o", "IdentityAgent=none",
		"-o", "BatchMode=yes",
		"-o", "StrictHostKeyChecking=no",
		"-o", "UserKnownHostsFile=/dev/null",
		"-o", "LogLevel=ERROR",
		"-o", "ConnectTimeout=15",
		s.user + "@127.0.0.1",
		"--",
	}
	for _, a := range remote {
		args = append(args, shellQuote(a))
	}
	return exec.Command("ssh", args...)
}

func keygen(t *testing.T, path string) {
	t.Helper()
	out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "agent-box-e2e", "-f", path).CombinedOutput()
	require.NoError(t, err, "ssh-keygen: %s", out)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func lookPath(name, fallback string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if fi, err := os.Stat(fallback); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
		return fallback
	}
	return ""
}

func sameFile(a, b string) bool {
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}

// shellQuote quotes s for a POSIX shell: ssh joins the remote command's
// arguments with spaces and the login shell splits them again.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-=:,+@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// checkRaceLogs fails the test for every race report that an agent-box
// server or supervisor started through sshd wrote (GORACE log_path=prefix).
func checkRaceLogs(t *testing.T, prefix string) {
	t.Helper()
	logs, _ := filepath.Glob(prefix + ".*")
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		t.Errorf("race detector report from the remote side (%s):\n%s", l, b)
	}
}
