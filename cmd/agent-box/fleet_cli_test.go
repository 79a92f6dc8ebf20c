//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/cli"
)

// endedRun starts a run that prints what and ends, on the box of state,
// and waits for its end.
func endedRun(t *testing.T, state, name, what string) {
	t.Helper()
	_, stderr, code := agentBox(t, state, "start", name, "--", "sh", "-c", "echo "+what)
	require.Equal(t, 0, code, stderr)
	_, stderr, code = agentBox(t, state, "wait", name)
	require.Equal(t, 0, code, stderr)
}

// twoBoxes are two boxes, each with a run that has ended: j1 on the first,
// j2 on the second.
func twoBoxes(t *testing.T) (s1, s2 string) {
	t.Helper()
	s1, s2 = t.TempDir(), t.TempDir()
	for _, s := range []string{s1, s2} {
		// As agent-box would make it: no warning to tighten it on stderr.
		require.NoError(t, os.Chmod(s, 0o700))
	}
	endedRun(t, s1, "j1", "from-a")
	endedRun(t, s2, "j2", "from-b")
	return s1, s2
}

// ps over several boxes lists the runs of every box, each under its own
// box; a box that does not answer is said on stderr, one line, and the
// others are listed all the same; only when none answers does ps fail.
func TestPsAcrossBoxes(t *testing.T) {
	t.Parallel()
	s1, s2 := twoBoxes(t)
	a, b := "a="+boxExec(s1), "b="+boxExec(s2)

	out, stderr, code := agentBoxArgs(t, "ps", "--exec", a, "--exec", b)
	require.Equal(t, 0, code, stderr)
	assert.Empty(t, stderr)
	assert.Regexp(t, `(?m)^a\s+j1\s`, out)
	assert.Regexp(t, `(?m)^b\s+j2\s`, out)

	out, stderr, code = agentBoxArgs(t, "ps", "--exec", a, "--exec", "c=false", "--exec", b)
	assert.Equal(t, 0, code, "a box answered")
	assert.Regexp(t, `(?m)^a\s+j1\s`, out)
	assert.Regexp(t, `(?m)^b\s+j2\s`, out)
	assert.Regexp(t, `^agent-box: box c unreachable: .*false.*\n$`, stderr)

	out, stderr, code = agentBoxArgs(t, "ps", "--json", "--exec", a, "--exec", b)
	require.Equal(t, 0, code, stderr)
	var list struct {
		Runs []map[string]any `json:"runs"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	boxOf := map[string]any{}
	for _, r := range list.Runs {
		boxOf[r["name"].(string)] = r["box"]
	}
	assert.Equal(t, map[string]any{"j1": "a", "j2": "b"}, boxOf)

	out, stderr, code = agentBoxArgs(t, "ps", "--exec", "c=false", "--exec", "d=false")
	assert.Equal(t, cli.ExitError, code, "no box answered")
	assert.Equal(t, 2, strings.Count(stderr, "\n"), stderr)
	assert.Contains(t, stderr, "agent-box: box c unreachable: ")
	assert.Contains(t, stderr, "agent-box: box d unreachable: ")
	assert.NotContains(t, out, "j1")
}

// The other commands go through the fleet too: logs NAME reads the one
// box with a run of that name; NAME@BOX names the box.
func TestCLICommandsAcrossBoxes(t *testing.T) {
	t.Parallel()
	s1, s2 := twoBoxes(t)
	a, b := "a="+boxExec(s1), "b="+boxExec(s2)

	out, stderr, code := agentBoxArgs(t, "--exec", a, "--exec", b, "logs", "j2")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "from-b\n", out)
	out, stderr, code = agentBoxArgs(t, "logs", "j1", "--exec", a, "--exec", b)
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "from-a\n", out)

	// A box without a run of the name is no box away.
	out, stderr, code = agentBoxArgs(t, "--exec", a, "--exec", b, "ps", "j1")
	require.Equal(t, 0, code, stderr)
	assert.Empty(t, stderr)
	assert.Regexp(t, `(?m)^a\s+j1\s`, out)
	assert.NotContains(t, out, "j2")
	_, stderr, code = agentBoxArgs(t, "--exec", a, "--exec", b, "wait", "j2")
	assert.Equal(t, 0, code, stderr)

	// NAME@BOX: a run on that box. start and run need it; elsewhere it
	// says which box's run of a name on several is meant.
	_, stderr, code = agentBoxArgs(t, "--exec", a, "--exec", b, "start", "y", "--", "true")
	assert.Equal(t, cli.ExitUsage, code)
	assert.Contains(t, stderr, `NAME@BOX: say which of the boxes starts "y" (BOX: a, b)`)
	out, stderr, code = agentBoxArgs(t, "--exec", a, "--exec", b, "run", "y@b", "--", "sh", "-c", "echo on-b; exit 7")
	assert.Equal(t, 7, code, stderr)
	assert.Equal(t, "on-b\n", out)
	assert.Equal(t, "y", onlyRun(t, s2, "y")["name"], "run on b")
	_, stderr, code = agentBoxArgs(t, "--exec", a, "--exec", b, "start", "y@a", "--", "sh", "-c", "echo on-a")
	require.Equal(t, 0, code, stderr)
	_, stderr, code = agentBox(t, s1, "wait", "y")
	require.Equal(t, 0, code, stderr)
	_, stderr, code = agentBoxArgs(t, "--exec", a, "--exec", b, "logs", "y")
	assert.Equal(t, cli.ExitUsage, code)
	assert.Contains(t, stderr, `runs named "y" are on boxes a and b`)
	out, stderr, code = agentBoxArgs(t, "--exec", a, "--exec", b, "logs", "y@a")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "on-a\n", out)
	out, stderr, code = agentBoxArgs(t, "--exec", a, "--exec", b, "ps", "y@b")
	require.Equal(t, 0, code, stderr)
	assert.Regexp(t, `(?m)^b\s+y\s+\S+\s+exited\(7\)`, out)
	assert.NotRegexp(t, `(?m)^a\s`, out)

	// A boxes file, in its order, with boxes of the command line after.
	file := filepath.Join(t.TempDir(), "boxes.toml")
	require.NoError(t, os.WriteFile(file, []byte("[boxes.b]\nexec = '"+boxExec(s2)+"'\n"), 0o600))
	out, stderr, code = agentBoxArgs(t, "--boxes-file", file, "--exec", a, "ps")
	require.Equal(t, 0, code, stderr)
	assert.Regexp(t, `(?m)^a\s+j1\s`, out)
	assert.Regexp(t, `(?m)^b\s+j2\s`, out)

	// One box named: as one box always was, under its name.
	out, stderr, code = agentBoxArgs(t, "--exec", a, "ps")
	require.Equal(t, 0, code, stderr)
	assert.Regexp(t, `(?m)^a\s+j1\s`, out)
}

// Among several boxes, one without a name that cannot be its own is
// refused, with how to name it: by the CLI, and by connect.
func TestSeveralBoxesNeedNames(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"ps", "--exec", "a=true", "--box", "me@host"},
		{"connect", "--exec", "a=true", "me@host"},
	} {
		_, stderr, code := agentBoxArgs(t, args...)
		assert.Equal(t, cli.ExitUsage, code, "%q", args)
		assert.Contains(t, stderr, `"me@host": with several boxes, each needs a name: write NAME=me@host`, "%q", args)
	}
	for _, args := range [][]string{
		{"ps", "--exec", "a=true", "--exec", "true"},
		{"connect", "--exec", "true", "b=host"},
	} {
		_, stderr, code := agentBoxArgs(t, args...)
		assert.Equal(t, cli.ExitUsage, code, "%q", args)
		assert.Contains(t, stderr, `--exec "true": with several boxes, each needs a name: --exec NAME='COMMAND'`, "%q", args)
	}
	_, stderr, code := agentBoxArgs(t, "connect", "--boxes-file", filepath.Join(t.TempDir(), "none.toml"))
	assert.Equal(t, cli.ExitUsage, code)
	assert.Contains(t, stderr, "none.toml")
}

// connect over several boxes serves them as a fleet, each box under the
// name it was given: process_list's runs carry it.
func TestConnectSeveralBoxes(t *testing.T) {
	t.Parallel()
	s1, s2 := twoBoxes(t)
	cmd := exec.Command(binary, "connect", "--exec", "a="+boxExec(s1), "b="+"x", "--exec", "c="+boxExec(s2))
	// b over ssh: a destination that never answers, so its failure is
	// the dial's, not a box's.
	cmd.Env = append(os.Environ(), "PATH=/nonexistent")
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan map[string]any, 16)
	go func() {
		defer close(lines)
		r := bufio.NewReaderSize(stdout, 4<<20)
		for {
			line, err := r.ReadBytes('\n')
			var m map[string]any
			if json.Unmarshal(line, &m) == nil {
				lines <- m
			}
			if err != nil {
				return
			}
		}
	}()
	answer := func(id float64) map[string]any {
		t.Helper()
		for {
			select {
			case m, ok := <-lines:
				require.True(t, ok, "connect closed its stdout")
				if m["id"] == id {
					return m
				}
			case <-time.After(time.Minute):
				t.Fatal("no answer from connect for a minute")
			}
		}
	}
	send := func(line string) {
		_, err := in.Write([]byte(line + "\n"))
		require.NoError(t, err)
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	answer(1)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"process_list","arguments":{}}}`)
	res := answer(2)["result"].(map[string]any)
	sc, _ := json.Marshal(res["structuredContent"])
	var list struct {
		Runs []struct {
			Name string `json:"name"`
			Box  string `json:"box"`
		} `json:"runs"`
		Unreachable []struct {
			Box string `json:"box"`
		} `json:"unreachable"`
	}
	require.NoError(t, json.Unmarshal(sc, &list), string(sc))
	boxOf := map[string]string{}
	for _, r := range list.Runs {
		boxOf[r.Name] = r.Box
	}
	assert.Equal(t, map[string]string{"j1": "a", "j2": "c"}, boxOf)
	require.Len(t, list.Unreachable, 1, string(sc))
	assert.Equal(t, "b", list.Unreachable[0].Box)
}

// watch calls a box by the name it was given, and takes a boxes file.
func TestWatchNamedBoxes(t *testing.T) {
	t.Parallel()
	state, other := t.TempDir(), t.TempDir()
	cursor := filepath.Join(t.TempDir(), "cursor.json")
	file := filepath.Join(t.TempDir(), "boxes.toml")
	require.NoError(t, os.WriteFile(file, []byte("[boxes.a]\nexec = '"+boxExec(state)+"'\n"), 0o600))
	gate := gatedRun(t, state, "job")
	args := []string{"--boxes-file", file, "--exec", "b=" + boxExec(other), "--cursor-file", cursor, "--no-wait"}

	code, stdout, stderr := watchOnce(t, args...)
	require.Equal(t, 0, code, stderr)
	assert.Empty(t, stdout+stderr)
	openGate(t, state, "job", gate)
	code, _, stderr = watchOnce(t, args...)
	assert.Equal(t, 2, code, stderr)
	assert.Regexp(t, `^agent-box: run job \(\S+\) on a ended: exit code 3 `, stderr)
	assert.NotContains(t, stderr, regexp.QuoteMeta(state), "the box by its name, not its command")
}
