//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
)

func TestWaitTimesOutThenPicksUp(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	s.OK("process_start", map[string]any{"name": "slow", "command": "sleep 2; echo finished; exit 4"})
	w := s.OK("process_wait", map[string]any{"name": "slow", "timeout_ms": 200})
	assert.Equal(t, true, w.Data["wait_timed_out"], w.Text)
	assert.Equal(t, "running", w.Data["run"].(map[string]any)["state"])
	assert.Contains(t, w.Text, "call process_wait again")

	w = s.OK("process_wait", map[string]any{"name": "slow", "timeout_ms": 30000})
	assert.Equal(t, false, w.Data["wait_timed_out"], w.Text)
	run := w.Data["run"].(map[string]any)
	assert.Equal(t, "exited", run["state"])
	assert.Equal(t, int64(4), abtest.Num(run["exit_code"]))
	assert.Equal(t, "finished\n", w.Data["output_tail"])
	assert.GreaterOrEqual(t, abtest.Num(w.Data["duration_ms"]), int64(2000))
}

func TestFollowReturnsNewOutput(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	dir := t.TempDir()
	fifo := filepath.Join(dir, "go")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	// The child prints one line each time the test lets it. One open of
	// the fifo on each side for the whole test: a child that reopened it
	// per line could see the test's previous writer still open, read EOF
	// and end. O_RDWR opens a fifo without waiting for the reader (fifo(7)).
	s.OK("process_start", map[string]any{"name": "f", "command": `while read line; do echo "got $line"; done < ` + fifo})
	f, err := os.OpenFile(fifo, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()

	off := int64(0)
	for i, word := range []string{"one", "two", "three"} {
		done := make(chan abtest.Result, 1)
		began := time.Now()
		go func() {
			done <- s.Call("tail_log", map[string]any{"name": "f", "offset": off, "wait_ms": 60000})
		}()
		// No event says the call is parked (nothing past off): give it a
		// moment, so that the line below is what wakes it.
		time.Sleep(200 * time.Millisecond)
		_, err = f.WriteString(word + "\n")
		require.NoError(t, err)
		r := <-done
		// Woken by the line, not by the deadline: a follower that waits out
		// wait_ms would make every agent wait a minute per line.
		require.Less(t, time.Since(began), 60*time.Second, "call %d returned at its deadline, not when the line was written", i)
		require.False(t, r.IsError, r.Text)
		c := abtest.Str(r.Data["content"])
		require.True(t, strings.HasPrefix("got "+word+"\n", c) && c != "", "call %d: content %q", i, c)
		off = abtest.Num(r.Data["end_offset"])
		// Read the rest of the line if it came in pieces.
		for !strings.HasSuffix(c, "\n") {
			r = s.OK("tail_log", map[string]any{"name": "f", "offset": off, "wait_ms": 5000})
			c += abtest.Str(r.Data["content"])
			off = abtest.Num(r.Data["end_offset"])
		}
		assert.Equal(t, "got "+word+"\n", c)
	}
	s.OK("process_kill", map[string]any{"name": "f", "signal": "KILL"})
}

func TestInteractiveAcrossRestart(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	a := spawn(t, state)
	a.OK("process_start", map[string]any{"name": "ask", "stdin": "pipe",
		"command": `printf 'name? '; read n; echo "hello $n"; printf 'again? '; read m; echo "bye $m"`})
	a.OK("process_write", map[string]any{"name": "ask", "data": "ada\n"})
	a.Kill()

	b := connect(t, state)
	b.OK("process_write", map[string]any{"name": "ask", "data": "bob\n", "close": true})
	w := b.OK("process_wait", map[string]any{"name": "ask", "timeout_ms": 20000})
	assert.Equal(t, int64(0), abtest.Num(w.Data["run"].(map[string]any)["exit_code"]), w.Text)
	r := b.OK("tail_log", map[string]any{"name": "ask"})
	assert.Equal(t, "name? hello ada\nagain? bye bob\n", r.Data["content"])

	e := b.Call("process_write", map[string]any{"name": "ask", "data": "x"})
	assert.True(t, e.IsError)
	assert.Contains(t, e.Text, "stdin")
	b.OK("process_start", map[string]any{"name": "nopipe", "command": "sleep 30"})
	e = b.Call("process_write", map[string]any{"name": "nopipe", "data": "x"})
	assert.True(t, e.IsError)
	assert.Contains(t, e.Text, `started with stdin "null"`)
	b.OK("process_kill", map[string]any{"name": "nopipe", "signal": "KILL"})
}

func TestTimeoutKillsChildIgnoringTerm(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir(), shortGrace)
	s.OK("process_start", map[string]any{"name": "stubborn", "timeout_s": 1,
		"command": `trap '' TERM; echo ready; while :; do sleep 0.1; done`})
	w := s.OK("process_wait", map[string]any{"name": "stubborn", "timeout_ms": 30000})
	run := w.Data["run"].(map[string]any)
	assert.Equal(t, "exited", run["state"], w.Text)
	assert.Equal(t, "SIGKILL", run["signal"], w.Text)
	assert.Equal(t, true, run["timed_out"], w.Text)
	assert.NotContains(t, run, "exit_code", "killed by a signal: no exit status, so no exit_code (absent, not null)")
}

func TestSurvivingDescendantIsReportedAndKilled(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	s.OK("process_start", map[string]any{"name": "bg", "command": `sleep 300 > /dev/null 2>&1 & echo started`})
	w := s.OK("process_wait", map[string]any{"name": "bg", "timeout_ms": 20000})
	run := w.Data["run"].(map[string]any)
	assert.Equal(t, "exited", run["state"])
	surv, _ := run["survivors"].([]any)
	require.Len(t, surv, 1, "the backgrounded sleep must be reported: %s", w.Text)
	pid := int(abtest.Num(surv[0]))
	require.NoError(t, syscall.Kill(pid, 0))
	assert.Contains(t, w.Text, "still running")

	l := abtest.RunOf(t, s.OK("process_list", nil), "bg")
	assert.Len(t, l["survivors"], 1)

	k := s.OK("process_kill", map[string]any{"name": "bg"})
	assert.NotEqual(t, true, k.Data["already_exited"], k.Text)
	abtest.WaitFor(t, "the survivor to die", 10*time.Second, func() bool {
		return syscall.Kill(pid, 0) != nil
	})
	l = abtest.RunOf(t, s.OK("process_list", nil), "bg")
	assert.Empty(t, l["survivors"])
	again := s.OK("process_kill", map[string]any{"name": "bg"})
	assert.Equal(t, true, again.Data["already_exited"], again.Text)
}

// process_kill's one-line answer names the run's processes that are still
// alive after the signal: a STOP (or USR1) ends none, and the answer must
// not read as if the run were over.
func TestKillAnswerNamesWhatStillRuns(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	s.OK("process_start", map[string]any{"name": "bg", "command": `sleep 300 > /dev/null 2>&1 & echo started`})
	w := s.OK("process_wait", map[string]any{"name": "bg", "timeout_ms": 20000})
	surv, _ := w.Data["run"].(map[string]any)["survivors"].([]any)
	require.Len(t, surv, 1, w.Text)
	pid := abtest.Num(surv[0])
	k := s.OK("process_kill", map[string]any{"name": "bg", "signal": "STOP"})
	assert.Contains(t, k.Text, fmt.Sprintf("still running: pids %d", pid))
	s.OK("process_kill", map[string]any{"name": "bg", "signal": "KILL"})
}

func TestTailLinesGrepAndSkippedMarkers(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	s.OK("process_start", map[string]any{"name": "n", "command": `i=0; while [ $i -lt 100 ]; do i=$((i+1)); echo "line $i"; done`})
	s.OK("process_wait", map[string]any{"name": "n"})
	// "line 1\n".."line 9\n" are 7 bytes, "line 10\n".."line 99\n" 8, "line 100\n" 9.
	total := int64(9*7 + 90*8 + 9)

	r := s.OK("tail_log", map[string]any{"name": "n", "tail_lines": 3})
	assert.Equal(t, "line 98\nline 99\nline 100\n", r.Data["content"])
	assert.Equal(t, total-25, abtest.Num(r.Data["offset"]))
	assert.Equal(t, total, abtest.Num(r.Data["end_offset"]))
	assert.Equal(t, total-25, abtest.Num(r.Data["skipped_bytes"]))
	assert.Contains(t, r.Text, "skipped")

	r = s.OK("tail_log", map[string]any{"name": "n", "grep": `^line 5\d?$`})
	ms := r.Data["matches"].([]any)
	require.Len(t, ms, 11, r.Text)
	first := ms[0].(map[string]any)
	assert.Equal(t, "line 5", first["line"])
	assert.Equal(t, int64(4*7), abtest.Num(first["offset"]))
	second := ms[1].(map[string]any)
	assert.Equal(t, "line 50", second["line"])
	assert.Equal(t, int64(9*7+40*8), abtest.Num(second["offset"]))
	var skipped int64
	for _, g := range r.Data["skipped"].([]any) {
		skipped += abtest.Num(g.(map[string]any)["bytes"])
	}
	matched := int64(7 + 10*8)
	assert.Equal(t, total-matched, skipped, "every byte is either returned or reported skipped")

	r = s.OK("tail_log", map[string]any{"name": "n", "offset": -9})
	assert.Equal(t, "line 100\n", r.Data["content"])
	assert.Equal(t, total-9, abtest.Num(r.Data["skipped_bytes"]))
}

func TestRemoveAndLogCap(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	s := connect(t, state)
	// 8 MiB: far past what the pipe holds, so the child finishes only if
	// the supervisor keeps draining past the cap.
	s.OK("process_start", map[string]any{"name": "big", "max_log_bytes": 1000, "command": `head -c 8388608 /dev/zero | tr '\0' x; echo; echo done >&2`})
	w := s.OK("process_wait", map[string]any{"name": "big"})
	run := w.Data["run"].(map[string]any)
	assert.Equal(t, int64(0), abtest.Num(run["exit_code"]), "the child is not hurt by the cap")
	assert.Equal(t, true, run["log_capped"], w.Text)
	assert.Equal(t, int64(1000), abtest.Num(run["log_bytes"]))
	r := s.OK("tail_log", map[string]any{"name": "big"})
	assert.Equal(t, strings.Repeat("x", 1000), r.Data["content"])
	assert.Contains(t, r.Text, "capped")

	s.OK("process_start", map[string]any{"name": "live", "command": "sleep 60"})
	e := s.Call("process_remove", map[string]any{"name": "live"})
	assert.True(t, e.IsError)
	assert.Contains(t, e.Text, "still running")
	rm := s.OK("process_remove", map[string]any{"all_finished": true})
	assert.Len(t, rm.Data["removed"], 1, rm.Text)
	assert.Len(t, rm.Data["kept"], 1, rm.Text)
	l := s.OK("process_list", nil)
	assert.Len(t, l.Data["runs"], 1)
	s.OK("process_kill", map[string]any{"name": "live", "signal": "KILL"})
}
