//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
)

// A program writing to a pipe flushes in blocks that can cut a line:
// `echo start; printf 'ERR'; sleep; printf 'OR here\n'` leaves the log
// ending in "ERR" for a while. A client following with grep and wait_ms
// must not consume that partial line as a non-matching one: it gets
// "ERROR here" once the rest is written, exactly once. The sleep is a gate
// here (a fifo the test opens), as in follow_utf8_test.go.
func TestGrepFollowWaitsForTheRestOfALine(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"combined", "framed"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			s := connect(t, t.TempDir())
			gate := filepath.Join(t.TempDir(), "gate")
			require.NoError(t, syscall.Mkfifo(gate, 0o600))
			s.OK("process_start", map[string]any{"name": "partial", "capture_mode": mode,
				"command": `echo start; printf 'ERR'; read _ < '` + gate + `'; printf 'OR here\n'; echo fin`})
			t.Cleanup(func() { s.Call("process_kill", map[string]any{"name": "partial", "signal": "KILL"}) })

			// Wait, on the log itself, until "start\nERR" is in: exact bytes.
			require.Equal(t, "start\nERR", string(firstBytes(t, s, "partial", mode == "framed", len("start\nERR"))))

			// The client: grep from each end_offset.
			var matches []any
			off := int64(0)
			grep := func(wait time.Duration) abtest.Result {
				t.Helper()
				r := s.OK("tail_log", map[string]any{"name": "partial", "offset": off, "grep": "ERROR", "wait_ms": wait.Milliseconds()})
				require.Equal(t, off, abtest.Num(r.Data["offset"]))
				if m, ok := r.Data["matches"].([]any); ok {
					matches = append(matches, m...)
				}
				off = abtest.Num(r.Data["end_offset"])
				return r
			}

			// While the gate is shut, the answers end before "ERR" (framed:
			// before the frame holding it, which may hold "start\n" too).
			r := grep(0)
			if mode == "combined" {
				require.Equal(t, int64(len("start\n")), off, r.Text)
			}
			held := off
			const wait = 300 * time.Millisecond
			began := time.Now()
			r = grep(wait)
			assert.GreaterOrEqual(t, time.Since(began), wait, "the call returned before wait_ms without anything new: %s", r.Text)
			require.Equal(t, held, off, "the partial line was consumed: %s", r.Text)
			assert.Contains(t, r.Text, "a line is still being written", "the text says why the answer is empty")
			assert.Equal(t, true, r.Data["truncated"], r.Text)
			assert.Equal(t, false, r.Data["eof"], r.Text)
			assert.Empty(t, matches)

			// A follower parked there gets the line whole once it is written.
			done := make(chan abtest.Result, 1)
			go func() {
				done <- s.Call("tail_log", map[string]any{"name": "partial", "offset": off, "grep": "ERROR", "wait_ms": 30000})
			}()
			g, err := os.OpenFile(gate, os.O_WRONLY, 0) // the shell is reading it
			require.NoError(t, err)
			_, err = g.WriteString("go\n")
			require.NoError(t, err)
			require.NoError(t, g.Close())
			r = <-done
			require.False(t, r.IsError, r.Text)
			if m, ok := r.Data["matches"].([]any); ok {
				matches = append(matches, m...)
			}
			off = abtest.Num(r.Data["end_offset"])
			require.NotEqual(t, held, off, "the parked call returned without the rest: %s", r.Text)

			for i := 0; r.Data["eof"] != true; i++ {
				require.Less(t, i, 20, "no eof; matches so far %v", matches)
				r = grep(5 * time.Second)
			}
			require.Len(t, matches, 1, "every matching line exactly once: %v", matches)
			m := matches[0].(map[string]any)
			assert.Equal(t, "ERROR here", m["line"])
			assert.Equal(t, held, abtest.Num(m["offset"]))
		})
	}
}

// The README's advice after a failed test run: one tail_log with grep and
// the default max_bytes finds the failure even when it is the last line of
// a log several times larger than one window.
func TestGrepFindsAMatchPastTheFirstWindow(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"combined", "framed"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			s := connect(t, t.TempDir())
			// 4000 lines of 54 bytes: 216 KB of passing output, then the failure.
			s.OK("process_start", map[string]any{"name": "tests", "capture_mode": mode,
				"command": `i=1000; while [ $i -lt 5000 ]; do echo "=== RUN   TestCase$i" "--- ok padding padding padding"; i=$((i+1)); done; echo '--- FAIL: TestParse (0.00s)'; exit 1`})
			w := s.OK("process_wait", map[string]any{"name": "tests", "timeout_ms": 60000})
			run := w.Data["run"].(map[string]any)
			require.Equal(t, "exited", run["state"], w.Text)
			size := abtest.Num(run["log_bytes"])
			if mode == "combined" {
				require.Equal(t, int64(4000*54+28), size)
			}

			r := s.OK("tail_log", map[string]any{"name": "tests", "grep": "FAIL|panic"})
			matches, _ := r.Data["matches"].([]any)
			require.Len(t, matches, 1, r.Text)
			m := matches[0].(map[string]any)
			assert.Equal(t, "--- FAIL: TestParse (0.00s)", m["line"])
			assert.Equal(t, true, r.Data["eof"], r.Text)
			assert.Equal(t, size, abtest.Num(r.Data["end_offset"]))
			assert.Equal(t, false, r.Data["truncated"])
			assert.Contains(t, r.Text, "1 matching line,")
			stream := ""
			if mode == "framed" {
				stream = " stdout"
			}
			assert.Contains(t, r.Text, fmt.Sprintf("%d%s: --- FAIL: TestParse (0.00s)\n", abtest.Num(m["offset"]), stream))
			if mode == "combined" {
				assert.Equal(t, size-28, abtest.Num(m["offset"]))
				assert.Equal(t, size-28, abtest.Num(r.Data["skipped_bytes"]))
			}
		})
	}
}
