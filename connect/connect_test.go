//go:build linux

package connect_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
	"github.com/agent-box/agent-box/session"
)

var binary string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	if len(os.Args) > 2 && os.Args[1] == linkArg {
		return link(os.Args[2:])
	}
	abtest.WaitBoundParallel()
	bin, cleanup, err := abtest.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, "connect:", err)
		return 1
	}
	defer cleanup()
	binary = bin
	return m.Run()
}

// The tests drive a box on this machine: agent-box's box side, which is
// Linux's. connect itself builds and is vetted for macOS too.

// box is agent-box connect over an exec transport to a box on this machine
// (its own state dir), through a link (link_test.go) that the test kills
// to drop the connection.
type box struct {
	t           *testing.T
	connectArgs []string // more flags for agent-box connect
	stateDir    string
	pids        string
	*abtest.Server
}

func newBox(t *testing.T) *box { return newBoxEnv(t, "new") }

// newBoxEnv is newBox whose link is in mode (link_test.go) and whose
// agent-box has env (KEY=value) added to its environment.
func newBoxEnv(t *testing.T, mode string, env ...string) *box {
	return newBoxWith(t, nil, mode, env...)
}

// newBoxWith is newBoxEnv with more flags for agent-box connect.
func newBoxWith(t *testing.T, connectArgs []string, mode string, env ...string) *box {
	b := &box{t: t, stateDir: t.TempDir(), connectArgs: connectArgs}
	b.pids = filepath.Join(t.TempDir(), "pids")
	transport := fmt.Sprintf("%s %s %s %s %s --state-dir %s", os.Args[0], linkArg, b.pids, mode, binary, b.stateDir)
	args := append([]string{"connect"}, b.connectArgs...)
	cmd := exec.Command(binary, append(args, "--exec", transport)...)
	// connect's cache of the box's answers (cache.go) in the test's own
	// directory, not the user's.
	cmd.Env = append(append(os.Environ(), "XDG_CACHE_HOME="+t.TempDir()), env...)
	// Before the session's Close, so that it runs after it: the state dir
	// is inside connect's --exec argument, where ConnectCmd does not look.
	abtest.ReapRunsAtCleanup(t, b.stateDir)
	b.Server = abtest.ConnectCmd(t, cmd)
	t.Cleanup(b.Close)
	return b
}

// transports are the pids of every transport started so far, in order.
func (b *box) transports() []int {
	data, _ := os.ReadFile(b.pids)
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// sent returns the params of every tools/call of tool that connect sent
// to any transport, in order.
func (b *box) sent(tool string) []json.RawMessage {
	b.t.Helper()
	data, err := os.ReadFile(b.pids + ".sent")
	require.NoError(b.t, err)
	var out []json.RawMessage
	for _, line := range bytes.Split(data, []byte("\n")) {
		var m struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		var p struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(line, &m) == nil && m.Method == "tools/call" && json.Unmarshal(m.Params, &p) == nil && p.Name == tool {
			out = append(out, m.Params)
		}
	}
	return out
}

// drop kills the n-th transport once its dial is through (the box
// answered initialize): a drop of a live link, not a failed dial. It
// returns once connect has started the next.
func (b *box) drop(n int) {
	b.t.Helper()
	abtest.WaitFor(b.t, fmt.Sprintf("transport %d", n), time.Minute, func() bool { return len(b.transports()) >= n })
	pid := b.transports()[n-1]
	abtest.WaitFor(b.t, fmt.Sprintf("transport %d through", n), time.Minute, func() bool {
		_, err := os.Stat(fmt.Sprintf("%s.up.%d", b.pids, pid))
		return err == nil
	})
	// The link lives until connect ends it: connect does only once a
	// transport is dead, and this one answered and is not killed yet.
	require.NoError(b.t, syscall.Kill(pid, syscall.SIGKILL))
	abtest.WaitFor(b.t, fmt.Sprintf("transport %d after the drop", n+1), time.Minute, func() bool { return len(b.transports()) > n })
}

// writeInFlight starts a run "cat" and writes "hello\n" to it with a wait
// until a line matches until; it returns once the write is applied (cat
// echoed it), with the write's answer to come.
func (b *box) writeInFlight(until string) chan abtest.Result {
	b.t.Helper()
	b.OK("process_start", map[string]any{"name": "cat", "command": "cat", "stdin": "pipe"})
	got := make(chan abtest.Result, 1)
	go func() {
		got <- b.Call("process_write", map[string]any{"name": "cat", "data": "hello\n", "wait_ms": 60000, "until": until})
	}()
	abtest.WaitFor(b.t, "the write's echo", time.Minute, func() bool {
		return strings.Contains(b.OK("tail_log", map[string]any{"name": "cat"}).Text, "hello")
	})
	return got
}

// TestFollowThroughDrops is the north star: a client follows a growing
// log through connect while the transport is killed again and again; it
// reads every byte once, in order, and sees no error.
func TestFollowThroughDrops(t *testing.T) {
	b := newBox(t)
	stop := filepath.Join(t.TempDir(), "stop")
	// The run writes until every drop is done, so that each falls in the
	// middle of the follow.
	b.OK("process_start", map[string]any{"name": "grow",
		"command": fmt.Sprintf("i=0; while [ ! -e %s ]; do i=$((i+1)); echo \"line $i of the growing log\"; [ $((i %% 20)) -eq 0 ] && sleep 0.01; done", stop)})
	const drops = 24
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer os.WriteFile(stop, nil, 0o600)
		for n := 1; n <= drops; n++ {
			b.drop(n)
		}
	}()
	all, _, _ := b.ReadAll("grow", 4096, false)
	wg.Wait()
	lines := strings.SplitAfter(string(all), "\n")
	require.Equal(t, "", lines[len(lines)-1], "the log ends in a whole line")
	lines = lines[:len(lines)-1]
	require.Greater(t, len(lines), drops)
	var want bytes.Buffer
	for i := 1; i <= len(lines); i++ {
		fmt.Fprintf(&want, "line %d of the growing log\n", i)
	}
	abtest.SameBytes(t, want.Bytes(), all, "the log read through %d drops", drops)
	require.GreaterOrEqual(t, len(b.transports()), drops+1)
}

// TestOldBoxSaysAWriteLostIsUnknown: against an agent-box without safe
// repeats, a process_write whose answer a drop lost is not sent again
// (it could be applied twice); the caller is told that whether it was
// applied is unknown, with a code to branch on.
func TestOldBoxSaysAWriteLostIsUnknown(t *testing.T) {
	b := newBoxEnv(t, "old")
	got := b.writeInFlight("never matches")
	b.drop(1)
	r := <-got
	require.True(t, r.IsError, "%s", r.Text)
	require.Contains(t, r.Text, "whether it was applied is unknown")
	e, _ := r.Data["error"].(map[string]any)
	require.Equal(t, "unknown_outcome", e["code"], "%v", r.Data)
	require.Equal(t, false, e["retryable"])
	// The session goes on.
	b.OK("process_kill", map[string]any{"name": "cat", "signal": "KILL"})
}

// TestFirstContactFailureSaysWhy: a box that cannot be reached at all
// fails initialize with its name and the transport's own words (ssh's
// "Host key verification failed."), not a bare "connection closed".
func TestFirstContactFailureSaysWhy(t *testing.T) {
	transport := `sh -c 'echo "Host key verification failed." >&2; exit 255'`
	cmd := exec.Command(binary, "connect", "--exec", transport)
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = io.Discard
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { in.Close(); cmd.Wait() })
	_, err = io.WriteString(in, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`+"\n")
	require.NoError(t, err)
	line, err := bufio.NewReader(out).ReadBytes('\n')
	require.NoError(t, err)
	var ans struct {
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(line, &ans), "%s", line)
	require.NotNil(t, ans.Error, "%s", line)
	require.Contains(t, ans.Error.Message, "Host key verification failed.")
	require.Contains(t, ans.Error.Message, transport)
}

// TestWaitThroughDropsKeepsItsProgressAndTime: a process_wait with a
// progress token, cut by drops, goes on under the same token with
// progress that only grows, and ends with the run's end, not an error.
func TestWaitThroughDropsKeepsItsProgressAndTime(t *testing.T) {
	b := newBoxEnv(t, "new", "AGENT_BOX_PROGRESS_MS=100")
	gate := filepath.Join(t.TempDir(), "gate")
	b.OK("process_start", map[string]any{"name": "gated",
		"command": fmt.Sprintf("while [ ! -e %s ]; do sleep 0.05; done; exit 7", gate)})
	got := make(chan abtest.Result, 1)
	began := time.Now()
	go func() {
		got <- b.CallWithProgress("process_wait", map[string]any{"name": "gated", "timeout_ms": 120000}, "tok")
	}()
	for n := 1; n <= 3; n++ {
		seen := len(b.Progress("tok"))
		abtest.WaitFor(t, fmt.Sprintf("progress before drop %d (%d so far)", n, seen), time.Minute, func() bool {
			select {
			case r := <-got:
				t.Fatalf("the wait ended before drop %d: %v %s", n, r.Data, r.Text)
			default:
			}
			return len(b.Progress("tok")) >= seen+2
		})
		b.drop(n)
	}
	seen := len(b.Progress("tok"))
	abtest.WaitFor(t, "progress after the last drop", time.Minute, func() bool {
		select {
		case r := <-got:
			t.Fatalf("the wait ended after the last drop: %v %s", r.Data, r.Text)
		default:
		}
		return len(b.Progress("tok")) >= seen+2
	})
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	r := <-got
	require.False(t, r.IsError, "%s", r.Text)
	run, _ := r.Data["run"].(map[string]any)
	require.EqualValues(t, 7, run["exit_code"], "%v", r.Data)
	// Each transport got the wait once, with what was left of its bound
	// when it was re-sent: less than the call gave, and at least the call's
	// bound less all the time the test has waited.
	waited := time.Since(began)
	var bounds []int64
	for _, req := range b.sent("process_wait") {
		var p struct {
			Arguments struct {
				TimeoutMS int64 `json:"timeout_ms"`
			} `json:"arguments"`
		}
		require.NoError(t, json.Unmarshal(req, &p))
		bounds = append(bounds, p.Arguments.TimeoutMS)
	}
	require.Len(t, bounds, 4, "the wait and its three re-sends: %v", bounds)
	require.EqualValues(t, 120000, bounds[0])
	for _, ms := range bounds[1:] {
		require.Less(t, ms, int64(120000), "a re-sent wait has less time: %v", bounds)
		require.GreaterOrEqual(t, ms, 120000-waited.Milliseconds(), "a re-sent wait loses only the time gone: %v", bounds)
	}
	last := -1.0
	for _, p := range b.Progress("tok") {
		require.Greater(t, p.Progress, last, "progress must grow under one token")
		last = p.Progress
	}
}

// TestBoxGoneSaysSoAndComesBack: a box that stays unreachable fails a call
// after --give-up with its name, the transport's words and a code that
// says a repeat may succeed; once it is back, calls succeed again.
func TestBoxGoneSaysSoAndComesBack(t *testing.T) {
	b := newBoxWith(t, []string{"--give-up", "2s"}, "new")
	b.OK("process_list", map[string]any{})
	require.NoError(t, os.WriteFile(b.pids+".down", nil, 0o600))
	require.NoError(t, syscall.Kill(b.transports()[0], syscall.SIGKILL))
	r := b.Call("process_list", map[string]any{})
	require.True(t, r.IsError, "%s", r.Text)
	require.Contains(t, r.Text, "Connection refused")
	require.Contains(t, r.Text, linkArg, "the box's name (here the --exec command)")
	e, _ := r.Data["error"].(map[string]any)
	require.Equal(t, "unreachable", e["code"], "%v", r.Data)
	require.Equal(t, true, e["retryable"])
	require.NoError(t, os.Remove(b.pids+".down"))
	b.OK("process_list", map[string]any{})
}

// TestMutationsCutByADropHappenOnce: a process_write and a process_start
// in flight when the connection drops are re-sent with their request id;
// the box applies each once, and answers the repeat as the whole call
// would have: the drop cut the first try's wait (the old agent-box ends
// every wait when its client goes), so the new one waits again, for the
// time the call has left: the write's until matches a line written only
// after the drop, the start's probe passes only after it.
func TestMutationsCutByADropHappenOnce(t *testing.T) {
	b := newBox(t)
	got := b.writeInFlight("^world")
	b.drop(1)
	// The line the write waits for, sent by another call after the drop.
	b.OK("process_write", map[string]any{"name": "cat", "data": "world\n"})
	r := <-got
	require.False(t, r.IsError, "%s", r.Text)
	require.EqualValues(t, 6, r.Data["written"], "%v", r.Data)
	require.Equal(t, true, r.Data["matched"], "the write waited for its until: %s", r.Text)
	require.Equal(t, "hello\nworld\n", r.Data["output"], "the whole output since the write")

	// A start whose ready probe holds it until the drop.
	gate := filepath.Join(t.TempDir(), "gate")
	go func() {
		got <- b.Call("process_start", map[string]any{"name": "server",
			"command": fmt.Sprintf("echo starting; while [ ! -e %s ]; do sleep 0.05; done; echo ready; exec sleep 300", gate),
			"ready":   map[string]any{"log": "^ready"}, "ready_timeout_s": 120})
	}()
	abtest.WaitFor(t, "the start's first line", time.Minute, func() bool {
		r := b.Call("tail_log", map[string]any{"name": "server"})
		return !r.IsError && strings.Contains(r.Text, "starting")
	})
	b.drop(2)
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	r = <-got
	require.False(t, r.IsError, "%s", r.Text)
	require.Equal(t, true, r.Data["ready"], "the start waited for its probe: %s", r.Text)
	runs := b.OK("process_list", map[string]any{"name": "server", "all": true}).Data["runs"].([]any)
	require.Len(t, runs, 1, "one run started")
	require.Equal(t, runs[0].(map[string]any)["run_id"], r.Run()["run_id"], "the answer is the run's")

	b.OK("process_write", map[string]any{"name": "cat", "close": true})
	w := b.OK("process_wait", map[string]any{"name": "cat", "timeout_ms": 60000})
	require.Equal(t, "exited", w.Data["run"].(map[string]any)["state"])
	require.Equal(t, "hello\nworld\n", b.OK("tail_log", map[string]any{"name": "cat", "offset": 0}).Data["content"], "written once")
	b.OK("process_kill", map[string]any{"name": "server", "signal": "KILL"})
}

// TestHungTransportIsRedialled: a transport that stops passing anything on
// without exiting (a docker exec whose daemon went away) is noticed by the
// keepalive, ended, and dialled again; the call in flight is answered.
func TestHungTransportIsRedialled(t *testing.T) {
	b := newBoxWith(t, []string{"--keepalive", "300ms"}, "new")
	b.OK("process_list", map[string]any{})
	require.Len(t, b.transports(), 1, "the first transport is still the live one")
	first := b.transports()[0]
	require.NoError(t, os.WriteFile(fmt.Sprintf("%s.hang.%d", b.pids, first), nil, 0o600))
	b.OK("process_list", map[string]any{})
	require.Greater(t, len(b.transports()), 1, "a second transport")
}

// TestMutationCutAndBoxGoneIsUnknownNotRetryable: a write in flight when
// the connection drops, and the box then unreachable past --give-up: the
// write may have been made, so it is unknown_outcome, never "unreachable,
// retryable" (a retry would write again).
func TestMutationCutAndBoxGoneIsUnknownNotRetryable(t *testing.T) {
	b := newBoxWith(t, []string{"--give-up", "2s"}, "new")
	got := b.writeInFlight("never matches")
	require.NoError(t, os.WriteFile(b.pids+".down", nil, 0o600))
	b.drop(1)
	r := <-got
	require.True(t, r.IsError, "%s", r.Text)
	e, _ := r.Data["error"].(map[string]any)
	require.Equal(t, "unknown_outcome", e["code"], "%v", r.Data)
	require.Equal(t, false, e["retryable"])
	require.Contains(t, r.Text, "Connection refused", "why the box could not be reached again")
	require.NoError(t, os.Remove(b.pids+".down"))
	b.OK("process_kill", map[string]any{"name": "cat", "signal": "KILL"})
}

// TestConnectEndsWhenItsClientGoes: at the client's EOF, connect gives the
// transport EOF and waits for it to end; a transport that does not is
// killed, and connect exits. (A raw client: the go-sdk's would SIGTERM
// connect itself a few seconds after its EOF.)
func TestConnectEndsWhenItsClientGoes(t *testing.T) {
	pids := filepath.Join(t.TempDir(), "pids")
	transport := fmt.Sprintf("%s %s %s deaf %s --state-dir %s", os.Args[0], linkArg, pids, binary, t.TempDir())
	// No keepalive: its ping, failing to write, would end the transport too.
	cmd := exec.Command(binary, "connect", "--keepalive", "0", "--exec", transport)
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = io.Discard
	require.NoError(t, cmd.Start())
	_, err = io.WriteString(in, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`+"\n")
	require.NoError(t, err)
	_, err = bufio.NewReader(out).ReadBytes('\n')
	require.NoError(t, err, "the answer to initialize")
	data, err := os.ReadFile(pids)
	require.NoError(t, err)
	link, err := strconv.Atoi(strings.TrimSpace(string(data)))
	require.NoError(t, err)

	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	in.Close() // the client's EOF
	select {
	case err := <-exited:
		require.NoError(t, err, "connect's exit")
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		t.Fatal("connect did not exit within a minute of its client's EOF")
	}
	require.Error(t, syscall.Kill(link, 0), "the deaf transport was killed")
}

// TestStartWhileTheBoxIsAway: a client started while its box cannot be
// reached gets the box's answer to initialize and its tools as connect
// last saw them (a client whose initialize fails never tries again), and
// calls that say why they fail, until the box is back.
func TestStartWhileTheBoxIsAway(t *testing.T) {
	b := newBox(t)
	tools, err := b.Session().ListTools(t.Context(), nil)
	require.NoError(t, err)
	b.Close()

	require.NoError(t, os.WriteFile(b.pids+".down", nil, 0o600))
	again := exec.Command(b.Cmd.Path, b.Cmd.Args[1:]...)
	again.Env = b.Cmd.Env
	s := abtest.ConnectCmd(t, again)
	t.Cleanup(s.Close)
	require.Equal(t, "agent-box", s.Session().InitializeResult().ServerInfo.Name)
	cachedTools, err := s.Session().ListTools(t.Context(), nil)
	require.NoError(t, err)
	require.Equal(t, len(tools.Tools), len(cachedTools.Tools))
	for i := range tools.Tools {
		require.Equal(t, tools.Tools[i].Name, cachedTools.Tools[i].Name)
	}
	r := s.Call("process_list", map[string]any{})
	require.True(t, r.IsError, "%s", r.Text)
	require.Contains(t, r.Text, "Connection refused")
	e, _ := r.Data["error"].(map[string]any)
	require.Equal(t, "unreachable", e["code"], "%v", r.Data)

	require.NoError(t, os.Remove(b.pids+".down"))
	s.OK("process_list", map[string]any{})
}

// TestUpgradedBoxListsItsToolsAnew: after a drop, the box behind connect is
// another agent-box (installed anew on the box): connect tells the client
// the tool list changed, and lists it from the box again.
func TestUpgradedBoxListsItsToolsAnew(t *testing.T) {
	b := newBox(t)
	init := b.Session().InitializeResult()
	require.True(t, init.Capabilities.Tools.ListChanged, "connect says the list may change")
	_, err := b.Session().ListTools(t.Context(), nil)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(b.pids+".v2", nil, 0o600))
	b.drop(1)
	select {
	case <-b.ToolListChanged():
	case <-time.After(time.Minute):
		t.Fatal("no notifications/tools/list_changed within a minute of the upgraded box's answer")
	}
	_, err = b.Session().ListTools(t.Context(), nil)
	require.NoError(t, err)
	sent := 0
	for _, line := range bytes.Split(must(os.ReadFile(b.pids+".sent")), []byte("\n")) {
		if bytes.Contains(line, []byte(`"method":"tools/list"`)) {
			sent++
		}
	}
	require.Equal(t, 2, sent, "tools/list asked of the first box and of the upgraded one")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestFollowReaderThroughDrops is session.Follow, the resumable reader the
// CLI follows logs with: through 20 drops of its own transport it copies a
// framed run's stdout and stderr, each byte once, in the log's order (the
// same order a read without drops gives).
func TestFollowReaderThroughDrops(t *testing.T) {
	b := newBox(t)
	r := &box{t: t, pids: filepath.Join(t.TempDir(), "pids")}
	init := json.RawMessage(`{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}`)
	sess := session.Open(session.Box{Name: "test box", Argv: []string{os.Args[0], linkArg, r.pids, "new", binary, "--state-dir", b.stateDir}},
		init, session.Options{})
	t.Cleanup(sess.Close)

	stop := filepath.Join(t.TempDir(), "stop")
	b.OK("process_start", map[string]any{"name": "mix", "capture_mode": "framed",
		"command": fmt.Sprintf("i=0; while [ ! -e %s ]; do i=$((i+1)); echo \"out $i\"; echo \"err $i\" >&2; [ $((i %% 20)) -eq 0 ] && sleep 0.01; done", stop)})
	const drops = 20
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer os.WriteFile(stop, nil, 0o600)
		for n := 1; n <= drops; n++ {
			r.drop(n)
		}
	}()
	var order orderedStreams
	end, err := sess.Follow(t.Context(), session.Follow{Name: "mix", MaxBytes: 512, Wait: time.Second}, order.stream("out"), order.stream("err"))
	<-done
	require.NoError(t, err)
	require.Equal(t, "exited", end.State)
	require.GreaterOrEqual(t, len(r.transports()), drops+1)

	outs, errs := order.lines("out"), order.lines("err")
	require.Equal(t, len(outs), len(errs), "both streams whole")
	require.Greater(t, len(outs), drops)
	for i := range outs {
		require.Equal(t, fmt.Sprintf("out %d", i+1), outs[i])
		require.Equal(t, fmt.Sprintf("err %d", i+1), errs[i])
	}
	var again orderedStreams
	_, err = sess.Follow(t.Context(), session.Follow{Name: "mix"}, again.stream("out"), again.stream("err"))
	require.NoError(t, err)
	require.Equal(t, again.seq, order.seq, "the streams' order as the log has it")
}

// orderedStreams records what two streams get, in the order they get it.
type orderedStreams struct {
	mu  sync.Mutex
	seq []string // "out: bytes" or "err: bytes", one per write
}

func (o *orderedStreams) stream(name string) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.seq = append(o.seq, name+": "+string(p))
		return len(p), nil
	})
}

func (o *orderedStreams) lines(name string) []string {
	var all strings.Builder
	for _, s := range o.seq {
		if rest, ok := strings.CutPrefix(s, name+": "); ok {
			all.WriteString(rest)
		}
	}
	return strings.Split(strings.TrimSuffix(all.String(), "\n"), "\n")
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestFollowReaderCombined: a combined log goes to stdout as it is, and
// the end says how the run ended.
func TestFollowReaderCombined(t *testing.T) {
	b := newBox(t)
	b.OK("process_start", map[string]any{"name": "two", "command": "echo a; echo b >&2; exit 4"})
	init := json.RawMessage(`{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}`)
	sess := session.Open(session.Box{Name: "test box", Argv: []string{binary, "--state-dir", b.stateDir}}, init, session.Options{})
	t.Cleanup(sess.Close)
	var out, errs bytes.Buffer
	end, err := sess.Follow(t.Context(), session.Follow{Name: "two"}, &out, &errs)
	require.NoError(t, err)
	require.Equal(t, "a\nb\n", out.String())
	require.Empty(t, errs.String())
	require.Equal(t, "exited", end.State)
	require.NotNil(t, end.ExitCode)
	require.Equal(t, 4, *end.ExitCode)
	require.Equal(t, int64(4), end.Offset)
}
