//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
	"github.com/agent-box/agent-box/runs"
	"github.com/agent-box/agent-box/tools"
)

// binary is agent-box built once for the whole test run: the tests drive
// the real executable over pipes, as an MCP client would.
//
// Each test has a server and a state dir of its own and changes nothing
// process-wide, so each runs in parallel (t.Parallel), several per CPU
// (abtest.WaitBoundParallel): they spend their time waiting for processes,
// not computing. Only the golden transcripts
// run alone: their recorded process_kill answer shows the exit only if the
// supervisor writes it within the kill's short wait, which a machine busy
// with the other tests could miss.
var binary string

func TestMain(m *testing.M) {
	abtest.WaitBoundParallel()
	bin, cleanup, err := abtest.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = bin
	code := m.Run()
	cleanup()
	os.Exit(code)
}

// connect serves a session from this process: the Manager wired as main
// wires one (with env, KEY=value, in place of the environment's own), and
// tools.Serve on pipes. The tests of what the tools answer need no server
// process, and a race-built one is costly to start
// (docs/architecture/performance.md, "The test suite"); the runs are
// started by the real supervisor binary all the same. The tests of the
// process itself (its stdio, a kill of it) use spawn.
func connect(t *testing.T, stateDir string, env ...string) *abtest.Server {
	t.Helper()
	return connectWith(t, stateDir, nil, env...)
}

// connectWith is connect, with tweak given the Manager before it serves:
// a test's stand-in for a fact of the machine (its cgroups).
func connectWith(t *testing.T, stateDir string, tweak func(*runs.Manager), env ...string) *abtest.Server {
	t.Helper()
	environ := withEnv(os.Environ(), env...)
	// Registered first, so run last: after ConnectServe's cleanup has
	// stopped the server, a handler still finishing (Serve stops waiting
	// for them after a grace) must not log to a test that has ended.
	logs := &testLog{t: t}
	t.Cleanup(logs.close)
	w := wiring{
		getenv:  func(k string) string { return lookup(environ, k) },
		environ: environ,
		exe:     binary,
		stderr:  logs,
	}
	m, err := w.manager(stateDir)
	require.NoError(t, err)
	if tweak != nil {
		tweak(m)
	}
	t.Cleanup(m.KeepSpare()) // as serve does
	return abtest.ConnectServe(t, stateDir, func(ctx context.Context, in io.Reader, out io.Writer) error {
		return tools.Serve(ctx, &tools.Handlers{M: m}, version, in, out, log.New(w.stderr, "agent-box: ", 0))
	})
}

// spawn starts the agent-box binary as a server of its own, with env added
// to its environment, and opens a session with it.
func spawn(t *testing.T, stateDir string, env ...string) *abtest.Server {
	t.Helper()
	return abtest.ConnectEnv(t, binary, stateDir, env...)
}

// withEnv is environ with each KEY=value of env in place of KEY's own.
func withEnv(environ []string, env ...string) []string {
	out := make([]string, 0, len(environ)+len(env))
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if lookup(env, k) == "" {
			out = append(out, kv)
		}
	}
	return append(out, env...)
}

// lookup is the value of key in environ, "" if unset.
func lookup(environ []string, key string) string {
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

// testLog writes the server's diagnostics to the test's log until the
// test ends, and drops them after.
type testLog struct {
	t      *testing.T
	mu     sync.Mutex
	closed bool
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.t.Logf("server: %s", strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (l *testLog) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
}

// firstBytes follows run name's log (stdout of a framed run) with exact
// base64 windows until it holds at least n bytes, and returns them: the
// bytes a writer has written so far, which a text window may hold back.
func firstBytes(t *testing.T, s *abtest.Server, name string, framed bool, n int) []byte {
	t.Helper()
	field := "content"
	if framed {
		field = "stdout"
	}
	var got []byte
	for off, i := int64(0), 0; len(got) < n; i++ {
		require.Less(t, i, 20, "the first %d bytes never reached the log: %q", n, got)
		r := s.OK("tail_log", map[string]any{"name": name, "offset": off, "encoding": "base64", "wait_ms": 5000})
		got = append(got, abtest.B64(t, abtest.Str(r.Data[field]))...)
		off = abtest.Num(r.Data["end_offset"])
	}
	return got
}

// TestRunsLeftBehindAreEndedBeforeTheStateDirGoes: runs outlive the server
// by design, so one a test leaves behind goes on writing under its state
// dir while t.TempDir's cleanup removes it. abtest.Connect ends them first;
// without that, the subtest's cleanup fails with "directory not empty".
func TestRunsLeftBehindAreEndedBeforeTheStateDirGoes(t *testing.T) {
	t.Parallel()
	var state string
	ok := t.Run("leaves a writer", func(t *testing.T) {
		state = t.TempDir()
		s := connect(t, state)
		junk := state + "/junk"
		require.NoError(t, os.Mkdir(junk, 0o700))
		s.OK("process_start", map[string]any{
			"name":    "writer",
			"command": `i=0; while :; do : > "$JUNK/f$i" 2>/dev/null; i=$((i+1)); done`,
			"env":     map[string]string{"JUNK": junk},
		})
		abtest.WaitFor(t, "the writer's first file", 10*time.Second, func() bool {
			_, err := os.Stat(junk + "/f1")
			return err == nil
		})
	})
	require.True(t, ok, "the subtest (and its state dir's cleanup) failed")
	_, err := os.Stat(state)
	require.True(t, os.IsNotExist(err), "the state dir outlived its test: %v", err)
}
