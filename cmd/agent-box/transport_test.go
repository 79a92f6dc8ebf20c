//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// wire is a server driven by hand over its pipes: lines in, lines out.
type wire struct {
	t   *testing.T
	cmd *exec.Cmd
	in  io.WriteCloser
	out chan map[string]any
}

func openWire(t *testing.T) *wire {
	t.Helper()
	cmd := exec.Command(binary, "--state-dir", t.TempDir())
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	w := &wire{t: t, cmd: cmd, in: in, out: make(chan map[string]any, 1024)}
	go func() {
		defer close(w.out)
		r := bufio.NewReaderSize(stdout, 4<<20)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				var m map[string]any
				if json.Unmarshal(line, &m) != nil {
					m = map[string]any{"unparsable": string(line)}
				}
				w.out <- m
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	w.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	require.Equal(t, "init", w.next()["id"])
	w.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return w
}

func (w *wire) send(line string) {
	w.t.Helper()
	_, err := io.WriteString(w.in, line+"\n")
	require.NoError(w.t, err)
}

// next returns the next message, or fails once the server has been
// silent for a minute (a condition, not a timing assertion: the answers
// here take milliseconds).
func (w *wire) next() map[string]any {
	w.t.Helper()
	select {
	case m, ok := <-w.out:
		require.True(w.t, ok, "the server closed its stdout")
		return m
	case <-time.After(time.Minute):
		w.t.Fatal("no message from the server for a minute")
		return nil
	}
}

// A client that writes its requests and closes stdin at once gets every
// answer, and the server then exits by itself.
func TestEveryRequestBeforeEOFIsAnswered(t *testing.T) {
	t.Parallel()
	w := openWire(t)
	want := map[string]bool{}
	for i := range 40 {
		id := string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		want[id] = true
		method := `"tools/call","params":{"name":"process_list","arguments":{}}`
		if i%3 == 0 {
			method = `"tools/list"`
		}
		w.send(`{"jsonrpc":"2.0","id":"` + id + `","method":` + method + `}`)
	}
	require.NoError(t, w.in.Close())
	for m := range w.out {
		id, _ := m["id"].(string)
		assert.True(t, want[id], "unexpected message %v", m)
		assert.Nil(t, m["error"], "request %s", id)
		delete(want, id)
	}
	assert.Empty(t, want, "requests never answered")
	require.NoError(t, w.cmd.Wait(), "the server exits cleanly at EOF")
}

// Garbage, an over-long line and a line that is not an object each get a
// JSON-RPC error, and the session goes on.
func TestBadLinesGetErrorsAndTheSessionGoesOn(t *testing.T) {
	t.Parallel()
	w := openWire(t)
	w.send(`this is not json`)
	m := w.next()
	require.NotNil(t, m["error"], "%v", m)
	assert.EqualValues(t, -32700, m["error"].(map[string]any)["code"])

	w.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"process_list","arguments":{"name":"` + strings.Repeat("x", 17<<20) + `"}}}`)
	m = w.next()
	require.NotNil(t, m["error"], "%v", m)
	assert.Contains(t, m["error"].(map[string]any)["message"], "MiB")

	w.send(`[1,2]`)
	m = w.next()
	require.NotNil(t, m["error"], "%v", m)

	w.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	m = w.next()
	assert.EqualValues(t, 2, m["id"])
	assert.NotNil(t, m["result"], "%v", m)
}

// notifications/cancelled ends the request it names: a process_wait the
// client gave up on returns at once instead of holding a slot for ten
// minutes.
func TestCancelledWaitReturns(t *testing.T) {
	t.Parallel()
	w := openWire(t)
	w.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"process_start","arguments":{"name":"long","argv":["sleep","300"]}}}`)
	m := w.next()
	require.Nil(t, m["error"], "%v", m)
	t.Cleanup(func() {
		// Before the server is killed (cleanups run last first): wait for
		// the kill's answer, or the sleep outlives the test.
		w.send(`{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"process_kill","arguments":{"name":"long","signal":"KILL"}}}`)
		for m := w.next(); m["id"] != float64(99); m = w.next() {
		}
	})
	w.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"process_wait","arguments":{"name":"long","timeout_ms":600000}}}`)
	// The wait is parked; a ping still gets through.
	w.send(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	require.EqualValues(t, 3, w.next()["id"])
	w.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"user gave up"}}`)
	m = w.next()
	require.EqualValues(t, 2, m["id"], "%v", m)
	sc := m["result"].(map[string]any)["structuredContent"].(map[string]any)
	assert.Equal(t, "running", sc["run"].(map[string]any)["state"], "the run goes on; only the wait ended: %v", sc)
}
