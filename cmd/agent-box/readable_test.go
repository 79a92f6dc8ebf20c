//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
)

// Grep sized for a model (issue 11): the Go test's file:line above its
// "--- FAIL" comes with it as context, a byte-dump line is cut with its
// length and offset, and an answer with no match says so.
func TestGrepContextAndCutLines(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	s.OK("process_start", map[string]any{"name": "gotest",
		"command": `echo '=== RUN TestA'; echo '    a_test.go:12: got 1, want 2'; echo '--- FAIL: TestA (0.00s)'; echo '=== RUN TestB'; ` +
			`echo '--- PASS: TestB (0.00s)'; echo '=== RUN TestC'; echo '    c_test.go:9: nil'; echo '--- FAIL: TestC (0.00s)'; ` +
			`printf 'dump %03000d\n' 0; echo FAIL`})
	s.OK("process_wait", map[string]any{"name": "gotest"})

	r := s.OK("tail_log", map[string]any{"name": "gotest", "grep": "^--- FAIL", "context": 1})
	want := "14- " + "    a_test.go:12: got 1, want 2\n" +
		"46: --- FAIL: TestA (0.00s)\n" +
		"70- === RUN TestB\n" +
		"--\n" +
		"122- " + "    c_test.go:9: nil\n" +
		"143: --- FAIL: TestC (0.00s)\n" +
		"167- dump "
	assert.Contains(t, r.Text, " 2 matching lines and 4 context lines, each after its byte offset", r.Text)
	assert.Contains(t, r.Text, want, r.Text)
	assert.Contains(t, r.Text, "...[cut: the line is 3005 bytes, from offset 167]\n", r.Text)
	ms := r.Data["matches"].([]any)
	require.Len(t, ms, 6)
	last := ms[5].(map[string]any)
	assert.Equal(t, true, last["context"])
	assert.EqualValues(t, 3005, last["line_bytes"], "structured content says the line was cut")
	assert.Len(t, abtest.Str(last["line"]), 512)

	// From an offset no grep returned, just after a match, the line after
	// it is context whose match the answer does not hold, and says so.
	r = s.OK("tail_log", map[string]any{"name": "gotest", "grep": "^--- FAIL", "context": 1, "offset": 70, "max_bytes": 30})
	assert.Contains(t, r.Text, " 0 matching lines and 1 context lines", r.Text)
	assert.Contains(t, r.Text, "(1 of the context lines follow a match before offset 70, not in this answer)", r.Text)
	assert.Equal(t, true, r.Data["matches"].([]any)[0].(map[string]any)["continues"])

	// A line longer than the window is matched in parts: each says it is
	// a part, not that the line is as long as the part.
	r = s.OK("tail_log", map[string]any{"name": "gotest", "grep": "^dump", "max_bytes": 1000, "offset": 167})
	assert.Contains(t, r.Text, "...[cut: part of a line longer than a window; this part is 1000 bytes, from offset 167]\n", r.Text)
	assert.NotContains(t, r.Text, "the line is 1000 bytes", r.Text)
	assert.Equal(t, true, r.Data["matches"].([]any)[0].(map[string]any)["part"])

	r = s.OK("tail_log", map[string]any{"name": "gotest", "grep": "panic:"})
	assert.Contains(t, r.Text, " 0 matching lines;", r.Text)

	r = s.Call("tail_log", map[string]any{"name": "gotest", "grep": "FAIL", "context": 21})
	assert.True(t, r.IsError, r.Text)
	assert.Contains(t, r.Text, "context must be between 0 and 20, got 21")
}

// Framed text says which stream (issue 11): what stderr wrote is marked in
// tail_log's text and in process_wait's tail, not in structured content.
func TestFramedTextMarksStderrLines(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	s := connect(t, state)
	s.OK("process_start", map[string]any{"name": "mixed", "capture_mode": "framed",
		"command": abtest.InOrder(state, "echo building", "echo 'warning: x' >&2", "echo done")})
	w := s.OK("process_wait", map[string]any{"name": "mixed"})
	assert.Contains(t, w.Text, "building\n[stderr] warning: x\ndone\n", w.Text)

	r := s.OK("tail_log", map[string]any{"name": "mixed"})
	assert.True(t, strings.HasSuffix(r.Text, "of text follow]\nbuilding\n[stderr] warning: x\ndone\n"), r.Text)
	assert.Equal(t, "building\nwarning: x\ndone\n", abtest.Chunks(r.Data, ""))
}

// Replies to process_write and process_kill are one short line (issue 11),
// not the whole run again; structured content keeps the run.
func TestWriteAndKillAnswerInOneLine(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	s.OK("process_start", map[string]any{"name": "cat", "command": "cat", "stdin": "pipe"})
	r := s.OK("process_write", map[string]any{"name": "cat", "data": "hello\n"})
	assert.Equal(t, "wrote 6 bytes to cat's stdin", r.Text)
	assert.NotNil(t, r.Data["run"])

	r = s.OK("process_kill", map[string]any{"name": "cat"})
	assert.NotContains(t, r.Text, "\n")
	assert.Regexp(t, `^cat: sent SIGTERM to process group \d+; now \S`, r.Text)
	assert.NotNil(t, r.Data["run"])
}

// A follower with grep and context gets the line before a match even when
// the match is written long after it: the answer that reaches the end of
// the output ends before the lines a match may yet follow, and says so.
func TestGrepContextFollowKeepsTheLineBefore(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"combined", "framed"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			s := connect(t, t.TempDir())
			gate := filepath.Join(t.TempDir(), "gate")
			require.NoError(t, syscall.Mkfifo(gate, 0o600))
			s.OK("process_start", map[string]any{"name": "slow", "capture_mode": mode,
				"command": `echo start; echo '    x_test.go:3: bad'; read _ < '` + gate + `'; echo '--- FAIL: TestX'; echo after`})
			t.Cleanup(func() { s.Call("process_kill", map[string]any{"name": "slow", "signal": "KILL"}) })
			firstBytes(t, s, "slow", mode == "framed", len("start\n    x_test.go:3: bad\n"))

			// Framed, both lines may be in one frame: then the answer is
			// empty at once.
			r := s.OK("tail_log", map[string]any{"name": "slow", "grep": "FAIL", "context": 1})
			if r.Data["end_offset"] != r.Data["offset"] {
				r = s.OK("tail_log", map[string]any{"name": "slow", "grep": "FAIL", "context": 1, "offset": r.Data["end_offset"]})
			}
			assert.Contains(t, r.Text, "the last lines wait for what follows them", r.Text)
			at := r.Data["end_offset"]

			done := make(chan abtest.Result, 1)
			go func() {
				done <- s.Call("tail_log", map[string]any{"name": "slow", "grep": "FAIL", "context": 1, "offset": at, "wait_ms": 30000})
			}()
			g, err := os.OpenFile(gate, os.O_WRONLY, 0) // the shell is reading it
			require.NoError(t, err)
			_, err = g.WriteString("go\n")
			require.NoError(t, err)
			require.NoError(t, g.Close())
			r = <-done
			require.False(t, r.IsError, r.Text)
			assert.Regexp(t, `\]\n\d+( stdout)?-     x_test.go:3: bad\n\d+( stdout)?: --- FAIL: TestX\n`, r.Text)

			// The wait may return before "after" is written: the next
			// call from its end offset owes it as the match's context.
			text := r.Text
			if !strings.Contains(text, "- after") {
				r = s.OK("tail_log", map[string]any{"name": "slow", "grep": "FAIL", "context": 1, "offset": r.Data["end_offset"], "wait_ms": 30000})
				text += r.Text
			}
			assert.Regexp(t, `\n\d+( stdout)?- after\n`, text)
		})
	}
}
