package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sameBytes compares long outputs and reports where they differ, not
// both in full.
func sameBytes(t *testing.T, want, got []byte, format string, args ...any) {
	t.Helper()
	if bytes.Equal(want, got) {
		return
	}
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	t.Errorf("%s: got %d bytes, want %d; first difference at byte %d: got %q, want %q", fmt.Sprintf(format, args...),
		len(got), len(want), i, got[i:min(len(got), i+40)], want[i:min(len(want), i+40)])
}

func b64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	require.NoError(t, err)
	return b
}

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
	for _, mode := range []string{"combined", "framed"} {
		t.Run(mode, func(t *testing.T) {
			state := t.TempDir()
			s := connect(t, state)
			const n = 300
			r := s.ok("process_start", map[string]any{"name": "writer", "command": writerScript(n), "capture_mode": mode})
			assert.Equal(t, "writer", r.Data["name"])
			assert.Greater(t, num(r.Data["pid"]), int64(0))
			assert.Equal(t, mode, r.Data["capture_mode"])
			assert.NotEmpty(t, r.Data["run_id"])
			s.ok("process_wait", map[string]any{"name": "writer", "timeout_ms": 30000})

			l := s.ok("process_list", nil)
			run := runOf(t, l, "writer")
			assert.Equal(t, "exited", run["state"])
			assert.Equal(t, int64(0), num(run["exit_code"]))

			wantOut, wantErr, wantBoth := expected(n)
			for _, mb := range []int{7, 100, 4096, 1 << 20} {
				all, so, se := s.readAll("writer", mb, mode == "framed")
				if mode == "framed" {
					sameBytes(t, wantOut, so, "stdout with max_bytes=%d", mb)
					sameBytes(t, wantErr, se, "stderr with max_bytes=%d", mb)
				} else {
					// One pipe for both streams: the order is the child's.
					sameBytes(t, wantBoth, all, "max_bytes=%d", mb)
				}
			}

			// A long run, then kill it.
			s.ok("process_start", map[string]any{"name": "sleeper", "argv": []any{"sleep", "300"}, "capture_mode": mode})
			k := s.ok("process_kill", map[string]any{"name": "sleeper"})
			kr := k.Data["run"].(map[string]any)
			assert.Equal(t, "exited", kr["state"], k.Text)
			assert.Equal(t, "SIGTERM", kr["signal"], k.Text)
			assert.Nil(t, kr["exit_code"], "a kill is not exit 0")
			again := s.ok("process_kill", map[string]any{"name": "sleeper"})
			assert.Equal(t, true, again.Data["already_exited"], again.Text)
		})
	}
}

func TestTextTailIsValidUTF8AndResumes(t *testing.T) {
	s := connect(t, t.TempDir())
	s.ok("process_start", map[string]any{"name": "w", "command": writerScript(50)})
	s.ok("process_wait", map[string]any{"name": "w"})
	_, _, want := expected(50)
	var got strings.Builder
	off := int64(0)
	for {
		r := s.ok("tail_log", map[string]any{"name": "w", "offset": off, "max_bytes": 5})
		c := str(r.Data["content"])
		require.True(t, strings.ToValidUTF8(c, "") == c)
		assert.NotEqual(t, true, r.Data["lossy"])
		got.WriteString(c)
		if r.Data["eof"] == true {
			break
		}
		off = num(r.Data["end_offset"])
	}
	assert.Equal(t, string(want), got.String())
}

func TestReconnect(t *testing.T) {
	for _, mode := range []string{"combined", "framed"} {
		t.Run(mode, func(t *testing.T) {
			state := t.TempDir()
			a := connect(t, state)
			a.ok("process_start", map[string]any{"name": "long", "capture_mode": mode,
				"command": `i=0; while :; do i=$((i+1)); echo "tick $i"; echo "tock $i" >&2; sleep 0.02; done`})
			a.ok("tail_log", map[string]any{"name": "long", "offset": 0, "wait_ms": 5000})
			a.kill()

			b := connect(t, state)
			run := runOf(t, b.ok("process_list", nil), "long")
			assert.Equal(t, "running", run["state"], "a run must outlive the server that started it")
			pid := int(num(run["pid"]))
			require.NoError(t, syscall.Kill(pid, 0))

			// The log keeps growing without any server reading it.
			n1 := num(run["log_bytes"])
			waitFor(t, "log to grow", 10*time.Second, func() bool {
				return num(runOf(t, b.ok("process_list", nil), "long")["log_bytes"]) > n1
			})

			k := b.ok("process_kill", map[string]any{"name": "long", "signal": "KILL"})
			kr := k.Data["run"].(map[string]any)
			assert.Equal(t, "exited", kr["state"], k.Text)
			assert.Equal(t, "SIGKILL", kr["signal"])
			all, so, se := b.readAll("long", 1000, mode == "framed")
			if mode == "framed" {
				all = append(so, se...)
			}
			assert.Contains(t, string(all), "tick 1\n")
			assert.Contains(t, string(all), "tock 1\n")
		})
	}
}

func TestExitWhileNoServer(t *testing.T) {
	state := t.TempDir()
	a := connect(t, state)
	a.ok("process_start", map[string]any{"name": "later", "command": "sleep 1; echo done; exit 7"})
	a.kill()
	// No agent-box exists while the run ends; the supervisor records it.
	b := connect(t, state)
	w := b.ok("process_wait", map[string]any{"name": "later", "timeout_ms": 20000})
	run := w.Data["run"].(map[string]any)
	assert.Equal(t, "exited", run["state"], w.Text)
	assert.Equal(t, int64(7), num(run["exit_code"]))
	assert.Contains(t, str(w.Data["output_tail"]), "done")
}

func TestNameReuseKeepsOldRun(t *testing.T) {
	s := connect(t, t.TempDir())
	s.ok("process_start", map[string]any{"name": "job", "command": "echo first"})
	s.ok("process_wait", map[string]any{"name": "job"})
	s.ok("process_start", map[string]any{"name": "job", "command": "echo second"})
	s.ok("process_wait", map[string]any{"name": "job"})

	l := s.ok("process_list", map[string]any{"all": true})
	runs := l.Data["runs"].([]any)
	require.Len(t, runs, 2, l.Text)
	first := runs[0].(map[string]any)
	second := runs[1].(map[string]any)
	assert.Less(t, str(first["run_id"]), str(second["run_id"]))
	r1 := s.ok("tail_log", map[string]any{"name": "job", "run_id": first["run_id"]})
	r2 := s.ok("tail_log", map[string]any{"name": "job"})
	assert.Equal(t, "first\n", r1.Data["content"])
	assert.Equal(t, "second\n", r2.Data["content"])

	s.ok("process_start", map[string]any{"name": "busy", "argv": []any{"sleep", "60"}})
	e := s.call("process_start", map[string]any{"name": "busy", "command": "true"})
	assert.True(t, e.IsError)
	assert.Contains(t, e.Text, "name in use")
	s.ok("process_kill", map[string]any{"name": "busy", "signal": "KILL"})
}

func TestBadInput(t *testing.T) {
	state := t.TempDir()
	s := connect(t, state)
	s.ok("process_start", map[string]any{"name": "ok", "command": "echo hi"})
	s.ok("process_wait", map[string]any{"name": "ok"})
	before := snapshot(t, state)
	cases := []struct {
		tool string
		args map[string]any
		want string
	}{
		{"process_start", map[string]any{"name": "../x", "command": "true"}, "start with a letter or digit"},
		{"process_start", map[string]any{"name": "", "command": "true"}, "empty"},
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
		r := s.call(c.tool, c.args)
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
