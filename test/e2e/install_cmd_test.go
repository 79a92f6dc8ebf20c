package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
)

// TestInstallCommand drives agent-box install over a stock sshd as the
// normal user, past what the README shows: an unknown host key, a
// reinstall under a running server and run, builds from --from, and boxes
// of a platform with no build or none at all (a fake uname on the box's
// PATH, through ~/.ssh/environment).
func TestInstallCommand(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("install lane: builds agent-box and starts sshd")
	}
	if abtest.RaceEnabled {
		// Its binaries are make install's in either lane; the race lane
		// runs TestReadmeInstall, the plain lane this.
		t.Skip("install lane: runs in the plain lane (go test ./..., make test-plain) only")
	}
	if os.Geteuid() != 0 {
		missing(t, "the install lane runs as root: it starts sshd for another user and installs into that user's home")
	}
	u, err := user.Lookup(installUser)
	if err != nil {
		missing(t, "user %s does not exist (.ci/setup creates it): %v", installUser, err)
	}
	prefix := makeInstall(t, []string{"make", "install"})
	b := newUserBox(t, u, "-o", "PermitUserEnvironment=PATH")
	install := func(args ...string) (string, int) {
		t.Helper()
		out, err := b.local(prefix, append([]string{"agent-box", "install"}, args...)...).CombinedOutput()
		code := 0
		if err != nil {
			ee, ok := err.(*exec.ExitError)
			require.True(t, ok, "agent-box install: %v", err)
			code = ee.ExitCode()
		}
		return string(out), code
	}
	bin := filepath.Join(b.home, ".local", "bin")

	// An unknown host key: ssh's own words, the box named, nothing done.
	out, code := install("-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=/dev/null", "box")
	require.Equal(t, 1, code, out)
	require.True(t, strings.HasPrefix(out, "agent-box install: asking box for its OS and architecture (uname -sm): ssh box failed:\n"), out)
	require.Contains(t, out, "and you have requested strict checking.\nHost key verification failed.\n", "ssh's words, verbatim")
	_, err = os.Stat(filepath.Join(bin, "agent-box"))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing installed")

	// The first install: this machine's agent-box is the box's build.
	version := localVersion(t, prefix)
	out, code = install("box")
	require.Equal(t, 0, code, out)
	require.Equal(t, "box: installed "+version+" (linux/"+runtime.GOARCH+") and agent-box-supervisor in .local/bin, from "+filepath.Join(prefix, "bin", "agent-box")+"\n", out)
	b.requireInstalled(prefix, "bin")
	ver, err := b.run(".local/bin/agent-box version")
	require.NoError(t, err, "%s", ver)
	require.Equal(t, version+"\n", string(ver))

	// A reinstall while a server runs, and a run's supervisor: both keep
	// their old files (replaced, not written into: that would be ETXTBSY),
	// and go on serving.
	s := connect(t, b.local(prefix, "ssh", "box", "--", ".local/bin/agent-box"))
	var sleeper runInfo
	s.ok("process_start", map[string]any{"name": "sleeper", "argv": []any{"sleep", "300"}}, underRun(&sleeper))
	killAtCleanup(t, sleeper.PID)
	_, _, sup, err := procStat(sleeper.PID)
	require.NoError(t, err)
	supExe := func() string {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", sup))
		require.NoError(t, err)
		return exe
	}
	require.Equal(t, b.remoteHome+"/.local/bin/agent-box-supervisor", supExe())
	before := inode(t, filepath.Join(bin, "agent-box"))

	lib := filepath.Join(prefix, "lib", "agent-box")
	out, code = install("--from", lib, "box")
	require.Equal(t, 0, code, out)
	require.True(t, strings.HasSuffix(out, "from "+filepath.Join(lib, "linux-"+runtime.GOARCH)+"\n"), "make install's build for the box: %s", out)
	b.requireInstalled(lib, "linux-"+runtime.GOARCH)
	require.NotEqual(t, before, inode(t, filepath.Join(bin, "agent-box")), "a new file, renamed into place")
	require.Equal(t, b.remoteHome+"/.local/bin/agent-box-supervisor (deleted)", supExe(), "the running supervisor keeps the file it runs")
	var k struct{}
	s.ok("process_kill", map[string]any{"name": "sleeper", "signal": "KILL"}, &k)
	var w waitOut
	s.ok("process_wait", map[string]any{"name": "sleeper", "timeout_ms": 30000}, &w)
	require.Equal(t, "exited", w.Run.State, "the old server and supervisor serve on")
	s.close()
	s = connect(t, b.local(prefix, "ssh", "box", "--", ".local/bin/agent-box"))
	var l listOut
	s.ok("process_list", map[string]any{}, &l)
	require.Len(t, l.Runs, 1, "the new server reads the old one's runs")
	s.close()

	// make install-remote: builds for the box's platform (agent-box
	// install --print-platform asks it) and installs that. BIN keeps the
	// builds out of the checkout's bin/.
	builds := filepath.Join(t.TempDir(), "bin")
	mk := b.local(prefix, "make", "install-remote", "BOX=box", "BIN="+filepath.Join(builds, "agent-box"))
	mk.Dir = repoRoot
	mkOut, err := mk.CombinedOutput()
	require.NoError(t, err, "make install-remote BOX=box:\n%s", mkOut)
	require.Contains(t, string(mkOut), "box: installed "+version+" (linux/"+runtime.GOARCH+") and agent-box-supervisor in .local/bin, from "+filepath.Join(builds, "linux-"+runtime.GOARCH)+"\n")
	b.requireInstalled(builds, "linux-"+runtime.GOARCH)

	// Boxes of other platforms: uname on the box says so (PATH from
	// ~/.ssh/environment, which PermitUserEnvironment=PATH lets sshd read).
	installed := inode(t, filepath.Join(bin, "agent-box"))
	fake := filepath.Join(b.home, "fakebin")
	require.NoError(t, os.MkdirAll(fake, 0o755))
	env := filepath.Join(b.home, ".ssh", "environment")
	require.NoError(t, os.WriteFile(env, []byte("PATH="+b.remoteHome+"/fakebin:/usr/bin:/bin\n"), 0o600))
	for _, tc := range []struct {
		uname string
		want  []string
	}{
		{"Linux riscv64", []string{
			"agent-box install: box is linux/riscv64: no agent-box build for linux/riscv64 here:\n",
			"  " + filepath.Join(prefix, "bin", "agent-box") + " is built for " + runtime.GOARCH + ", not riscv64\n",
			"  " + filepath.Join(lib, "linux-riscv64", "agent-box") + ": not there\n",
			"make install-remote BOX=HOST",
			"GOOS=linux GOARCH=riscv64 CGO_ENABLED=0 go build -o DIR/linux-riscv64/ ./cmd/agent-box ./cmd/agent-box-supervisor",
		}},
		{"Darwin arm64", []string{"agent-box install: box: unsupported box: the box runs Darwin (uname -s); agent-box runs processes on Linux boxes only\n"}},
		{"Linux sparc64", []string{"agent-box install: box: unsupported box: the box's machine is sparc64 (uname -m), for which Go builds no Linux binaries\n"}},
	} {
		require.NoError(t, os.WriteFile(filepath.Join(fake, "uname"), []byte("#!/bin/sh\necho "+shellQuote(tc.uname)+"\n"), 0o755))
		chownTree(t, fake, b.uid, b.gid)
		chownTree(t, env, b.uid, b.gid)
		out, code := install("box")
		require.Equal(t, 1, code, "%s: %s", tc.uname, out)
		for _, w := range tc.want {
			require.Contains(t, out, w, tc.uname)
		}
		require.Equal(t, installed, inode(t, filepath.Join(bin, "agent-box")), "%s: nothing copied", tc.uname)
	}
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Sys().(*syscall.Stat_t).Ino
}
