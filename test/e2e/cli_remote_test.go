package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
	"github.com/agent-box/agent-box/logframe"
)

// cli is the agent-box CLI on this machine acting on this sshd's box
// through port (a forwarder's), with agent-box serving state there: what a
// person types with --box, the options being what their ~/.ssh/config
// would say.
func (s *sshServer) cli(port int, state string, args ...string) *exec.Cmd {
	global := []string{"--box", s.user + "@127.0.0.1",
		"-o", "Port=" + strconv.Itoa(port),
		"-o", "IdentityFile=" + s.key,
		"-o", "IdentitiesOnly=yes",
		"-o", "IdentityAgent=none",
		"-o", "StrictHostKeyChecking=no",
		"-o", "UserKnownHostsFile=/dev/null",
		"-o", "LogLevel=ERROR",
		"--remote-bin", fmt.Sprintf("%s --state-dir %s", shellQuote(binary), shellQuote(state)),
	}
	return exec.Command(binary, append(global, args...)...)
}

// result runs cmd to its end: stdout, stderr and the exit status.
func result(t *testing.T, cmd *exec.Cmd) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return out.String(), errb.String(), exit.ExitCode()
	}
	require.NoError(t, err, "%s", errb.String())
	return out.String(), errb.String(), 0
}

// lockedBuffer is a bytes.Buffer a process writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Len()
}

func (l *lockedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.b.Bytes())
}

// demux splits a framed log file into its stdout and stderr bytes.
func demux(t *testing.T, path string) (stdout, stderr []byte) {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	d := logframe.NewDemuxer(0)
	require.NoError(t, d.Feed(raw, func(f logframe.Frame) error {
		if f.Stream == logframe.Stderr {
			stderr = append(stderr, f.Payload...)
		} else {
			stdout = append(stdout, f.Payload...)
		}
		return nil
	}))
	require.Zero(t, d.Pending(), "the log ends inside a frame")
	return stdout, stderr
}

// growScript writes random bytes (no UTF-8, no lines) on both streams
// until gate exists, then a last line, and exits 7: a log that grows under
// a follow and across every cut.
func growScript(gate string) string {
	return fmt.Sprintf(`while [ ! -e %s ]; do head -c 3000 /dev/urandom; head -c 1000 /dev/urandom >&2; sleep 0.01; done; echo last; exit 7`, shellQuote(gate))
}

// dropsBox is this sshd's box for a CLI through a forwarder that cuts
// the link, a state dir whose runs are reaped at cleanup, and the gate of
// growScript, opened at cleanup.
type dropsBox struct {
	srv         *sshServer
	fwd         *forwarder
	state, gate string
}

func newDropsBox(t *testing.T) *dropsBox {
	if testing.Short() {
		t.Skip("connect lane: starts an sshd")
	}
	srv := startSSHD(t)
	b := &dropsBox{srv: srv, fwd: newForwarder(t, srv.port), state: t.TempDir(), gate: filepath.Join(t.TempDir(), "gate")}
	reapAtCleanup(t, b.state)
	t.Cleanup(func() { os.WriteFile(b.gate, nil, 0o600) })
	return b
}

func (b *dropsBox) cli(args ...string) *exec.Cmd { return b.srv.cli(b.fwd.port(), b.state, args...) }

// TestCLILogsFollowThroughDrops: a person follows a growing log from their
// machine with agent-box --box BOX logs -f, over the real sshd, while the
// network between ssh and sshd is cut again and again: the run's stdout
// arrives on stdout and its stderr on stderr, every byte once and in
// order, and logs -f exits with the run's status.
func TestCLILogsFollowThroughDrops(t *testing.T) {
	t.Parallel()
	b := newDropsBox(t)
	out, errOut, code := result(t, b.cli("start", "--framed", "grow", "--", "sh", "-c", growScript(b.gate)))
	require.Equal(t, 0, code, "start: %s%s", out, errOut)
	b.throughDrops(t, "grow", "logs", "-f", "grow")
}

// TestCLIRunThroughDrops: agent-box --box BOX run, as docker run, over the
// real sshd with the network cut again and again: the program's stdout on
// stdout, its stderr on stderr, each byte once and in order, and its exit
// code as agent-box's.
func TestCLIRunThroughDrops(t *testing.T) {
	t.Parallel()
	b := newDropsBox(t)
	b.throughDrops(t, "grow", "run", "grow", "--", "sh", "-c", growScript(b.gate))
}

// throughDrops runs the CLI with args (a follow of the framed run name,
// whose program is growScript(b.gate)) while the forwarder cuts the link
// under it four times, then opens the gate; the CLI's stdout and stderr
// must be the log's streams, and its status the run's, 7.
func (b *dropsBox) throughDrops(t *testing.T, name string, args ...string) {
	t.Helper()
	fwd, state, gate := b.fwd, b.state, b.gate
	follow := b.cli(args...)
	var stdout, stderr lockedBuffer
	follow.Stdout, follow.Stderr = &stdout, &stderr
	seen := map[procID]bool{}
	fresh := freshServer(seen, func() []int { return serverPIDs(state) })
	fresh() // a server of an earlier command, if it is still there
	require.NoError(t, follow.Start())

	const drops = 4
	ctx, cancel := context.WithCancel(t.Context())
	cut := make(chan struct{})
	go func() {
		defer close(cut)
		defer os.WriteFile(gate, nil, 0o600)
		// The first cut comes once output flows: a box never reached is
		// unreachable at its first failed dial, by design (connect's
		// and the CLI's), so a cut inside the first dial is not a drop.
		if !pollUntil(ctx, callTimeout, func() bool { return stdout.Len() > 0 }) {
			t.Errorf("%q printed nothing in %s", args, callTimeout)
			return
		}
		for n := 0; n <= drops; n++ {
			if !pollUntil(ctx, callTimeout, fresh) {
				if ctx.Err() == nil {
					t.Errorf("after %d cuts: no new agent-box server on the box in %s", n, callTimeout)
				}
				return
			}
			if n < drops {
				fwd.cut()
			}
		}
	}()
	err := follow.Wait()
	cancel()
	<-cut
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%q exits with the run's status; stderr: %.300q", args, stderr.Bytes())
	assert.Equal(t, 7, exit.ExitCode(), "stderr ends: %.300q", stderr.Bytes()[max(0, stderr.Len()-300):])
	require.GreaterOrEqual(t, len(seen), drops+1, "distinct agent-box servers on the box")

	out, errOut, code := result(t, b.cli("ps", "--json", name))
	require.Equal(t, 0, code, errOut)
	var list struct {
		Runs []struct {
			LogPath string `json:"log_path"`
		} `json:"runs"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &list), out)
	require.Len(t, list.Runs, 1)
	wantOut, wantErr := demux(t, list.Runs[0].LogPath)
	require.Greater(t, len(wantOut), 4*3000, "the log grew across the cuts")
	abtest.SameBytes(t, wantOut, stdout.Bytes(), "stdout")
	abtest.SameBytes(t, wantErr, stderr.Bytes(), "stderr")
}
