//go:build linux

package connect_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lines is a raw client of connect: one JSON-RPC message a line, every
// line read kept in order (notifications included), for a test to wait on.
type lines struct {
	t    *testing.T
	in   interface{ Write([]byte) (int, error) }
	read chan map[string]any
	kept []map[string]any // read while waiting for another message
}

func (l *lines) send(msg map[string]any) {
	msg["jsonrpc"] = "2.0"
	b, err := json.Marshal(msg)
	require.NoError(l.t, err)
	_, err = l.in.Write(append(b, '\n'))
	require.NoError(l.t, err)
}

// next returns the first message for which match holds; the others are
// kept for a later next (a run's channel event may come before the answer
// to the process_start that started it).
func (l *lines) next(what string, match func(map[string]any) bool) map[string]any {
	l.t.Helper()
	for i, m := range l.kept {
		if match(m) {
			l.kept = append(l.kept[:i], l.kept[i+1:]...)
			return m
		}
	}
	timeout := time.After(60 * time.Second)
	for {
		select {
		case m, ok := <-l.read:
			require.True(l.t, ok, "connect's stdout ended before %s", what)
			if match(m) {
				return m
			}
			l.kept = append(l.kept, m)
		case <-timeout:
			l.t.Fatalf("no %s from connect", what)
		}
	}
}

// startLines starts cmd (agent-box connect) with a raw client, and
// initializes it: the client, the answer to initialize, and what stops it
// (also at the test's cleanup).
func startLines(t *testing.T, cmd *exec.Cmd) (*lines, map[string]any, func()) {
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	stop := func() { in.Close(); cmd.Wait() }
	t.Cleanup(stop)
	l := &lines{t: t, in: in, read: make(chan map[string]any, 100)}
	go func() {
		defer close(l.read)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				l.read <- m
			}
		}
	}()
	l.send(map[string]any{"id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}}})
	return l, l.next("the answer to initialize", answerTo(1)), stop
}

// waitForChannelCursor waits for the channel's cursor file in xdg to hold
// a cursor of each of boxes: the first watch of a box starts from now and
// saves its cursor at once, so a run started after that is news.
func waitForChannelCursor(t *testing.T, xdg string, boxes ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, _ := filepath.Glob(filepath.Join(xdg, "agent-box", "channel-*.json"))
		var file struct {
			Cursors map[string]string `json:"cursors"`
		}
		if len(m) == 1 {
			if b, err := os.ReadFile(m[0]); err == nil && json.Unmarshal(b, &file) == nil {
				all := true
				for _, box := range boxes {
					all = all && file.Cursors[box] != ""
				}
				if all {
					return
				}
			}
		}
		require.True(t, time.Now().Before(deadline), "no channel cursor of %v in %s", boxes, xdg)
		time.Sleep(20 * time.Millisecond) // polling interval
	}
}

func answerTo(id float64) func(map[string]any) bool {
	return func(m map[string]any) bool { return m["id"] == id }
}

// TestChannelSendsEndedRuns: connect --channel declares Claude Code's
// claude/channel capability, and sends the model each run that ends on
// the box as notifications/claude/channel, also one that ended before
// connect started (after a first connect set its cursor).
func TestChannelSendsEndedRuns(t *testing.T) {
	t.Parallel()
	state, xdg := t.TempDir(), t.TempDir()
	start := func() (*lines, func()) {
		cmd := exec.Command(binary, "connect", "--channel", "--exec", fmt.Sprintf("%s --state-dir %s", binary, state))
		cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+xdg, "XDG_CACHE_HOME="+t.TempDir(), "AGENT_BOX_WATCH_POLL_MS=100")
		l, init, stop := startLines(t, cmd)
		caps := init["result"].(map[string]any)["capabilities"].(map[string]any)
		assert.Contains(t, caps["experimental"], "claude/channel")
		assert.Contains(t, init["result"].(map[string]any)["instructions"], "<channel>")
		l.send(map[string]any{"method": "notifications/initialized"})
		return l, stop
	}
	channel := func(m map[string]any) bool { return m["method"] == "notifications/claude/channel" }

	l, stop := start()
	waitForChannelCursor(t, xdg, fmt.Sprintf("%s --state-dir %s", binary, state))
	l.send(map[string]any{"id": 2, "method": "tools/call", "params": map[string]any{"name": "process_start",
		"arguments": map[string]any{"name": "build", "command": "echo compiling; exit 3"}}})
	l.next("the answer to process_start", answerTo(2))
	ev := l.next("a channel event", channel)["params"].(map[string]any)
	assert.Contains(t, ev["content"], "build")
	assert.Contains(t, ev["content"], "exit code 3")
	assert.Contains(t, ev["content"], "compiling")
	assert.Equal(t, map[string]any{"box": fmt.Sprintf("%s --state-dir %s", binary, state)}, ev["meta"])

	// Ended while no connect ran: sent as the next one starts.
	stop()
	out, err := exec.Command(binary, "--state-dir", state, "start", "later", "--", "sh", "-c", "exit 4").CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.Command(binary, "--state-dir", state, "wait", "later").CombinedOutput()
	require.Error(t, err, "%s", out)
	l, _ = start()
	ev = l.next("a channel event for the run that ended while connect was away", channel)["params"].(map[string]any)
	assert.Contains(t, ev["content"], "later")
	assert.Contains(t, ev["content"], "exit code 4")
	assert.False(t, strings.Contains(ev["content"].(string), "build"), "sent once: %q", ev["content"])
}

// TestChannelOverSeveralBoxes: connect --channel over several boxes sends
// the ends of every box's runs, each saying its box.
func TestChannelOverSeveralBoxes(t *testing.T) {
	t.Parallel()
	a, b, xdg := t.TempDir(), t.TempDir(), t.TempDir()
	cmd := exec.Command(binary, "connect", "--channel",
		"--exec", fmt.Sprintf("a=%s --state-dir %s", binary, a), "--exec", fmt.Sprintf("b=%s --state-dir %s", binary, b))
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+xdg, "XDG_CACHE_HOME="+t.TempDir(), "AGENT_BOX_WATCH_POLL_MS=100")
	stderr, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	require.NoError(t, err)
	cmd.Stderr = stderr
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(stderr.Name())
			t.Logf("connect's stderr:\n%s", b)
		}
	})
	l, _, _ := startLines(t, cmd)
	l.send(map[string]any{"method": "notifications/initialized"})
	waitForChannelCursor(t, xdg, "a", "b")
	l.send(map[string]any{"id": 2, "method": "tools/call", "params": map[string]any{"name": "process_start",
		"arguments": map[string]any{"box": "b", "name": "build", "command": "echo compiling; exit 3"}}})
	l.next("the answer to process_start", answerTo(2))
	ev := l.next("a channel event", func(m map[string]any) bool { return m["method"] == "notifications/claude/channel" })["params"].(map[string]any)
	assert.Contains(t, ev["content"], "build")
	assert.Contains(t, ev["content"], "on b ")
	assert.Contains(t, ev["content"], "exit code 3")
}
