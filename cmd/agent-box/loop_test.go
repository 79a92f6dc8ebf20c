//go:build linux

package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
)

func comm(t *testing.T, pid int64) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.FormatInt(pid, 10) + "/comm")
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

// A lone command is the run's leader, so its pid and exit status are the
// program's: dash does not exec it by itself (issue 10).
func TestLoneCommandIsTheProgram(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())

	r := s.OK("process_start", map[string]any{"name": "sleeper", "command": "sleep 30"})
	// The shell may not have exec'd sleep yet when process_start answers;
	// the pid must become sleep's, where a wrong one would stay the shell's.
	pid := abtest.Num(r.Run()["pid"])
	abtest.WaitFor(t, "the reported pid to be sleep's", 10*time.Second, func() bool { return comm(t, pid) == "sleep" })
	assert.Equal(t, "program", r.Run()["status_of"])

	r = s.OK("process_start", map[string]any{"name": "compound", "command": "sleep 30; true"})
	assert.Equal(t, "sh", comm(t, abtest.Num(r.Run()["pid"])))
	assert.Equal(t, "shell", r.Run()["status_of"])
	assert.Contains(t, r.Text, "status_of=shell")
	for _, name := range []string{"sleeper", "compound"} {
		s.OK("process_kill", map[string]any{"name": name, "signal": "KILL"})
	}

	if _, err := exec.LookPath("python3"); err != nil {
		abtest.Missing(t, "python3 is not installed")
	}
	// http.server catches KeyboardInterrupt and exits 0: the run must say
	// exit code 0, not the shell's "killed by SIGINT".
	s.OK("process_start", map[string]any{"name": "web", "command": "python3 -u -m http.server 0 --bind 127.0.0.1"})
	var port string
	abtest.WaitFor(t, "the server to say its port", 20*time.Second, func() bool {
		m := regexp.MustCompile(`Serving HTTP on \S+ port (\d+)`).FindStringSubmatch(abtest.Str(s.OK("tail_log", map[string]any{"name": "web", "wait_ms": 1000}).Data["content"]))
		if m != nil {
			port = m[1]
		}
		return m != nil
	})
	// It prints that line before it enters the try that catches
	// KeyboardInterrupt; an answer comes only from inside it.
	abtest.WaitFor(t, "the server to answer", 20*time.Second, func() bool {
		resp, err := http.Get("http://127.0.0.1:" + port + "/")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	s.OK("process_kill", map[string]any{"name": "web", "signal": "INT"})
	w := s.OK("process_wait", map[string]any{"name": "web", "timeout_ms": 20000})
	run := w.Data["run"].(map[string]any)
	assert.Equal(t, "exited", run["state"], w.Text)
	assert.EqualValues(t, 0, run["exit_code"], w.Text)
	assert.Nil(t, run["signal"], w.Text)
}

func runOf(t *testing.T, v any) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	require.True(t, ok, "not a run: %v", v)
	return m
}

// A wait that no progress notification keeps alive is cut to a bound
// below the clients' 60 s request timeout, and says so; one with a token
// waits as long as asked and reports progress (issue 10). The bounds are
// settable, so this runs in seconds; TestLongWaits runs the real ones.
func TestWaitFitsTheClientsTimeout(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir(), "AGENT_BOX_WAIT_UNWATCHED_MS=1500", "AGENT_BOX_PROGRESS_MS=200")
	s.OK("process_start", map[string]any{"name": "long", "argv": []any{"sleep", "60"}})

	began := time.Now()
	w := s.OK("process_wait", map[string]any{"name": "long", "timeout_ms": 60000})
	took := time.Since(began)
	assert.Less(t, took, 10*time.Second, "cut to the unwatched bound")
	assert.Equal(t, true, w.Data["wait_timed_out"], w.Text)
	assert.Equal(t, true, w.Data["wait_shortened"], w.Text)
	assert.Equal(t, "running", runOf(t, w.Data["run"])["state"])
	assert.Contains(t, abtest.Str(w.Data["hint"]), "progress token")
	assert.Contains(t, w.Text, "call process_wait again")
	assert.Empty(t, s.Progress(""), "no token, no notifications")

	// Asked for less than the bound: not shortened.
	w = s.OK("process_wait", map[string]any{"name": "long", "timeout_ms": 300})
	assert.Equal(t, true, w.Data["wait_timed_out"])
	assert.Nil(t, w.Data["wait_shortened"])

	began = time.Now()
	w = s.CallWithProgress("process_wait", map[string]any{"name": "long", "timeout_ms": 3000}, "tok")
	require.False(t, w.IsError, w.Text)
	assert.GreaterOrEqual(t, time.Since(began), 3*time.Second, "with a token the asked timeout is honoured past the unwatched bound")
	assert.Equal(t, true, w.Data["wait_timed_out"])
	assert.Nil(t, w.Data["wait_shortened"])
	got := s.Progress("tok")
	assert.GreaterOrEqual(t, len(got), 5, "progress every 200 ms for 3 s")
	for i, p := range got {
		assert.Contains(t, p.Message, "long still running")
		if i > 0 {
			assert.Greater(t, p.Progress, got[i-1].Progress, "progress must increase")
		}
	}
	s.OK("process_kill", map[string]any{"name": "long", "signal": "KILL"})

	// The run's own timeout and the wait's are told apart.
	s.OK("process_start", map[string]any{"name": "capped", "argv": []any{"sleep", "30"}, "timeout_s": 1})
	w = s.OK("process_wait", map[string]any{"name": "capped", "timeout_ms": 20000})
	assert.Equal(t, false, w.Data["wait_timed_out"])
	assert.Equal(t, true, runOf(t, w.Data["run"])["timed_out"])
	assert.Contains(t, w.Text, "killed by SIGTERM at its timeout_s")
	assert.NotContains(t, w.Text, "still running")
}

// names: the first of several runs to end answers; the others are listed
// with their states.
func TestWaitForTheFirstOfSeveral(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	s.OK("process_start", map[string]any{"name": "slow", "argv": []any{"sleep", "30"}})
	s.OK("process_start", map[string]any{"name": "quick", "command": "sleep 0.5; exit 3"})
	w := s.OK("process_wait", map[string]any{"names": []any{"slow", "quick"}, "timeout_ms": 20000})
	run := runOf(t, w.Data["run"])
	assert.Equal(t, "quick", run["name"], w.Text)
	assert.EqualValues(t, 3, run["exit_code"])
	assert.Equal(t, false, w.Data["wait_timed_out"])
	others := w.Data["others"].([]any)
	require.Len(t, others, 1)
	assert.Equal(t, "slow", runOf(t, others[0])["name"])
	assert.Equal(t, "running", runOf(t, others[0])["state"])
	assert.Equal(t, []any{"slow"}, w.Data["running"], "named, so that a wait again drops quick")
	assert.Contains(t, w.Text, "still running: slow")

	// Nothing ends in time: wait_timed_out, every run reported.
	s.OK("process_start", map[string]any{"name": "slow2", "argv": []any{"sleep", "30"}})
	w = s.OK("process_wait", map[string]any{"names": []any{"slow", "slow2"}, "timeout_ms": 300})
	assert.Equal(t, true, w.Data["wait_timed_out"])
	assert.Len(t, w.Data["others"], 1)

	for _, bad := range []map[string]any{
		{"names": []any{"slow", "slow"}},
		{"names": []any{"slow", "quick"}, "run_id": "x"},
		{"names": []any{"slow", "quick"}, "since_offset": 3},
		{"name": "slow", "names": []any{"quick"}},
		{"names": []any{"slow", "nosuch"}},
	} {
		r := s.Call("process_wait", bad)
		assert.True(t, r.IsError, "%v: %s", bad, r.Text)
	}
	for _, name := range []string{"slow", "slow2"} {
		s.OK("process_kill", map[string]any{"name": name, "signal": "KILL"})
	}
}

// names with all: true waits for every run and answers each end, with its
// output; on the bound, those ended and those still running (issue 33).
func TestWaitForAllOfSeveral(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	s.OK("process_start", map[string]any{"name": "a", "command": "echo from-a; exit 1"})
	s.OK("process_start", map[string]any{"name": "b", "command": "sleep 0.3; echo from-b; exit 2"})
	w := s.OK("process_wait", map[string]any{"names": []any{"a", "b"}, "all": true, "timeout_ms": 20000})
	assert.Equal(t, false, w.Data["wait_timed_out"], w.Text)
	assert.Equal(t, "a", w.Run()["name"], w.Text)
	assert.Equal(t, "from-a\n", w.Data["output_tail"])
	ends := w.Data["ends"].([]any)
	require.Len(t, ends, 1, w.Text)
	end := ends[0].(map[string]any)
	assert.Equal(t, "b", runOf(t, end["run"])["name"])
	assert.EqualValues(t, 2, runOf(t, end["run"])["exit_code"])
	assert.Equal(t, "from-b\n", end["output_tail"])
	assert.Nil(t, w.Data["running"])
	assert.Contains(t, w.Text, "from-a")
	assert.Contains(t, w.Text, "from-b")

	s.OK("process_start", map[string]any{"name": "long", "argv": []any{"sleep", "30"}})
	t.Cleanup(func() { s.Call("process_kill", map[string]any{"name": "long", "signal": "KILL"}) })
	w = s.OK("process_wait", map[string]any{"names": []any{"long", "b"}, "all": true, "timeout_ms": 300})
	assert.Equal(t, true, w.Data["wait_timed_out"], w.Text)
	assert.Equal(t, "b", w.Run()["name"], "the one that ended: %s", w.Text)
	assert.Equal(t, []any{"long"}, w.Data["running"])
	assert.Contains(t, w.Text, "still running: long")
}

// process_start with wait_ms answers a short command's end in the same
// call, as process_wait would: its status and output (issue 33: "echo hi"
// took two calls, a command not found a second one to say so).
func TestStartWaitsForShortCommands(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	r := s.OK("process_start", map[string]any{"name": "hi", "command": "echo hi", "wait_ms": 20000})
	assert.Equal(t, "exited", r.Run()["state"], r.Text)
	assert.EqualValues(t, 0, r.Run()["exit_code"])
	assert.Equal(t, "hi\n", r.Data["output_tail"])
	assert.Equal(t, false, r.Data["wait_timed_out"])
	assert.NotNil(t, r.Data["duration_ms"])
	assert.Contains(t, r.Text, "hi\n")

	r = s.OK("process_start", map[string]any{"name": "nosuch", "command": "no-such-binary-33", "wait_ms": 20000})
	assert.EqualValues(t, 127, r.Run()["exit_code"], r.Text)
	assert.Contains(t, r.Text, "not found")

	// Still running at wait_ms: said so, and the run goes on.
	r = s.OK("process_start", map[string]any{"name": "long", "command": "echo started; exec sleep 30", "wait_ms": 300})
	t.Cleanup(func() { s.Call("process_kill", map[string]any{"name": "long", "signal": "KILL"}) })
	assert.Equal(t, "running", r.Run()["state"], r.Text)
	assert.Equal(t, true, r.Data["wait_timed_out"])
	assert.Contains(t, r.Text, "still running")

	// A ready probe returns once the run is ready, wait_ms once it ends:
	// not both.
	r = s.Call("process_start", map[string]any{"name": "both", "command": "true", "wait_ms": 1000, "ready": map[string]any{"log": "x"}})
	require.True(t, r.IsError, r.Text)
	assert.Contains(t, r.Text, "not both")

	// Without wait_ms a running run's answer has no end.
	r = s.OK("process_start", map[string]any{"name": "idle", "argv": []any{"sleep", "30"}})
	t.Cleanup(func() { s.Call("process_kill", map[string]any{"name": "idle", "signal": "KILL"}) })
	assert.NotContains(t, r.Data, "output_tail")
	assert.NotContains(t, r.Data, "wait_timed_out")
}

// since_offset: the tail starts no earlier than what the caller has read,
// and the hint names that offset, not 0.
func TestWaitResumesAtSinceOffset(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	s.OK("process_start", map[string]any{"name": "count", "command": "seq 1 100"})
	w := s.OK("process_wait", map[string]any{"name": "count", "timeout_ms": 20000})
	assert.Equal(t, false, w.Data["output_tail_whole"])
	assert.Contains(t, w.Text, "tail_log from offset 0 for the rest")

	// The reader is at line 60: the last 20 lines start after it.
	at := int64(len("1\n2\n3\n4\n5\n6\n7\n8\n9\n")) + 51*3 // bytes of lines 1..60
	w = s.OK("process_wait", map[string]any{"name": "count", "since_offset": at})
	assert.Contains(t, w.Text, fmt.Sprintf("tail_log from offset %d for the rest", at), w.Text)

	// The reader is at line 95: the tail is what follows, whole.
	at = int64(len("1\n2\n3\n4\n5\n6\n7\n8\n9\n")) + 86*3
	w = s.OK("process_wait", map[string]any{"name": "count", "since_offset": at})
	assert.Equal(t, "96\n97\n98\n99\n100\n", w.Data["output_tail"])
	assert.EqualValues(t, at, w.Data["output_tail_offset"])
	assert.Equal(t, true, w.Data["output_tail_whole"])
	assert.NotContains(t, w.Text, "for the rest")
}

// A framed run's stderr tail has its own offset: the frame holding its
// first line, not the interleaved tail's (which stdout written after it
// moves later).
func TestWaitStderrTailOffset(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	s := connect(t, state)
	s.OK("process_start", map[string]any{"name": "mixed", "capture_mode": "framed",
		"command": abtest.InOrder(state, "echo first-error >&2", "seq 1 2000", "echo last-error >&2")})
	w := s.OK("process_wait", map[string]any{"name": "mixed", "timeout_ms": 20000})
	require.Equal(t, "first-error\nlast-error\n", w.Data["stderr_tail"], w.Text)
	off := abtest.Num(w.Data["stderr_tail_offset"])
	assert.Less(t, off, abtest.Num(w.Data["output_tail_offset"]), "stderr's tail begins before the interleaved one")
	r := s.OK("tail_log", map[string]any{"name": "mixed", "offset": off, "max_bytes": 64})
	assert.True(t, strings.HasPrefix(abtest.Chunks(r.Data, "stderr"), "first-error\n"), "tail_log from stderr_tail_offset reads the tail's first line: %v", r.Data["chunks"])
	assert.Contains(t, w.Text, fmt.Sprintf("[last lines of stderr, from log offset %d of", off))
}

// A leader that exits while processes of the run live on: the reply says
// so in one line, and survivors=true waits for them.
func TestWaitForSurvivors(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	s.OK("process_start", map[string]any{"name": "daemon", "command": "sleep 2 >/dev/null 2>&1 & echo started"})
	w := s.OK("process_wait", map[string]any{"name": "daemon", "timeout_ms": 20000})
	run := runOf(t, w.Data["run"])
	require.Equal(t, "exited", run["state"], w.Text)
	require.Len(t, run["survivors"], 1, w.Text)
	assert.Contains(t, abtest.Str(w.Data["hint"]), "survivors=true")
	assert.Equal(t, 1, strings.Count(w.Text, "survivors=true"), "said once: %s", w.Text)

	w = s.OK("process_wait", map[string]any{"name": "daemon", "survivors": true, "timeout_ms": 20000})
	assert.Equal(t, false, w.Data["wait_timed_out"], w.Text)
	assert.Empty(t, runOf(t, w.Data["run"])["survivors"], w.Text)
	assert.Nil(t, w.Data["hint"])
}

func names(t *testing.T, r abtest.Result) []string {
	t.Helper()
	var out []string
	for _, v := range r.Data["runs"].([]any) {
		out = append(out, abtest.Str(runOf(t, v)["name"]))
	}
	return out
}

// The exit inbox: a cursor from any answer lists, with changed_since,
// exactly the runs that started or ended after it, also those that ended
// while no agent-box was alive, each once.
func TestChangedSinceAcrossReconnects(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	s1 := connect(t, state)
	// brief ends once the gate file exists, after the cursor c0 is taken:
	// however slow the machine, its end is news to c0.
	gate := filepath.Join(t.TempDir(), "gate")
	s1.OK("process_start", map[string]any{"name": "brief", "command": `while [ ! -e '` + gate + `' ]; do sleep 0.05; done`})
	s1.OK("process_start", map[string]any{"name": "server", "argv": []any{"sleep", "30"}})
	s1.OK("process_start", map[string]any{"name": "done-before", "argv": []any{"true"}})
	s1.OK("process_wait", map[string]any{"name": "done-before"})
	c0 := abtest.Str(s1.OK("process_list", nil).Data["cursor"])
	require.NotEmpty(t, c0)
	s1.Close()
	require.NoError(t, os.WriteFile(gate, nil, 0o600))

	// brief ends while no server is alive: its supervisor records it.
	abtest.WaitFor(t, "brief's exit to be recorded", 20*time.Second, func() bool {
		b, _ := os.ReadFile(findRecord(t, state, "brief"))
		return strings.Contains(string(b), `"exit"`)
	})

	s2 := connect(t, state)
	r := s2.OK("process_list", map[string]any{"changed_since": c0})
	assert.Equal(t, []string{"brief"}, names(t, r), r.Text)
	assert.Equal(t, "exited", runOf(t, r.Data["runs"].([]any)[0])["state"])
	assert.Contains(t, r.Text, "started or ended since that cursor")
	c1 := abtest.Str(r.Data["cursor"])

	s2.OK("process_start", map[string]any{"name": "later", "argv": []any{"true"}})
	s2.OK("process_wait", map[string]any{"name": "later"})
	s2.OK("process_kill", map[string]any{"name": "server", "signal": "KILL"})
	s2.OK("process_wait", map[string]any{"name": "server"})
	r = s2.OK("process_list", map[string]any{"changed_since": c1})
	assert.Equal(t, []string{"later", "server"}, names(t, r), "newest first, brief not again: %s", r.Text)
	c2 := abtest.Str(r.Data["cursor"])

	r = s2.OK("process_list", map[string]any{"changed_since": c2})
	assert.Empty(t, r.Data["runs"], r.Text)
	assert.Contains(t, r.Text, "no run started or ended since that cursor")

	// A run that starts is news once, and its end once more.
	s2.OK("process_start", map[string]any{"name": "slow", "argv": []any{"sleep", "30"}})
	r = s2.OK("process_list", map[string]any{"changed_since": abtest.Str(r.Data["cursor"])})
	assert.Equal(t, []string{"slow"}, names(t, r))
	c3 := abtest.Str(r.Data["cursor"])
	r = s2.OK("process_list", map[string]any{"changed_since": c3})
	assert.Empty(t, r.Data["runs"], "still running: no news")
	s2.OK("process_kill", map[string]any{"name": "slow", "signal": "KILL"})
	s2.OK("process_wait", map[string]any{"name": "slow"})
	r = s2.OK("process_list", map[string]any{"changed_since": abtest.Str(r.Data["cursor"])})
	assert.Equal(t, []string{"slow"}, names(t, r))

	for _, bad := range []map[string]any{
		{"changed_since": "nonsense"},
		{"changed_since": "c1.AAAA"},
		{"changed_since": c0, "name": "slow"},
		{"changed_since": c0, "state": "running"},
	} {
		r := s2.Call("process_list", bad)
		assert.True(t, r.IsError, "%v: %s", bad, r.Text)
	}
}

// findRecord is the record.json of the newest run of name.
func findRecord(t *testing.T, state, name string) string {
	t.Helper()
	ents, err := os.ReadDir(state + "/runs/" + name)
	require.NoError(t, err)
	last := ""
	for _, e := range ents {
		if e.IsDir() && e.Name() > last {
			last = e.Name()
		}
	}
	return state + "/runs/" + name + "/" + last + "/record.json"
}

// state filters the listing; runs come newest first.
func TestListByState(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	s.OK("process_start", map[string]any{"name": "a", "argv": []any{"true"}})
	s.OK("process_wait", map[string]any{"name": "a"})
	s.OK("process_start", map[string]any{"name": "b", "argv": []any{"sleep", "30"}})
	s.OK("process_start", map[string]any{"name": "c", "argv": []any{"false"}})
	s.OK("process_wait", map[string]any{"name": "c"})
	assert.Equal(t, []string{"c", "b", "a"}, names(t, s.OK("process_list", nil)))
	assert.Equal(t, []string{"b"}, names(t, s.OK("process_list", map[string]any{"state": "running"})))
	r := s.OK("process_list", map[string]any{"state": "exited", "limit": 1})
	assert.Equal(t, []string{"c"}, names(t, r))
	assert.EqualValues(t, 2, r.Data["total"])
	r = s.OK("process_list", map[string]any{"state": "exited", "before": r.Data["next_before"]})
	assert.Equal(t, []string{"a"}, names(t, r))
	assert.True(t, s.Call("process_list", map[string]any{"state": "dead"}).IsError)
	s.OK("process_kill", map[string]any{"name": "b", "signal": "KILL"})
}

// A relative cwd is taken from the home directory, not from wherever ssh
// started agent-box; ~ expands.
func TestRelativeCwdIsFromHome(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	require.NoError(t, os.MkdirAll(home+"/src/app", 0o755))
	s := connect(t, t.TempDir(), "HOME="+home)
	for i, cwd := range []string{"src/app", "~/src/app", "./src/app/"} {
		name := fmt.Sprintf("pwd%d", i)
		r := s.OK("process_start", map[string]any{"name": name, "argv": []any{"pwd"}, "cwd": cwd})
		assert.Equal(t, home+"/src/app", r.Run()["cwd"], cwd)
		s.OK("process_wait", map[string]any{"name": name})
		assert.Equal(t, home+"/src/app\n", s.OK("tail_log", map[string]any{"name": name}).Data["content"])
	}
	r := s.Call("process_start", map[string]any{"name": "other", "argv": []any{"pwd"}, "cwd": "~nobody/x"})
	assert.True(t, r.IsError)
	assert.Contains(t, r.Text, "~user")
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// ready: process_start returns once the probe passes, or says why not.
func TestStartUntilReady(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())

	t.Run("log", func(t *testing.T) {
		r := s.OK("process_start", map[string]any{"name": "printer",
			"command": "sleep 0.5; echo booting; sleep 0.5; echo listening on 8080; sleep 30",
			"ready":   map[string]any{"log": `listening on \d+`}, "ready_timeout_s": 20})
		assert.Equal(t, true, r.Data["ready"], r.Text)
		assert.EqualValues(t, len("booting\n"), r.Data["ready_offset"])
		assert.GreaterOrEqual(t, abtest.Num(r.Data["ready_after_ms"]), int64(900))
		assert.Equal(t, "running", r.Run()["state"])
		assert.Contains(t, r.Text, "ready after")
		// A restart probes the new run as the start did.
		r = s.OK("process_restart", map[string]any{"name": "printer", "grace_ms": 0})
		assert.Equal(t, true, r.Data["ready"], r.Text)
		assert.EqualValues(t, len("booting\n"), r.Data["ready_offset"])
		assert.Contains(t, r.Text, "ready after")
		s.OK("process_kill", map[string]any{"name": "printer", "signal": "KILL"})
	})
	t.Run("exits first", func(t *testing.T) {
		r := s.OK("process_start", map[string]any{"name": "crash", "command": "echo boom; exit 2",
			"ready": map[string]any{"log": "never"}})
		assert.Equal(t, false, r.Data["ready"], r.Text)
		assert.Contains(t, r.Data["ready_error"], "exit code 2")
		assert.Equal(t, "boom\n", r.Data["output_tail"])
		assert.Equal(t, "exited", r.Run()["state"])
	})
	t.Run("times out", func(t *testing.T) {
		r := s.OK("process_start", map[string]any{"name": "mute", "argv": []any{"sleep", "30"},
			"ready": map[string]any{"tcp_port": freeTCPPort(t)}, "ready_timeout_s": 1})
		assert.Equal(t, false, r.Data["ready"], r.Text)
		assert.Contains(t, r.Data["ready_error"], "left running")
		assert.Equal(t, "running", r.Run()["state"])
		s.OK("process_kill", map[string]any{"name": "mute", "signal": "KILL"})
	})
	t.Run("http", func(t *testing.T) {
		if _, err := exec.LookPath("python3"); err != nil {
			abtest.Missing(t, "python3 is not installed")
		}
		port := freeTCPPort(t)
		r := s.OK("process_start", map[string]any{"name": "web",
			"command": fmt.Sprintf("python3 -m http.server %d --bind 127.0.0.1", port),
			"ready":   map[string]any{"http": fmt.Sprintf("http://127.0.0.1:%d/", port)}, "ready_timeout_s": 30})
		assert.Equal(t, true, r.Data["ready"], r.Text)
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
		require.NoError(t, err, "ready means it answers")
		resp.Body.Close()
		r = s.OK("process_start", map[string]any{"name": "web2", "argv": []any{"sleep", "30"},
			"ready": map[string]any{"tcp_port": port}, "ready_timeout_s": 1})
		assert.Equal(t, false, r.Data["ready"], "the port accepts, but web2 does not listen on it (web does): %s", r.Text)
		for _, n := range []string{"web", "web2"} {
			s.OK("process_kill", map[string]any{"name": n, "signal": "KILL"})
		}
	})
	for _, bad := range []map[string]any{
		{"name": "b1", "argv": []any{"true"}, "ready": map[string]any{}},
		{"name": "b2", "argv": []any{"true"}, "ready": map[string]any{"log": "(", "tcp_port": 1}},
		{"name": "b3", "argv": []any{"true"}, "ready": map[string]any{"log": "("}},
		{"name": "b4", "argv": []any{"true"}, "ready": map[string]any{"http": "ftp://x"}},
		{"name": "b5", "argv": []any{"true"}, "ready": map[string]any{"tcp_port": 70000}},
		{"name": "b6", "argv": []any{"true"}, "ready_timeout_s": 5},
		{"name": "b7", "argv": []any{"true"}, "ready": map[string]any{"port": 80}},
	} {
		r := s.Call("process_start", bad)
		assert.True(t, r.IsError, "%v: %s", bad, r.Text)
	}
	assert.Equal(t, []string{"web2", "web", "mute", "crash", "printer"}, names(t, s.OK("process_list", nil)), "a refused start starts nothing")
}

// if_running reuse returns the running run of the same spec; restart
// starts the spec again as a new run, and both keep the old run.
func TestReuseAndRestart(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	spec := map[string]any{"name": "srv", "argv": []any{"sleep", "30"}, "cwd": "/", "env": map[string]any{"MODE": "dev"}}
	first := s.OK("process_start", spec)
	with := func(k string, v any) map[string]any {
		m := map[string]any{"if_running": "reuse"}
		for k, v := range spec {
			m[k] = v
		}
		if k != "" {
			m[k] = v
		}
		return m
	}
	r := s.OK("process_start", with("", nil))
	assert.Equal(t, true, r.Data["reused"])
	assert.Equal(t, first.Run()["run_id"], r.Run()["run_id"])
	assert.Contains(t, r.Text, "reused")

	r = s.Call("process_start", with("cwd", "/tmp"))
	assert.True(t, r.IsError)
	assert.Contains(t, r.Text, "another cwd")
	r = s.Call("process_start", with("env", map[string]any{"MODE": "prod"}))
	assert.True(t, r.IsError)
	assert.Contains(t, r.Text, "MODE")
	r = s.Call("process_start", with("argv", []any{"sleep", "31"}))
	assert.True(t, r.IsError)
	assert.Contains(t, r.Text, "another argv")
	r = s.Call("process_start", spec)
	assert.True(t, r.IsError, "without if_running the name is in use")

	r = s.OK("process_restart", map[string]any{"name": "srv", "grace_ms": 1000})
	assert.Equal(t, true, r.Data["stopped"])
	prev := runOf(t, r.Data["previous"])
	assert.Equal(t, first.Run()["run_id"], prev["run_id"])
	assert.Equal(t, "exited", prev["state"], r.Text)
	assert.NotEqual(t, first.Run()["run_id"], r.Run()["run_id"])
	assert.Equal(t, "running", r.Run()["state"])
	assert.Equal(t, []any{"sleep", "30"}, r.Run()["argv"])
	l := s.OK("process_list", map[string]any{"name": "srv", "all": true})
	require.Len(t, l.Data["runs"], 2, "the old run's record stays")
	old := runOf(t, l.Data["runs"].([]any)[1])
	assert.Equal(t, "SIGTERM", old["signal"])

	// A finished run restarts too; secrets must be given again.
	s.OK("process_start", map[string]any{"name": "sec", "command": "echo $TOKEN | wc -c", "secret_env": map[string]any{"TOKEN": "s3cret"}})
	s.OK("process_wait", map[string]any{"name": "sec"})
	r = s.Call("process_restart", map[string]any{"name": "sec"})
	assert.True(t, r.IsError)
	assert.Contains(t, r.Text, "TOKEN")
	r = s.OK("process_restart", map[string]any{"name": "sec", "secret_env": map[string]any{"TOKEN": "s3cret"}})
	assert.Nil(t, r.Data["stopped"])
	s.OK("process_wait", map[string]any{"name": "sec"})
	assert.Equal(t, "7\n", s.OK("tail_log", map[string]any{"name": "sec"}).Data["content"])
	s.OK("process_kill", map[string]any{"name": "srv", "signal": "KILL"})
}

// A restart whose spec can no longer start (its cwd is gone) fails before
// it stops anything: the old run keeps running.
func TestRestartThatCannotStartStopsNothing(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	dir := t.TempDir() + "/app"
	require.NoError(t, os.Mkdir(dir, 0o755))
	s.OK("process_start", map[string]any{"name": "srv", "argv": []any{"sleep", "30"}, "cwd": dir + "/"})
	r := s.OK("process_start", map[string]any{"name": "srv", "argv": []any{"sleep", "30"}, "cwd": dir, "if_running": "reuse"})
	assert.Equal(t, true, r.Data["reused"], "a trailing slash is the same cwd: %s", r.Text)
	r = s.Call("process_start", map[string]any{"name": "srv", "argv": []any{"sleep", "30"}, "cwd": dir, "if_running": "reuse", "stdin": "pipe"})
	assert.True(t, r.IsError, "a run without a stdin pipe cannot serve process_write")
	assert.Contains(t, r.Text, "stdin")

	require.NoError(t, os.Remove(dir))
	r = s.Call("process_restart", map[string]any{"name": "srv"})
	require.True(t, r.IsError, r.Text)
	assert.Contains(t, r.Text, "cannot be started again")
	assert.Equal(t, "running", abtest.RunOf(t, s.OK("process_list", nil), "srv")["state"], "the old run was not stopped")
	s.OK("process_kill", map[string]any{"name": "srv", "signal": "KILL"})
}
