package runs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/runrecord"
	"github.com/agent-box/agent-box/supervisor"
)

// supervisedManager is a live Manager whose supervisors are the test binary's
// TestHelperSupervisor.
func supervisedManager(t *testing.T) *Manager {
	t.Setenv("AGENT_BOX_TEST_SUPERVISOR", "1")
	sys, err := NewLiveSystem(supervisor.NewExecutables(os.Args[0]))
	require.NoError(t, err)
	return &Manager{Store: newStore(t), Sys: sys, Env: os.Environ(),
		Supervisor: []string{os.Args[0], "-test.run=^TestHelperSupervisor$", "--"}}
}

// readyWithin is a request for probe whose bound ends d from now:
// ready_timeout_s is in whole seconds, so the wait is made to have begun
// the rest of its last second ago.
func readyWithin(probe *ReadyProbe, d time.Duration) (*StartRequest, time.Time) {
	secs := int64((d + time.Second - 1) / time.Second)
	return &StartRequest{Spec: Spec{Ready: probe, ReadyTimeoutS: &secs}}, time.Now().Add(d - time.Duration(secs)*time.Second)
}

// awaitProbe runs probe against run for at most d.
func awaitProbe(t *testing.T, m *Manager, run Run, probe ReadyProbe, d time.Duration) ReadyResult {
	t.Helper()
	req, began := readyWithin(&probe, d)
	_, err := checkProbe(*req.Ready)
	require.NoError(t, err)
	return m.awaitReady(context.Background(), run, req, began)
}

// A port or a local URL answered by a process that is not the run's does
// not make the run ready (before: a sleep that listens on nothing was
// ready at once because the test process listened on the port).
func TestReadyIsTheRunsOwnListener(t *testing.T) {
	m := supervisedManager(t)
	mute := startRun(t, m, "mute", "sleep", "30")

	t.Run("tcp_port", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer l.Close()
		port := l.Addr().(*net.TCPAddr).Port
		res := awaitProbe(t, m, mute, ReadyProbe{TCPPort: port}, 300*time.Millisecond)
		assert.False(t, res.Ready, "another process listens on %d: %+v", port, res)
		assert.Contains(t, res.Why, "not ready after")
	})
	t.Run("http", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		defer srv.Close()
		res := awaitProbe(t, m, mute, ReadyProbe{HTTP: srv.URL + "/"}, 300*time.Millisecond)
		assert.False(t, res.Ready, "another process answers %s: %+v", srv.URL, res)
	})
	t.Run("the run's own", func(t *testing.T) {
		if _, err := exec.LookPath("python3"); err != nil {
			t.Skip("python3 is not installed")
		}
		// The run's listener is a grandchild of the supervisor, under a
		// shell, so that the run's processes are more than its leader.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		script := fmt.Sprintf("import socket, time\ns = socket.socket()\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\ns.bind(('127.0.0.1', %d))\ns.listen()\ntime.sleep(600)\n", port)
		web := startRun(t, m, "web", "sh", "-c", `python3 -c "$0"; :`, script)
		res := awaitProbe(t, m, web, ReadyProbe{TCPPort: port}, 20*time.Second)
		assert.True(t, res.Ready, "%+v", res)

		// A record planted under another name, copied from web's,
		// names web's live supervisor, which does not say it supervises
		// the copy: its processes are not the copy's (before: the
		// supervisor's pid and start time made its listener the copy's).
		rec, err := m.Store.Read(web.Name, web.RunID)
		require.NoError(t, err)
		rec.Name, rec.RunID = "planted", runrecord.NewRunID(time.Now())
		rec.LogPath = m.Store.LogPath(rec.Name, rec.RunID)
		require.NoError(t, m.Store.Create(rec))
		planted, err := m.Get(rec.Name, rec.RunID)
		require.NoError(t, err)
		require.False(t, planted.supAlive, "the copy's supervisor is not verified")
		assert.False(t, m.runListens(planted, port), "web's listener made the planted run ready")
	})
}

// A URL's port is checked as tcp_port is, when the call is made (before:
// http://localhost:99999/ was taken and waited out its whole timeout).
func TestReadyPortsAreChecked(t *testing.T) {
	for _, c := range []struct {
		probe ReadyProbe
		want  string
	}{
		{ReadyProbe{TCPPort: 70000}, "ready.tcp_port 70000 is not a port (1..65535)"},
		{ReadyProbe{TCPPort: -1}, "ready.tcp_port -1 is not a port (1..65535)"},
		{ReadyProbe{HTTP: "http://localhost:99999/"}, "ready.http port 99999 is not a port (1..65535)"},
		{ReadyProbe{HTTP: "http://[::1]:0/health"}, "ready.http port 0 is not a port (1..65535)"},
		{ReadyProbe{HTTP: "https://localhost:123456789012345678901/"}, "ready.http port 123456789012345678901 is not a port (1..65535)"},
	} {
		_, err := checkProbe(c.probe)
		if assert.Error(t, err, "%+v", c.probe) {
			assert.True(t, errors.Is(err, ErrInvalid), "%v", err)
			assert.True(t, strings.HasSuffix(err.Error(), c.want), "%+v: %v", c.probe, err)
		}
	}
	for _, ok := range []ReadyProbe{{TCPPort: 1}, {TCPPort: 65535}, {HTTP: "http://localhost:65535/"}, {HTTP: "https://example.com/"}} {
		_, err := checkProbe(ok)
		assert.NoError(t, err, "%+v", ok)
	}
}
