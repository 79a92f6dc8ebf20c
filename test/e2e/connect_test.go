package e2e

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"os/exec"

	"github.com/stretchr/testify/require"
)

// forwarder is the network between ssh and sshd, under the test's hand:
// cut closes every connection through it at once, as a dead link or a
// restarted router would; new connections go through again.
type forwarder struct {
	ln net.Listener

	mu    sync.Mutex
	conns []net.Conn
}

func newForwarder(t *testing.T, to int) *forwarder {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &forwarder{ln: ln}
	t.Cleanup(func() { ln.Close(); f.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(to))
			if err != nil {
				c.Close()
				continue
			}
			f.mu.Lock()
			f.conns = append(f.conns, c, up)
			f.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
	return f
}

func (f *forwarder) port() int { return f.ln.Addr().(*net.TCPAddr).Port }

// cut closes every connection through the forwarder.
func (f *forwarder) cut() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		c.Close()
	}
	f.conns = nil
}

// connectCommand is agent-box connect to this sshd through port (a
// forwarder's), with agent-box serving state on the box. The options are
// what a user's ~/.ssh/config would say for the box.
func (s *sshServer) connectCommand(port int, state string) *exec.Cmd {
	return exec.Command(binary, "connect",
		"-o", "Port="+strconv.Itoa(port),
		"-o", "IdentityFile="+s.key,
		"-o", "IdentitiesOnly=yes",
		"-o", "IdentityAgent=none",
		"-o", "StrictHostKeyChecking=no",
		"-o", "UserKnownHostsFile=/dev/null",
		"-o", "LogLevel=ERROR",
		// Progress every 200 ms instead of every 3 s (see protocol_test.go).
		"--remote-bin", fmt.Sprintf("env AGENT_BOX_PROGRESS_MS=200 %s --state-dir %s", shellQuote(binary), shellQuote(state)),
		s.user+"@127.0.0.1")
}

// TestConnectTSClientThroughDrops drives agent-box connect with the
// official TypeScript SDK's client over the real sshd, while the network
// between ssh and sshd is cut again and again under a process_wait: the
// SDK sees no error, its wait ends with the run's own end, and the log
// reads whole.
func TestConnectTSClientThroughDrops(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("connect lane: starts node and an sshd")
	}
	c := startTSClient(t)
	srv := startSSHD(t)
	fwd := newForwarder(t, srv.port)
	state := t.TempDir()
	reapAtCleanup(t, state)
	gate := filepath.Join(t.TempDir(), "gate")

	c.connect(srv.connectCommand(fwd.port(), state), nil)
	run := c.call("process_start", map[string]any{"name": "gated",
		"command": fmt.Sprintf(`echo before; while [ ! -e %s ]; do sleep 0.05; done; echo after; exit 3`, shellQuote(gate))})
	run = run["run"].(map[string]any) // process_start answers its run under "run"
	require.Equal(t, "running", run["state"])
	killAtCleanup(t, int(run["pid"].(float64)))

	// Each cut waits until the redial after the last one has reached a new
	// agent-box on the box (ssh authenticated and ran it), so that it lands
	// under the process_wait, not in a dial; the wait is in flight
	// throughout, since the run goes on only when the gate opens, after
	// the redial that follows the last cut.
	const drops = 5
	seen := map[procID]bool{}
	fresh := freshServer(seen, func() []int { return serverPIDs(state) })
	ctx := t.Context()
	cut := make(chan struct{})
	t.Cleanup(func() { <-cut })
	go func() {
		defer close(cut)
		defer os.WriteFile(gate, nil, 0o600)
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
	w := c.call("process_wait", map[string]any{"name": "gated", "timeout_ms": 60000})
	<-cut
	require.Equal(t, false, w["wait_timed_out"])
	ended := w["run"].(map[string]any)
	require.Equal(t, "exited", ended["state"])
	require.EqualValues(t, 3, ended["exit_code"])
	require.GreaterOrEqual(t, len(seen), drops+1, "distinct agent-box servers on the box")

	tail := c.call("tail_log", map[string]any{"name": "gated"})
	require.Equal(t, "before\nafter\n", tail["content"])
	require.Equal(t, true, tail["eof"])
	c.do(true, map[string]any{"op": "close"})
}

// TestConnectDockerThroughDrops: agent-box connect --exec 'docker exec -i
// CT agent-box' against a real container engine, while the docker exec
// client is killed again and again under a follow of a growing log: every
// byte is read once, in order, and the client sees no error.
func TestConnectDockerThroughDrops(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("docker lane: starts a container")
	}
	b := startDockerBox(t)
	s := connect(t, exec.Command(binary, "connect", "--exec", b.execLine()))
	var started runInfo
	s.ok("process_start", map[string]any{"name": "grow",
		"command": `i=0; while [ ! -e /tmp/stop ]; do i=$((i+1)); echo "line $i of the growing log"; [ $((i % 20)) -eq 0 ] && sleep 0.01; done`}, underRun(&started))

	const drops = 5
	ctx := t.Context()
	killed := make(chan struct{})
	t.Cleanup(func() { <-killed })
	go func() {
		defer close(killed)
		defer b.sh("touch /tmp/stop")
		seen := map[procID]bool{}
		fresh := freshServer(seen, b.serverPIDs)
		for n := 0; n < drops; n++ {
			// A drop once the redial of the last one has its server.
			if !pollUntil(ctx, callTimeout, fresh) {
				if ctx.Err() == nil {
					t.Errorf("drop %d: no new agent-box serving in the container in %s", n+1, callTimeout)
				}
				return
			}
			if b.killExecClients() == 0 {
				t.Errorf("drop %d: no docker exec client to kill", n+1)
			}
		}
	}()
	var got logBytes
	off := int64(0)
	for i := 0; ; i++ {
		require.Less(t, i, 100000, "tail_log made no progress")
		w := s.window("grow", false, off, 4096, &got)
		if w.EOF {
			break
		}
		if w.EndOffset == off {
			var follow tailOut
			s.ok("tail_log", map[string]any{"name": "grow", "offset": off, "max_bytes": 1, "wait_ms": 1000}, &follow)
		}
		off = w.EndOffset
	}
	<-killed
	lines := strings.SplitAfter(string(got.combined), "\n")
	require.Equal(t, "", lines[len(lines)-1], "the log ends in a whole line")
	var want strings.Builder
	for i := 1; i < len(lines); i++ {
		fmt.Fprintf(&want, "line %d of the growing log\n", i)
	}
	require.Equal(t, want.String(), string(got.combined), "the log read through %d drops", drops)
}
