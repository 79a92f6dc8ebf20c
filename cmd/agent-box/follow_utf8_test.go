//go:build linux

package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
)

// A program writing to a pipe flushes in blocks that can cut a multi-byte
// character: `printf 'abc\303'; sleep 2; printf '\251 done\n'` leaves the log
// ending inside "é" for a while. A client following with wait_ms must get
// the character whole once the rest is written, never U+FFFD. The sleep is a
// gate here (a fifo the test opens), so that the log stays cut for exactly
// as long as the test needs, however slow the machine.
func TestFollowWaitsForTheRestOfACutCharacter(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"combined", "framed"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			framed := mode == "framed"
			s := connect(t, t.TempDir())
			gate := filepath.Join(t.TempDir(), "gate")
			require.NoError(t, syscall.Mkfifo(gate, 0o600))
			s.OK("process_start", map[string]any{"name": "cut", "capture_mode": mode,
				"command": `printf 'abc\303'; read _ < '` + gate + `'; printf '\251 done\n'`})
			// A test that fails before opening the gate must not leave the
			// shell waiting on it; this runs before the session closes.
			t.Cleanup(func() { s.Call("process_kill", map[string]any{"name": "cut", "signal": "KILL"}) })

			// Wait, on the log itself, until the first half is in: exact
			// bytes, which are never held back.
			require.Equal(t, "abc\xc3", string(firstBytes(t, s, "cut", framed, 4)))

			// The client: text windows, each from the previous end_offset.
			var text []byte
			off := int64(0)
			// A framed run's text is in its chunks, a combined run's in
			// content; an empty window has neither.
			textOf := func(r abtest.Result) string { return abtest.Str(r.Data["content"]) + abtest.Chunks(r.Data, "") }
			take := func(r abtest.Result) {
				t.Helper()
				require.False(t, r.IsError, r.Text)
				require.NotEqual(t, true, r.Data["lossy"], "window %d..%d was lossy: %s", off, abtest.Num(r.Data["end_offset"]), r.Text)
				require.Equal(t, off, abtest.Num(r.Data["offset"]))
				text = append(text, textOf(r)...)
				off = abtest.Num(r.Data["end_offset"])
			}

			// While the gate is shut the log ends inside "é". Without
			// wait_ms the answer is what comes before it, and its end_offset
			// is where the character starts (framed: the frame holding its
			// first byte, as windows end at frame boundaries).
			heldAt := int64(3)
			if framed {
				heldAt = 0
			}
			take(s.OK("tail_log", map[string]any{"name": "cut", "offset": off}))
			require.Equal(t, heldAt, off)
			r := s.OK("tail_log", map[string]any{"name": "cut", "offset": off})
			take(r)
			assert.Equal(t, "", textOf(r), "nothing new: an empty window")
			assert.Equal(t, true, r.Data["truncated"], "the held byte is past end_offset")
			assert.Equal(t, false, r.Data["eof"])
			require.Equal(t, heldAt, off)

			// With wait_ms and nothing else new, the call waits for the
			// rest of the character: here the whole wait, since the gate
			// stays shut.
			const wait = 300 * time.Millisecond
			began := time.Now()
			r = s.OK("tail_log", map[string]any{"name": "cut", "offset": off, "wait_ms": wait.Milliseconds()})
			waited := time.Since(began)
			take(r)
			assert.Equal(t, "", textOf(r))
			require.Equal(t, heldAt, off)
			assert.GreaterOrEqual(t, waited, wait, "the call returned before wait_ms without anything new")

			// A follower parked on the cut character gets it whole once the
			// program writes the rest.
			done := make(chan abtest.Result, 1)
			go func() {
				done <- s.Call("tail_log", map[string]any{"name": "cut", "offset": off, "wait_ms": 30000})
			}()
			g, err := os.OpenFile(gate, os.O_WRONLY, 0) // the shell is reading it
			require.NoError(t, err)
			_, err = g.WriteString("go\n")
			require.NoError(t, err)
			require.NoError(t, g.Close())
			r = <-done
			take(r)
			require.NotEqual(t, heldAt, off, "the parked call returned without the rest: %s", r.Text)

			// Read on as the client does until the end of the log.
			for i := 0; r.Data["eof"] != true; i++ {
				require.Less(t, i, 20, "no eof; text so far %q", text)
				r = s.OK("tail_log", map[string]any{"name": "cut", "offset": off, "wait_ms": 5000})
				take(r)
			}
			assert.Equal(t, "abc\u00e9 done\n", string(text))
		})
	}
}
