package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agent-box/agent-box/internal/abtest"
	"github.com/stretchr/testify/require"
)

// The docker lane's box is a container on this machine's dockerd, reached
// through `docker exec -i CT agent-box` as an agent's MCP client (or
// agent-box connect --exec) reaches it. Its image is made by docker import
// from a tarball this package writes: a static agent-box and
// agent-box-supervisor built from this checkout, and Debian's static
// busybox for /bin/sh and the rest. No registry is ever asked, and the
// containers have no network (--network none).
//
// .ci/setup installs docker.io and busybox-static and starts containerd
// and dockerd. Where dockerd cannot start on the machine at all, .ci/setup
// writes why to dockerdUnavailable, and the lane skips with that reason
// even under CI=1; any other absence is a broken setup, which CI fails.

const (
	// boxAgentBox is agent-box's path in the image; the supervisor lies
	// beside it, as make install puts it. /usr/local/bin is on the image's
	// PATH too, so "agent-box" alone also runs it.
	boxAgentBox = "/usr/local/bin/agent-box"
	// dockerLabel marks the images and containers the lane makes, so that
	// any a killed test binary left behind can be found:
	// docker ps -a --filter label=agent-box-e2e.
	dockerLabel = "agent-box-e2e"
	// dockerdUnavailable, under the checkout, holds why .ci/setup could
	// not start dockerd on this machine.
	dockerdUnavailable = ".tools/dockerd-unavailable"
	// dockerTimeout bounds every docker command but the exec sessions: a
	// dockerd that stops answering fails the test instead of hanging it.
	dockerTimeout = 2 * time.Minute
)

// dockerBox is a container the test started for itself from the lane's
// image, running busybox's `sleep infinity` as its pid 1 (as many
// devcontainers do: nothing there reaps orphans, which a supervisor whose
// server has gone becomes), with no network. It is removed, with every
// process in it, when the test ends.
type dockerBox struct {
	t    *testing.T
	name string // the container's name: dockerLabel, then random hex
	id   string // its full id, which its processes' cgroups name
}

// startDockerBox starts a container for the test, or skips the test (fails
// it under CI=1) when this machine cannot run one.
func startDockerBox(t *testing.T) *dockerBox {
	t.Helper()
	requireDocker(t)
	image := dockerImage(t)
	var rnd [6]byte
	_, err := rand.Read(rnd[:])
	require.NoError(t, err)
	b := &dockerBox{t: t, name: dockerLabel + "-" + hex.EncodeToString(rnd[:])}
	// Registered first: a container that was made but failed to start
	// is removed too.
	t.Cleanup(func() {
		if _, err := docker(nil, "rm", "--force", b.name); err != nil && !strings.Contains(err.Error(), "No such container") {
			t.Errorf("removing the container %s: %v", b.name, err)
		}
	})
	id, err := docker(nil, "run", "--detach", "--name", b.name, "--label", dockerLabel,
		"--network", "none", image, "sleep", "infinity")
	require.NoError(t, err, "starting a container")
	b.id = id
	return b
}

// execArgs is the command line that runs agent-box with args in the
// container as an MCP server on stdio: docker exec -i CT agent-box ARGS.
func (b *dockerBox) execArgs(args ...string) []string {
	return append([]string{"docker", "exec", "-i", b.name, boxAgentBox}, args...)
}

// execLine is execArgs as one shell command line, for agent-box connect
// --exec.
func (b *dockerBox) execLine(args ...string) string {
	q := make([]string, 0, len(args)+5)
	for _, a := range b.execArgs(args...) {
		q = append(q, shellQuote(a))
	}
	return strings.Join(q, " ")
}

// command is execArgs to run: its process is the docker exec client,
// whose death drops the connection (see killExecClients).
func (b *dockerBox) command(args ...string) *exec.Cmd {
	a := b.execArgs(args...)
	return exec.Command(a[0], a[1:]...)
}

// sh runs script with the container's sh (docker exec without stdin) and
// returns its stdout, for a test to look at the box from inside.
func (b *dockerBox) sh(script string) (string, error) {
	return docker(nil, "exec", b.name, "sh", "-c", script)
}

// serverPIDs returns the agent-box MCP servers running in the container,
// by their pids on this machine (its processes are visible here; their pids
// in the container differ): the processes in the container's cgroup whose
// argv starts with boxAgentBox, less a server's child between its fork and
// its exec (a supervisor being launched), which still shows its parent's
// argv. Supervisors and runs do not match.
func (b *dockerBox) serverPIDs() []int {
	return servers(func(pid int) bool {
		c := cmdline(pid)
		return len(c) > 0 && c[0] == boxAgentBox && b.holds(pid)
	})
}

// holds says whether pid, a process on this machine, is in the container:
// its cgroup (cgroupfs's /docker/ID or systemd's docker-ID.scope) names
// the container's id.
func (b *dockerBox) holds(pid int) bool {
	cg, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cgroup"))
	return err == nil && b.id != "" && bytes.Contains(cg, []byte(b.id))
}

// killExecClients SIGKILLs every docker exec client of this container
// running on this machine, whoever started it (the test, or agent-box
// connect through its --exec), as a dropped connection or a killed agent
// would end it, and returns how many it killed. dockerd then closes the
// exec'd agent-box's stdin, and that server exits; its runs go on.
func (b *dockerBox) killExecClients() int {
	b.t.Helper()
	type proc struct {
		pid   int
		start uint64
	}
	var clients []proc
	for _, pid := range pids() {
		c := cmdline(pid)
		if len(c) < 3 || path.Base(c[0]) != "docker" || !slices.Contains(c, "exec") || !slices.Contains(c, b.name) {
			continue
		}
		if _, start, _, err := procStat(pid); err == nil {
			clients = append(clients, proc{pid, start})
		}
	}
	n := 0
	for _, c := range clients {
		// Re-identified just before the signal: a pid is only ours while
		// its start time is the one we saw.
		if alive(c.pid, c.start) && syscall.Kill(c.pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}

// requireDocker skips the test (fails it under CI=1) unless the docker
// client, an answering dockerd and a static busybox are here.
func requireDocker(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("docker"); err != nil {
		missing(t, "docker (Debian package docker.io) is not installed")
	}
	if v, err := docker(nil, "version", "--format", "{{.Server.Version}}"); err != nil || v == "" {
		if why, _ := os.ReadFile(filepath.Join(repoRoot, dockerdUnavailable)); len(why) > 0 {
			t.Skipf("dockerd cannot run on this machine: %s (found by .ci/setup, %s)", strings.TrimSpace(string(why)), dockerdUnavailable)
		}
		missing(t, "dockerd does not answer (%v); .ci/setup starts one", err)
	}
	if err := staticELF(busybox); err != nil {
		missing(t, "no static busybox (Debian package busybox-static): %v", err)
	}
}

// busybox is where Debian's busybox-static installs it.
const busybox = "/bin/busybox"

// staticELF checks that file is an executable that needs no loader (no
// PT_INTERP): one that runs in an image without our libc.
func staticELF(file string) error {
	f, err := elf.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked", file)
		}
	}
	return nil
}

// docker runs the docker client with args, bounded by dockerTimeout, and
// returns its stdout without the trailing newline; an error holds its
// stderr. stdin, when not nil, is its standard input.
func docker(stdin io.Reader, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), dockerTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return strings.TrimSpace(stdout.String()), err
}

// The lane's image, made once per test binary by the first test that needs
// it and removed by TestMain at the end (removeDockerImage).
var laneImage struct {
	once sync.Once
	tag  string
	err  error
}

// dockerImage returns the tag of the lane's image, imported at the first
// call.
func dockerImage(t *testing.T) string {
	t.Helper()
	laneImage.once.Do(func() {
		var rnd [4]byte
		rand.Read(rnd[:])
		tag := fmt.Sprintf("%s:%d-%s", dockerLabel, os.Getpid(), hex.EncodeToString(rnd[:]))
		laneImage.err = importImage(tag)
		if laneImage.err == nil {
			laneImage.tag = tag
		}
	})
	require.NoError(t, laneImage.err, "making the docker lane's image")
	return laneImage.tag
}

// removeDockerImage removes the lane's image, if a test made it.
func removeDockerImage() {
	if laneImage.tag == "" {
		return
	}
	if _, err := docker(nil, "rmi", laneImage.tag); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: removing the docker lane's image:", err)
	}
}

// importImage builds the static binaries and imports the image as tag: the
// tarball streams into docker import's stdin, never a file.
func importImage(tag string) error {
	dir, err := os.MkdirTemp("", "agent-box-e2e-docker-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bins := []string{"agent-box", "agent-box-supervisor"}
	if err := abtest.BuildStaticInto(repoRoot, dir, bins...); err != nil {
		return fmt.Errorf("building the static binaries: %w", err)
	}
	applets, err := exec.Command(busybox, "--list-full").Output()
	if err != nil {
		return fmt.Errorf("%s --list-full: %w", busybox, err)
	}
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(writeRootfs(pw, dir, bins, strings.Fields(string(applets))))
	}()
	_, err = docker(pr, "import",
		"--change", "LABEL "+dockerLabel+"=1",
		"--change", "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"--change", `CMD ["sleep", "infinity"]`,
		"-", tag)
	pr.CloseWithError(errors.New("docker import has ended")) // unblocks the writer if docker stopped reading
	return err
}

// writeRootfs writes the image's file system as a tarball: the binaries of
// binDir named bins in /usr/local/bin, busybox with a symlink for each of
// its applets (paths relative to /, as busybox --list-full prints them),
// and the few files and directories a shell and agent-box expect (root's
// passwd entry gives it the home whose ~/.local/state holds the state).
func writeRootfs(w io.Writer, binDir string, bins, applets []string) error {
	tw := tar.NewWriter(w)
	now := time.Now()
	dirs := map[string]bool{}
	var mkdir func(name string, mode int64) error
	mkdir = func(name string, mode int64) error {
		if name == "." || dirs[name] {
			return nil
		}
		if err := mkdir(path.Dir(name), 0o755); err != nil {
			return err
		}
		dirs[name] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, ModTime: now})
	}
	file := func(name string, mode int64, body []byte) error {
		if err := mkdir(path.Dir(name), 0o755); err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(body)), ModTime: now}); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	for _, d := range []struct {
		name string
		mode int64
	}{{"dev", 0o755}, {"proc", 0o555}, {"sys", 0o555}, {"root", 0o700}, {"tmp", 0o1777}, {"var/tmp", 0o1777}} {
		if err := mkdir(d.name, d.mode); err != nil {
			return err
		}
	}
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return err
	}
	if err := file("bin/busybox", 0o755, bb); err != nil {
		return err
	}
	for _, a := range applets {
		a = strings.TrimPrefix(path.Clean("/"+a), "/")
		if a == "" || a == "bin/busybox" {
			continue
		}
		if err := mkdir(path.Dir(a), 0o755); err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: a, Linkname: "/bin/busybox", Mode: 0o777, ModTime: now}); err != nil {
			return err
		}
	}
	for _, n := range bins {
		b, err := os.ReadFile(filepath.Join(binDir, n))
		if err != nil {
			return err
		}
		if err := file(strings.TrimPrefix(path.Join(path.Dir(boxAgentBox), n), "/"), 0o755, b); err != nil {
			return err
		}
	}
	if err := file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\n")); err != nil {
		return err
	}
	if err := file("etc/group", 0o644, []byte("root:x:0:\n")); err != nil {
		return err
	}
	return tw.Close()
}
