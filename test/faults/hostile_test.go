package faults

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
)

// maxErrorText bounds every refusal: an error must not echo a hostile
// megabyte back into the agent's context.
const maxErrorText = 1024

// quotedTable reads a fixture of `"go-quoted"<TAB>fragment` lines.
func quotedTable(t *testing.T, name string) [][2]string {
	t.Helper()
	var out [][2]string
	sc := bufio.NewScanner(bytes.NewReader(fixture(t, name)))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		q, frag, ok := strings.Cut(line, "\t")
		require.True(t, ok, "fixture %s: no tab in %q", name, line)
		v, err := strconv.Unquote(q)
		require.NoError(t, err, "fixture %s: %q", name, q)
		out = append(out, [2]string{v, frag})
	}
	return out
}

// refused calls tool and fails unless it is a tool error containing every
// fragment, short enough to read.
func refused(t *testing.T, s *abtest.Server, tool string, args map[string]any, frags ...string) abtest.Result {
	t.Helper()
	r := s.Call(tool, args)
	what := tool + "(" + brief(args) + ")"
	if !assert.True(t, r.IsError, "%s must be refused; got: %s", what, cut(r.Text, 300)) {
		return r
	}
	for _, f := range frags {
		assert.Contains(t, cut(r.Text, 64<<10), f, what)
	}
	assert.LessOrEqual(t, len(r.Text), maxErrorText, "%s: error of %d bytes: %s", what, len(r.Text), cut(r.Text, 200))
	return r
}

// brief is args as JSON, cut for a failure message.
func brief(args any) string {
	b, _ := json.Marshal(args)
	return cut(string(b), 200)
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("...(%d bytes)", len(s))
}

// callRaw sends arguments as given (raw JSON included) and returns the
// protocol error too, for inputs the transport itself may refuse.
func callRaw(s *abtest.Server, tool string, args any) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return s.Session().CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
}

func resultText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// withFinishedRun returns a state dir holding one finished run "ok", and a
// server on it.
func withFinishedRun(t *testing.T) (string, *abtest.Server) {
	t.Helper()
	state := t.TempDir()
	s := connect(t, state)
	s.OK("process_start", map[string]any{"name": "ok", "command": "echo fine"})
	s.OK("process_wait", map[string]any{"name": "ok", "timeout_ms": 30000})
	settled(t, state, "ok")
	return state, s
}

// TestHostileNamesAreRefusedEverywhere: every tool that takes a name
// refuses names with path tricks, control bytes, lookalikes and excess
// length, with an error naming the offending byte, and nothing is created
// on disk (not under the state dir and not beside it).
func TestHostileNamesAreRefusedEverywhere(t *testing.T) {
	t.Parallel()
	state, s := withFinishedRun(t)
	parent := filepath.Dir(state)
	before, beforeParent := snapshot(t, state), snapshot(t, parent)
	names := quotedTable(t, "bad-names.txt")
	require.GreaterOrEqual(t, len(names), 25)
	for _, c := range names {
		name, frag := c[0], c[1]
		calls := []struct {
			tool string
			args map[string]any
		}{
			{"process_start", map[string]any{"name": name, "command": "touch /tmp/agent-box-faults-must-not-exist"}},
			{"process_start", map[string]any{"name": name, "argv": []any{"true"}}},
			{"process_list", map[string]any{"name": name}},
			{"tail_log", map[string]any{"name": name}},
			{"process_wait", map[string]any{"name": name, "timeout_ms": 0}},
			{"process_kill", map[string]any{"name": name, "signal": "KILL"}},
			{"process_write", map[string]any{"name": name, "data": "x"}},
			{"process_resize", map[string]any{"name": name, "cols": 80, "rows": 24}},
			{"process_remove", map[string]any{"name": name}},
		}
		for _, call := range calls {
			if name == "" && (call.tool == "process_list" || call.tool == "process_remove") {
				continue // no name means every run there; not a bad name
			}
			bad("name")
			if name == "" {
				refused(t, s, call.tool, call.args, frag) // a missing argument
				continue
			}
			refused(t, s, call.tool, call.args, "invalid run name", frag)
		}
	}
	sameTree(t, before, snapshot(t, state), "state dir")
	sameTree(t, beforeParent, snapshot(t, parent), "the state dir's parent")
	_, err := os.Lstat("/tmp/agent-box-faults-must-not-exist")
	assert.True(t, os.IsNotExist(err), "a refused start ran its command")
}

// TestHostileRunIDsAreRefused: run ids are checked against the exact shape
// agent-box writes before any path is built.
func TestHostileRunIDsAreRefused(t *testing.T) {
	t.Parallel()
	state, s := withFinishedRun(t)
	before := snapshot(t, state)
	for _, c := range quotedTable(t, "bad-run-ids.txt") {
		id, frag := c[0], c[1]
		for _, call := range []struct {
			tool string
			args map[string]any
		}{
			{"tail_log", map[string]any{"name": "ok", "run_id": id}},
			{"process_wait", map[string]any{"name": "ok", "run_id": id, "timeout_ms": 0}},
			{"process_kill", map[string]any{"name": "ok", "run_id": id}},
			{"process_write", map[string]any{"name": "ok", "run_id": id, "data": "x"}},
			{"process_resize", map[string]any{"name": "ok", "run_id": id, "cols": 80, "rows": 24}},
			{"process_remove", map[string]any{"name": "ok", "run_id": id}},
		} {
			bad("run_id")
			refused(t, s, call.tool, call.args, "invalid run id", frag)
		}
	}
	sameTree(t, before, snapshot(t, state), "state dir")
}

// TestHostileArgumentValues: out-of-range, ill-typed and contradictory
// arguments of every tool get a specific, short error and change nothing.
func TestHostileArgumentValues(t *testing.T) {
	t.Parallel()
	state, s := withFinishedRun(t)
	before := snapshot(t, state)
	st := func(over map[string]any) map[string]any {
		a := map[string]any{"name": "new", "command": "true"}
		maps.Copy(a, over)
		for k, v := range a {
			if v == nil {
				delete(a, k)
			}
		}
		return a
	}
	cases := []struct {
		tool string
		args map[string]any
		want string
	}{
		{"process_start", map[string]any{}, "name is required"},
		{"process_start", st(map[string]any{"command": nil}), "give command"},
		{"process_start", st(map[string]any{"argv": []any{"true"}}), "not both"},
		{"process_start", st(map[string]any{"command": "true\x00rm -rf /"}), "NUL"},
		{"process_start", st(map[string]any{"command": nil, "argv": []any{""}}), "argv[0] is empty"},
		{"process_start", st(map[string]any{"command": nil, "argv": []any{"true", "a\x00b"}}), "argv[1] contains a NUL"},
		{"process_start", st(map[string]any{"command": nil, "argv": []any{"/nonexistent/prog"}}), "no such file"},
		{"process_start", st(map[string]any{"command": nil, "argv": []any{"no-such-program-faults"}}), "not found in PATH"},
		{"process_start", st(map[string]any{"command": nil, "argv": []any{"/etc"}}), "is a directory"},
		{"process_start", st(map[string]any{"command": nil, "argv": []any{"/etc/passwd"}}), "is not executable"},
		{"process_start", st(map[string]any{"cwd": "/nonexistent/dir"}), "does not exist"},
		{"process_start", st(map[string]any{"cwd": "/etc/passwd"}), "is not a directory"},
		{"process_start", st(map[string]any{"env": map[string]any{"": "x"}}), "must be non-empty"},
		{"process_start", st(map[string]any{"env": map[string]any{"A=B": "x"}}), "neither '=' nor NUL"},
		{"process_start", st(map[string]any{"env": map[string]any{"A\x00": "x"}}), "neither '=' nor NUL"},
		{"process_start", st(map[string]any{"env": map[string]any{"A": "x\x00y"}}), "contains a NUL"},
		{"process_start", st(map[string]any{"secret_env": map[string]any{"S": ""}}), "empty secret"},
		{"process_start", st(map[string]any{"secret_env": map[string]any{"S": "s3cret-value"}, "env": map[string]any{"S": "w"}}), "in both env and secret_env"},
		{"process_start", st(map[string]any{"capture_mode": "tty"}), "capture_mode \"tty\""},
		{"process_start", st(map[string]any{"stdin": "/dev/sda"}), "stdin \"/dev/sda\""},
		{"process_start", st(map[string]any{"timeout_s": -1}), "timeout_s -1 is out of range"},
		{"process_start", st(map[string]any{"timeout_s": 604801}), "timeout_s 604801 is out of range"},
		{"process_start", st(map[string]any{"ready": map[string]any{"tcp_port": 80}, "ready_timeout_s": 601}), "ready_timeout_s 601 is out of range 0..600"},
		{"process_start", st(map[string]any{"max_log_bytes": -1}), "max_log_bytes -1 is out of range"},
		{"process_start", st(map[string]any{"max_log_bytes": int64(1) << 41}), "out of range"},
		{"process_start", st(map[string]any{"name": 5}), "name must be a string, not a number"},
		{"process_start", st(map[string]any{"command": nil, "argv": "true"}), "argv must be an array of strings, not a string"},
		{"process_start", st(map[string]any{"env": []any{"A=1"}}), "env must be an object whose values are strings, not an array"},
		{"process_start", st(map[string]any{"timeout_s": 1.5}), "timeout_s must be an integer, not 1.5"},
		{"process_start", st(map[string]any{"timeout_s": 1e30}), "timeout_s 1e+30 is out of range"},
		{"process_start", st(map[string]any{"max_log_bytes": "1G"}), "max_log_bytes must be an integer, not a string"},
		{"process_list", map[string]any{"all": "yes"}, "all must be true or false, not a string"},
		{"process_kill", map[string]any{"name": "ok", "signal": "SEGV"}, "signal \"SEGV\" is not one of"},
		{"process_kill", map[string]any{"name": "ok", "signal": "9"}, "is not one of"},
		{"process_kill", map[string]any{"name": "ok", "signal": "KILL; rm -rf /"}, "is not one of"},
		{"process_kill", map[string]any{"name": "ok", "signal": "SIGSIGKILL"}, "is not one of"},
		{"process_kill", map[string]any{"name": "ok", "grace_ms": -1}, "grace_ms -1 is out of range"},
		{"process_kill", map[string]any{"name": "ok", "grace_ms": 600001}, "grace_ms 600001 is out of range 0..600000"},
		{"process_kill", map[string]any{"name": "ok", "grace_ms": int64(1) << 62}, "grace_ms is out of range 0..600000"},
		{"process_kill", map[string]any{"name": "ok", "grace_ms": -(int64(1) << 62)}, "grace_ms is out of range"},
		{"process_restart", map[string]any{"name": "ok", "grace_ms": int64(1) << 50}, "grace_ms is out of range 0..600000"},
		{"process_wait", map[string]any{"name": "ok", "names": []string{"ok"}}, "give name or names, not both"},
		{"process_list", map[string]any{"limit": 100001}, "limit 100001 is out of range 1..100000"},
		{"tail_log", map[string]any{"name": "ok", "offset": int64(1) << 50}, "past the end of the log"},
		{"tail_log", map[string]any{"name": "ok", "max_bytes": 0}, "max_bytes must be between 1 and 1048576"},
		{"tail_log", map[string]any{"name": "ok", "max_bytes": -5}, "max_bytes must be between"},
		{"tail_log", map[string]any{"name": "ok", "max_bytes": 1048577}, "max_bytes must be between"},
		{"tail_log", map[string]any{"name": "ok", "encoding": "hex"}, "encoding \"hex\""},
		{"tail_log", map[string]any{"name": "ok", "wait_ms": -1}, "wait_ms -1 is out of range 0..60000"},
		{"tail_log", map[string]any{"name": "ok", "wait_ms": 60001}, "wait_ms 60001 is out of range"},
		{"tail_log", map[string]any{"name": "ok", "tail_lines": -1}, "tail_lines must be between"},
		{"tail_log", map[string]any{"name": "ok", "tail_lines": 0}, "tail_lines must be between"},
		{"process_list", map[string]any{"limit": 0}, "limit 0 is out of range"},
		{"tail_log", map[string]any{"name": "ok", "tail_lines": 10001}, "tail_lines must be between"},
		{"tail_log", map[string]any{"name": "ok", "tail_lines": 5, "offset": 3}, "tail_lines counts back from the end of the log; leave offset out"},
		{"tail_log", map[string]any{"name": "ok", "tail_lines": 5, "grep": "x"}, "cannot be combined"},
		{"tail_log", map[string]any{"name": "ok", "grep": "(unclosed"}, "grep"},
		{"tail_log", map[string]any{"name": "ok", "grep": strings.Repeat("a", 4097)}, "at most 4096"},
		{"tail_log", map[string]any{"name": "ok", "grep": "x{1001}"}, "grep"},
		{"tail_log", map[string]any{"name": "ok", "raw": true}, "raw applies to framed runs only"},
		{"tail_log", map[string]any{"name": "ok", "offset": "0"}, "offset must be an integer, not a string"},
		{"process_wait", map[string]any{"name": "ok", "timeout_ms": -1}, "timeout_ms -1 is out of range 0..600000"},
		{"process_wait", map[string]any{"name": "ok", "timeout_ms": 600001}, "timeout_ms 600001 is out of range"},
		{"process_write", map[string]any{"name": "ok", "data": "x", "encoding": "hex"}, "encoding \"hex\""},
		{"process_write", map[string]any{"name": "ok", "data": "!!!", "encoding": "base64"}, "not valid base64"},
		{"process_write", map[string]any{"name": "ok"}, "nothing to do"},
		{"process_write", map[string]any{"name": "ok", "data": "x"}, "stdin \"null\""},
		{"process_remove", map[string]any{}, "name is required"},
		{"process_remove", map[string]any{"name": "ok", "run_id": "20261202T141701.123456789Z-3f9a1c", "all_finished": true}, "exclude each other"},
		{"no_such_tool", map[string]any{}, ""},
	}
	for _, c := range cases {
		bad("value")
		if c.tool == "no_such_tool" {
			_, err := callRaw(s, c.tool, c.args)
			assert.Error(t, err, "an unknown tool is a protocol error")
			continue
		}
		refused(t, s, c.tool, c.args, c.want)
	}
	sameTree(t, before, snapshot(t, state), "state dir")
	s.OK("process_list", nil) // still serving
}

// TestUnknownArgumentsAreRefusedByName: a misspelt or extra argument is an
// error naming it, never silently ignored, for every tool.
func TestUnknownArgumentsAreRefusedByName(t *testing.T) {
	t.Parallel()
	state, s := withFinishedRun(t)
	before := snapshot(t, state)
	for _, c := range []struct {
		tool string
		args map[string]any
		key  string
	}{
		{"process_start", map[string]any{"name": "u", "comand": "true"}, "comand"},
		{"process_start", map[string]any{"name": "u", "command": "true", "timeout": 5}, "timeout"},
		{"process_start", map[string]any{"name": "u", "command": "true", "secrets": map[string]any{"A": "b"}}, "secrets"},
		{"process_start", map[string]any{"name": "u", "command": "true", "__proto__": map[string]any{}}, "__proto__"},
		{"process_list", map[string]any{"al": true}, "al"},
		{"process_kill", map[string]any{"name": "ok", "sig": "KILL"}, "sig"},
		{"tail_log", map[string]any{"name": "ok", "max_byte": 1}, "max_byte"},
		{"tail_log", map[string]any{"name": "ok", "follow": true}, "follow"},
		{"process_wait", map[string]any{"name": "ok", "timeout": 1}, "timeout"},
		{"process_write", map[string]any{"name": "ok", "input": "x"}, "input"},
		{"process_remove", map[string]any{"name": "ok", "force": true}, "force"},
	} {
		bad("unknown field")
		refused(t, s, c.tool, c.args, "unknown field", strconv.Quote(c.key))
	}
	sameTree(t, before, snapshot(t, state), "state dir")
}

// TestArgumentNamesAreCaseSensitive: the schemas say additionalProperties
// false, and JSON keys are case-sensitive, so "Command" is not "command".
// encoding/json matches keys case-insensitively, which would make a
// "Command" (or a duplicate "NAME") silently take effect.
func TestArgumentNamesAreCaseSensitive(t *testing.T) {
	t.Parallel()
	state, s := withFinishedRun(t)
	before := snapshot(t, state)
	for _, c := range []struct {
		tool string
		args map[string]any
		key  string
	}{
		{"process_start", map[string]any{"name": "ci", "Command": "echo case"}, "Command"},
		{"process_start", map[string]any{"NAME": "ci", "command": "echo case"}, "NAME"},
		{"tail_log", map[string]any{"name": "ok", "Max_Bytes": 1}, "Max_Bytes"},
		{"process_kill", map[string]any{"name": "ok", "Signal": "KILL"}, "Signal"},
	} {
		bad("case-folded field")
		refused(t, s, c.tool, c.args, strconv.Quote(c.key))
	}
	sameTree(t, before, snapshot(t, state), "state dir")
}

// TestOversizedArguments: arguments past the bounds the schemas declare get
// a bounded, clear error before anything is created.
func TestOversizedArguments(t *testing.T) {
	t.Parallel()

	many := func(n int, f func(i int) string) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = f(i)
		}
		return out
	}
	manyEnv := func(n int) map[string]any {
		m := map[string]any{}
		for i := range n {
			m[fmt.Sprintf("V%05d", i)] = "x"
		}
		return m
	}
	manySecrets := func(n int) map[string]any {
		m := map[string]any{}
		for i := range n {
			m[fmt.Sprintf("S%03d", i)] = fmt.Sprintf("secret-value-%03d", i)
		}
		return m
	}
	cases := []struct {
		what string
		args map[string]any
		want []string
	}{
		{"3 MiB command", map[string]any{"name": "big1", "command": "echo " + strings.Repeat("x", 3<<20)}, []string{"at most 2097152"}},
		{"1 MiB name", map[string]any{"name": strings.Repeat("n", 1<<20), "command": "true"}, []string{"invalid run name", "at most 64"}},
		{"1 MiB env name", map[string]any{"name": "big2", "command": "true", "env": map[string]any{strings.Repeat("K", 1<<20) + "=": "v"}}, []string{"variable name"}},
		{"100 KiB unknown field", map[string]any{"name": "big3", "command": "true", strings.Repeat("f", 100<<10): 1}, []string{"unknown field"}},
		// The schema's own bounds: maxLength 131072 for command, maxItems
		// 4096 for argv, maxProperties 1024 for env and 64 for secret_env.
		{"200 KiB command", map[string]any{"name": "big4", "command": ": " + strings.Repeat("x", 200<<10)}, []string{"command"}},
		{"10,000 argv entries", map[string]any{"name": "big5", "argv": append([]any{"true"}, many(9999, func(int) string { return "a" })...)}, []string{"argv"}},
		{"2,000 env entries", map[string]any{"name": "big6", "command": "true", "env": manyEnv(2000)}, []string{"env"}},
		{"100 secret_env entries", map[string]any{"name": "big7", "command": "true", "secret_env": manySecrets(100)}, []string{"secret_env"}},
		// The kernel refuses any single argument or environment string
		// over 128 KiB (MAX_ARG_STRLEN, execve(2)): such a value can never
		// reach the child, so it should be refused before the run exists.
		{"200 KiB env value", map[string]any{"name": "big8", "command": "true", "env": map[string]any{"V": strings.Repeat("v", 200<<10)}}, []string{"env"}},
		{"200 KiB secret", map[string]any{"name": "big9", "command": "true", "secret_env": map[string]any{"S": strings.Repeat("s", 200<<10)}}, []string{"secret_env"}},
		{"1 MiB+1 stdin write", map[string]any{"name": "pipe", "data": strings.Repeat("d", 1<<20+1)}, []string{"at most 1048576"}},
	}
	for _, c := range cases {
		t.Run(c.what, func(t *testing.T) {
			t.Parallel()
			if testing.Short() && strings.Contains(c.what, "MiB ") {
				t.Skip("-short: megabyte arguments take seconds under -race")
			}
			bad("oversized")
			// A state dir of its own: a case that wrongly starts a run
			// must not disturb the next one's snapshot.
			state := t.TempDir()
			s := connect(t, state)
			tool := "process_start"
			if _, ok := c.args["data"]; ok {
				tool = "process_write"
				s.OK("process_start", map[string]any{"name": "pipe", "command": "cat >/dev/null", "stdin": "pipe"})
				t.Cleanup(func() { s.Call("process_kill", map[string]any{"name": "pipe", "signal": "KILL"}) })
				waitSocket(t, state, "pipe")
			}
			before := snapshot(t, state)
			refused(t, s, tool, c.args, c.want...)
			sameTree(t, before, snapshot(t, state), "state dir")
		})
	}

	// 1.2 MB of argv in 12 arguments: each is under the kernel's 128 KiB
	// per-argument limit and the total under ARG_MAX, so the program can be
	// started; but its record would then exceed what the store reads back
	// (runrecord.MaxRecordBytes, 1 MiB). Either the run works, or it is
	// refused with nothing left behind; never a record nobody can read.
	t.Run("1.2 MB of argv", func(t *testing.T) {
		t.Parallel()
		bad("oversized")
		state := t.TempDir()
		s := connect(t, state)
		before := snapshot(t, state)
		argv := append([]any{"true"}, many(12, func(int) string { return strings.Repeat("y", 100<<10) })...)
		r := s.Call("process_start", map[string]any{"name": "bigargv", "argv": argv})
		if r.IsError {
			t.Logf("refused: %s", cut(r.Text, 300))
			assert.LessOrEqual(t, len(r.Text), maxErrorText)
			sameTree(t, before, snapshot(t, state), "state dir")
			return
		}
		w := s.OK("process_wait", map[string]any{"name": "bigargv", "timeout_ms": 30000})
		assert.Equal(t, "exited", runMap(w)["state"], cut(w.Text, 300))
		run := abtest.RunOf(t, s.OK("process_list", nil), "bigargv")
		assert.Equal(t, "exited", run["state"], "%s", cut(fmt.Sprint(run["reason"]), 300))
	})

	// A pathologically nested argument: a protocol error or a tool error
	// are both fine, a crash is not.
	bad("oversized")
	state, s := withFinishedRun(t)
	before := snapshot(t, state)
	deep := `{"name":"ok","env":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}`
	res, err := callRaw(s, "tail_log", json.RawMessage(deep))
	if err == nil {
		assert.True(t, res.IsError, "deeply nested arguments: %s", cut(resultText(res), 200))
	}
	s.OK("process_list", nil) // still serving
	sameTree(t, before, snapshot(t, state), "state dir")
}

// stamp is a file's content and mtime, to prove a planted symlink's target
// was neither written nor replaced.
type stamp struct {
	data  []byte
	mtime time.Time
}

func stampOf(t *testing.T, path string) stamp {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return stamp{b, fi.ModTime()}
}

func (s stamp) same(t *testing.T, path string) {
	t.Helper()
	now := stampOf(t, path)
	assert.Equal(t, s.data, now.data, "%s was written", path)
	assert.True(t, s.mtime.Equal(now.mtime), "%s was modified (mtime %v -> %v)", path, s.mtime, now.mtime)
}

// replaceWithSymlink swaps path for a symlink to target.
func replaceWithSymlink(t *testing.T, path, target string) {
	t.Helper()
	require.NoError(t, os.RemoveAll(path))
	require.NoError(t, os.Symlink(target, path))
}

// copyTree copies a run or name directory (regular files and dirs only).
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(dst, 0o700)
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(dst, b, 0o600)
		}
		return nil
	}))
}

// noneContains fails if any answer carries marker.
func noneContains(t *testing.T, marker string, rs ...abtest.Result) {
	t.Helper()
	for _, r := range rs {
		assert.NotContains(t, r.Text, marker, "an answer shows the symlink's target: %s", cut(r.Text, 300))
		b, _ := json.Marshal(r.Data)
		assert.NotContains(t, string(b), marker, "an answer shows the symlink's target: %s", cut(string(b), 300))
	}
}

// TestPlantedSymlinksAreNeverFollowed: symlinks planted where agent-box
// expects its own directories and files (a name dir, a run dir, a record, a
// log) are refused or reported, never followed: no answer shows the
// target's content, and nothing outside the state dir is written.
//
// Every target is attractive: a copy of a valid run of the same name, so
// that following the link would "work" and show the marker.
func TestPlantedSymlinksAreNeverFollowed(t *testing.T) {
	t.Parallel()
	const marker = "ELSEWHERE-MARKER-7f3a"
	state := t.TempDir()
	elsewhere := t.TempDir()
	s := connect(t, state)
	for _, n := range []string{"lname", "lrun", "lrec", "lpasswd", "llog", "keep"} {
		s.OK("process_start", map[string]any{"name": n, "command": "echo own output of " + n})
		s.OK("process_wait", map[string]any{"name": n, "timeout_ms": 30000})
		settled(t, state, n)
	}
	// Targets outside the state dir: copies of the real runs, with the
	// marker in their logs.
	for _, n := range []string{"lname", "lrun", "lrec", "llog"} {
		copyTree(t, filepath.Join(state, "runs", n), filepath.Join(elsewhere, n))
	}
	logTarget := filepath.Join(elsewhere, "log.txt")
	require.NoError(t, os.WriteFile(logTarget, []byte(marker+" not a log of agent-box\n"), 0o600))
	// The runs' own output must not count as a leak below.
	for _, n := range []string{"lname", "lrun", "lrec", "llog"} {
		require.NoError(t, filepath.WalkDir(filepath.Join(elsewhere, n), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Name() == "log" {
				err = os.WriteFile(p, []byte(marker+" copied log\n"), 0o600)
			}
			return err
		}))
	}
	passwd := stampOf(t, "/etc/passwd")

	// a. runs/lname -> elsewhere/lname
	replaceWithSymlink(t, filepath.Join(state, "runs", "lname"), filepath.Join(elsewhere, "lname"))
	// b. runs/lrun/<id> -> elsewhere/lrun/<id>
	lrunDir := runDirOf(t, state, "lrun")
	replaceWithSymlink(t, lrunDir, filepath.Join(elsewhere, "lrun", filepath.Base(lrunDir)))
	// c. record.json -> a valid record of the same run, outside
	lrecDir := runDirOf(t, state, "lrec")
	replaceWithSymlink(t, filepath.Join(lrecDir, "record.json"), filepath.Join(elsewhere, "lrec", filepath.Base(lrecDir), "record.json"))
	// d. record.json -> /etc/passwd
	lpwDir := runDirOf(t, state, "lpasswd")
	replaceWithSymlink(t, filepath.Join(lpwDir, "record.json"), "/etc/passwd")
	// e. log -> a file outside
	llogDir := runDirOf(t, state, "llog")
	replaceWithSymlink(t, filepath.Join(llogDir, "log"), logTarget)

	outside := snapshot(t, elsewhere)
	var answers []abtest.Result
	l := s.OK("process_list", map[string]any{"all": true})
	answers = append(answers, l)
	for _, c := range []struct{ name, why string }{
		{"lname", "symlink"}, {"lrun", "symlink"}, {"lrec", "symlink"}, {"lpasswd", "symlink"},
	} {
		bad("symlink")
		run := abtest.RunOf(t, l, c.name)
		assert.Equal(t, "unknown", run["state"], "%s: %v", c.name, run)
		assert.Contains(t, run["reason"], c.why, c.name)
		for _, call := range []struct {
			tool string
			args map[string]any
		}{
			{"tail_log", map[string]any{"name": c.name}},
			{"tail_log", map[string]any{"name": c.name, "encoding": "base64"}},
			{"process_wait", map[string]any{"name": c.name, "timeout_ms": 0}},
			{"process_kill", map[string]any{"name": c.name, "signal": "KILL"}},
			{"process_write", map[string]any{"name": c.name, "data": "x"}},
			{"process_list", map[string]any{"name": c.name}},
		} {
			r := s.Call(call.tool, call.args)
			answers = append(answers, r)
			if !r.IsError && (call.tool == "process_list" || call.tool == "process_wait") {
				// Reporting the run unknown, and why, is as good as
				// refusing.
				var run map[string]any
				if call.tool == "process_wait" {
					run = runMap(r)
				} else {
					run = abtest.RunOf(t, r, c.name)
				}
				assert.Equal(t, "unknown", run["state"], "%s of %s", call.tool, c.name)
				assert.Contains(t, run["reason"], "symlink", "%s of %s", call.tool, c.name)
				continue
			}
			assert.True(t, r.IsError, "%s of %s must be refused: %s", call.tool, c.name, cut(r.Text, 300))
			assert.Contains(t, r.Text, "symlink", "%s of %s: the refusal says why", call.tool, c.name)
		}
	}
	// A name dir that is a symlink cannot be started into either (its
	// lock file would be created outside).
	bad("symlink")
	r := s.Call("process_start", map[string]any{"name": "lname", "command": "echo x"})
	answers = append(answers, r)
	assert.True(t, r.IsError, "process_start under a symlinked name dir: %s", cut(r.Text, 300))
	assert.Contains(t, r.Text, "symlink")

	// The log: the run itself reads fine, its log is refused.
	bad("symlink")
	run := abtest.RunOf(t, l, "llog")
	assert.Equal(t, "exited", run["state"])
	for _, enc := range []string{"text", "base64"} {
		r := s.Call("tail_log", map[string]any{"name": "llog", "encoding": enc})
		answers = append(answers, r)
		assert.True(t, r.IsError, "tail_log through a symlinked log: %s", cut(r.Text, 300))
		assert.Contains(t, r.Text, "is a symlink, which is never followed", "the refusal says why")
	}
	answers = append(answers, s.OK("process_wait", map[string]any{"name": "llog", "timeout_ms": 0}))
	noneContains(t, marker, answers...)

	// Removing the planted runs removes the links, never their targets.
	bad("symlink")
	rm := s.Call("process_remove", map[string]any{"all_finished": true})
	t.Logf("process_remove all_finished: error=%v %s", rm.IsError, cut(rm.Text, 500))
	noneContains(t, marker, rm)
	for _, n := range []string{"lrun", "lrec", "lpasswd", "llog"} {
		s.Call("process_remove", map[string]any{"name": n})
	}
	sameTree(t, outside, snapshot(t, elsewhere), "outside the state dir")
	passwd.same(t, "/etc/passwd")
	// The run with nothing planted is still readable, or was removed as
	// finished; either way it was not harmed by its neighbours.
	if l := s.Call("process_list", map[string]any{"name": "keep"}); !l.IsError {
		assert.Equal(t, "exited", abtest.RunOf(t, l, "keep")["state"])
	}
	// And all_finished must not give up on every other run because of one
	// planted link.
	assert.False(t, rm.IsError, "process_remove all_finished fails as a whole over one planted symlink: %s", cut(rm.Text, 300))
}

// TestPlantedSymlinkInALiveRun: the log of a running run replaced by a
// symlink while the supervisor writes it: the supervisor keeps writing the
// file it opened (never the target), tail_log refuses the link, and
// process_list does not report the target's size as the log's.
func TestPlantedSymlinkInALiveRun(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	elsewhere := t.TempDir()
	s := connect(t, state)
	target := filepath.Join(elsewhere, "target")
	require.NoError(t, os.WriteFile(target, bytes.Repeat([]byte("T"), 12345), 0o600))
	before := stampOf(t, target)
	fifo := filepath.Join(elsewhere, "go")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	// Prints a line each time the test releases it. The child holds the
	// FIFO open read-write for its whole life (O_RDWR never waits for a
	// peer, fifo(7)): a child that reopened it per line could close its end
	// between the test's open and write, and the write would fail with
	// EPIPE; and reads never see EOF when the test's writer closes.
	s.OK("process_start", map[string]any{"name": "live", "command": "exec 3<>" + fifo + "; while read x <&3; do echo tick; done"})
	t.Cleanup(func() { s.Call("process_kill", map[string]any{"name": "live", "signal": "KILL"}) })
	dir := runDirOf(t, state, "live")
	tick := func() { release(t, fifo) }
	tick()
	abtest.WaitFor(t, "first tick in the log", 10*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "log"))
		return len(b) > 0
	})
	bad("symlink")
	replaceWithSymlink(t, filepath.Join(dir, "log"), target)
	for range 3 {
		tick()
	}
	r := s.Call("tail_log", map[string]any{"name": "live"})
	assert.True(t, r.IsError, "tail_log through a symlinked log: %s", cut(r.Text, 200))
	l := abtest.RunOf(t, s.OK("process_list", nil), "live")
	assert.Equal(t, "running", l["state"])
	assert.NotEqual(t, int64(12345), abtest.Num(l["log_bytes"]), "process_list reports the size of the symlink's target as the log's")
	s.OK("process_kill", map[string]any{"name": "live", "signal": "KILL"})
	before.same(t, target)
}

// TestPlantedStdinSocketSymlink: process_write dials the run's stdin.sock;
// replaced by a symlink to some other socket, it must not connect there
// (nor send the data).
func TestPlantedStdinSocketSymlink(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	s := connect(t, state)
	s.OK("process_start", map[string]any{"name": "in", "command": "cat", "stdin": "pipe"})
	t.Cleanup(func() { s.Call("process_kill", map[string]any{"name": "in", "signal": "KILL"}) })
	waitSocket(t, state, "in")
	sock := filepath.Join(runDirOf(t, state, "in"), "stdin.sock")

	// Someone else's socket, short path so that it binds anywhere.
	other := filepath.Join(os.TempDir(), fmt.Sprintf("abf-%d.sock", os.Getpid()))
	os.Remove(other)
	ln, err := net.Listen("unix", other)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close(); os.Remove(other) })
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		b := make([]byte, 4096)
		n, _ := c.Read(b)
		got <- string(b[:n])
	}()
	bad("symlink")
	replaceWithSymlink(t, sock, other)
	r := s.Call("process_write", map[string]any{"name": "in", "data": "to the wrong socket\n"})
	select {
	case msg := <-got:
		t.Errorf("process_write followed the planted stdin.sock symlink and sent %q to another socket", cut(msg, 200))
	case <-time.After(200 * time.Millisecond):
	}
	assert.True(t, r.IsError, "process_write through a symlinked stdin.sock: %s", cut(r.Text, 200))
}
