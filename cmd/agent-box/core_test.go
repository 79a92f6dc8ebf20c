//go:build linux

package main

import (
	"bytes"
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

// writerScript prints n numbered lines to stdout and to stderr, with a
// multi-byte rune in each so that windows cut inside runes are exercised.
func writerScript(n int) string {
	return fmt.Sprintf(`i=0; while [ $i -lt %d ]; do i=$((i+1)); printf 'out %%d héllo\n' $i; printf 'err %%d wörld\n' $i >&2; done`, n)
}

func expected(n int) (stdout, stderr, both []byte) {
	var o, e, b bytes.Buffer
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&o, "out %d héllo\n", i)
		fmt.Fprintf(&e, "err %d wörld\n", i)
		fmt.Fprintf(&b, "out %d héllo\nerr %d wörld\n", i, i)
	}
	return o.Bytes(), e.Bytes(), b.Bytes()
}

func TestStartListTailKill(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"combined", "framed"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			state := t.TempDir()
			s := connect(t, state)
			const n = 300
			r := s.OK("process_start", map[string]any{"name": "writer", "command": writerScript(n), "capture_mode": mode})
			assert.Equal(t, "writer", r.Run()["name"])
			assert.Greater(t, abtest.Num(r.Run()["pid"]), int64(0))
			assert.Equal(t, mode, r.Run()["capture_mode"])
			assert.NotEmpty(t, r.Run()["run_id"])
			s.OK("process_wait", map[string]any{"name": "writer", "timeout_ms": 30000})

			l := s.OK("process_list", nil)
			run := abtest.RunOf(t, l, "writer")
			assert.Equal(t, "exited", run["state"])
			assert.Equal(t, int64(0), abtest.Num(run["exit_code"]))

			wantOut, wantErr, wantBoth := expected(n)
			for _, mb := range []int{7, 100, 4096, 1 << 20} {
				all, so, se := s.ReadAll("writer", mb, mode == "framed")
				if mode == "framed" {
					abtest.SameBytes(t, wantOut, so, "stdout with max_bytes=%d", mb)
					abtest.SameBytes(t, wantErr, se, "stderr with max_bytes=%d", mb)
				} else {
					// One pipe for both streams: the order is the child's.
					abtest.SameBytes(t, wantBoth, all, "max_bytes=%d", mb)
				}
			}

			// A long run, then kill it.
			s.OK("process_start", map[string]any{"name": "sleeper", "argv": []any{"sleep", "300"}, "capture_mode": mode})
			k := s.OK("process_kill", map[string]any{"name": "sleeper"})
			assert.Contains(t, k.Text, "sent SIGTERM to process group")
			// The kill's answer shows the exit once the supervisor has
			// written it; process_wait makes that independent of load.
			kr := s.OK("process_wait", map[string]any{"name": "sleeper"}).Data["run"].(map[string]any)
			assert.Equal(t, "exited", kr["state"], k.Text)
			assert.Equal(t, "SIGTERM", kr["signal"], k.Text)
			assert.NotContains(t, kr, "exit_code", "killed by a signal: no exit status, so no exit_code (absent, not null)")
			again := s.OK("process_kill", map[string]any{"name": "sleeper"})
			assert.Equal(t, true, again.Data["already_exited"], again.Text)
		})
	}
}

func TestTextTailIsValidUTF8AndResumes(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	s.OK("process_start", map[string]any{"name": "w", "command": writerScript(50)})
	s.OK("process_wait", map[string]any{"name": "w"})
	_, _, want := expected(50)
	var got strings.Builder
	off := int64(0)
	for {
		r := s.OK("tail_log", map[string]any{"name": "w", "offset": off, "max_bytes": 5})
		c := abtest.Str(r.Data["content"])
		require.True(t, strings.ToValidUTF8(c, "") == c)
		assert.NotEqual(t, true, r.Data["lossy"])
		got.WriteString(c)
		if r.Data["eof"] == true {
			break
		}
		off = abtest.Num(r.Data["end_offset"])
	}
	assert.Equal(t, string(want), got.String())
}

func TestReconnect(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"combined", "framed"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			state := t.TempDir()
			a := spawn(t, state)
			a.OK("process_start", map[string]any{"name": "long", "capture_mode": mode,
				"command": `i=0; while :; do i=$((i+1)); echo "tick $i"; echo "tock $i" >&2; sleep 0.02; done`})
			a.OK("tail_log", map[string]any{"name": "long", "offset": 0, "wait_ms": 5000})
			a.Kill()

			b := connect(t, state)
			run := abtest.RunOf(t, b.OK("process_list", nil), "long")
			assert.Equal(t, "running", run["state"], "a run must outlive the server that started it")
			pid := int(abtest.Num(run["pid"]))
			require.NoError(t, syscall.Kill(pid, 0))

			// The log keeps growing without any server reading it.
			n1 := abtest.Num(run["log_bytes"])
			abtest.WaitFor(t, "log to grow", 10*time.Second, func() bool {
				return abtest.Num(abtest.RunOf(t, b.OK("process_list", nil), "long")["log_bytes"]) > n1
			})

			k := b.OK("process_kill", map[string]any{"name": "long", "signal": "KILL"})
			kr := b.OK("process_wait", map[string]any{"name": "long"}).Data["run"].(map[string]any)
			assert.Equal(t, "exited", kr["state"], k.Text)
			assert.Equal(t, "SIGKILL", kr["signal"])
			all, so, se := b.ReadAll("long", 1000, mode == "framed")
			if mode == "framed" {
				all = append(so, se...)
			}
			assert.Contains(t, string(all), "tick 1\n")
			assert.Contains(t, string(all), "tock 1\n")
		})
	}
}

func TestExitWhileNoServer(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	a := spawn(t, state)
	a.OK("process_start", map[string]any{"name": "later", "command": "sleep 1; echo done; exit 7"})
	a.Kill()
	// No agent-box exists while the run ends; the supervisor records it.
	b := connect(t, state)
	w := b.OK("process_wait", map[string]any{"name": "later", "timeout_ms": 20000})
	run := w.Data["run"].(map[string]any)
	assert.Equal(t, "exited", run["state"], w.Text)
	assert.Equal(t, int64(7), abtest.Num(run["exit_code"]))
	assert.Contains(t, abtest.Str(w.Data["output_tail"]), "done")
}

func TestNameReuseKeepsOldRun(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	s.OK("process_start", map[string]any{"name": "job", "command": "echo first"})
	s.OK("process_wait", map[string]any{"name": "job"})
	s.OK("process_start", map[string]any{"name": "job", "command": "echo second"})
	s.OK("process_wait", map[string]any{"name": "job"})

	l := s.OK("process_list", map[string]any{"all": true})
	runs := l.Data["runs"].([]any)
	require.Len(t, runs, 2, l.Text)
	// Newest first.
	first := runs[1].(map[string]any)
	second := runs[0].(map[string]any)
	assert.Less(t, abtest.Str(first["run_id"]), abtest.Str(second["run_id"]))
	r1 := s.OK("tail_log", map[string]any{"name": "job", "run_id": first["run_id"]})
	r2 := s.OK("tail_log", map[string]any{"name": "job"})
	assert.Equal(t, "first\n", r1.Data["content"])
	assert.Equal(t, "second\n", r2.Data["content"])

	s.OK("process_start", map[string]any{"name": "busy", "argv": []any{"sleep", "60"}})
	e := s.Call("process_start", map[string]any{"name": "busy", "command": "true"})
	assert.True(t, e.IsError)
	assert.Contains(t, e.Text, "name in use")
	s.OK("process_kill", map[string]any{"name": "busy", "signal": "KILL"})
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	s := connect(t, state)
	s.OK("process_start", map[string]any{"name": "ok", "command": "echo hi"})
	s.OK("process_wait", map[string]any{"name": "ok"})
	before := snapshot(t, state)
	cases := []struct {
		tool string
		args map[string]any
		want string
	}{
		{"process_start", map[string]any{"name": "../x", "command": "true"}, "start with a letter or digit"},
		{"process_start", map[string]any{"name": "", "command": "true"}, "name is required"},
		{"process_start", map[string]any{"name": strings.Repeat("a", 65), "command": "true"}, "65"},
		{"process_start", map[string]any{"name": "a\x00b", "command": "true"}, "0x00"},
		{"process_start", map[string]any{"name": "a b", "command": "true"}, "0x20"},
		{"process_start", map[string]any{"name": "x", "command": "true", "argv": []any{"true"}}, "not both"},
		{"process_start", map[string]any{"name": "x"}, "give command"},
		{"process_start", map[string]any{"name": "x", "command": "true", "cwd": "/nonexistent/dir"}, "does not exist"},
		{"process_start", map[string]any{"name": "x", "command": "true", "capture_mode": "split"}, "capture_mode"},
		{"process_start", map[string]any{"name": "x", "argv": []any{"no-such-program-xyz"}}, "not found"},
		{"process_start", map[string]any{"name": "x", "command": "true", "colour": "red"}, "unknown field"},
		{"process_kill", map[string]any{"name": "ok", "signal": "BOOM"}, "signal"},
		{"process_kill", map[string]any{"name": "nope"}, "no run named"},
		{"tail_log", map[string]any{"name": "ok", "max_bytes": -1}, "max_bytes"},
		{"tail_log", map[string]any{"name": "ok", "max_bytes": 2 << 20}, "max_bytes"},
		{"tail_log", map[string]any{"name": "ok", "offset": 1000}, "past the end"},
		{"tail_log", map[string]any{"name": "nope"}, "no run named"},
		{"tail_log", map[string]any{"name": "ok", "run_id": "20260101T000000.000000000Z-abcdef"}, "no run id"},
		{"tail_log", map[string]any{"name": "ok", "run_id": "../../etc"}, "run id"},
		{"tail_log", map[string]any{"name": "ok", "grep": "("}, "grep"},
	}
	for _, c := range cases {
		r := s.Call(c.tool, c.args)
		assert.True(t, r.IsError, "%s %v should fail", c.tool, c.args)
		assert.Contains(t, r.Text, c.want, "%s %v", c.tool, c.args)
	}
	assert.Equal(t, before, snapshot(t, state), "bad input must change nothing")
}

// snapshot lists every file under dir with its size.
func snapshot(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out[rel] = fi.Size()
		}
		return nil
	})
	return out
}
