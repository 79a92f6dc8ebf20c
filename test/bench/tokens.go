package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agent-box/agent-box/internal/rawmcp"
	"github.com/agent-box/agent-box/runrecord"
)

// benchTokens measures what a model reads: the real tasks of issue 33
// scripted over MCP the way a model makes its calls, counting per task the
// calls and the bytes of every reply's text content and of its structured
// content (a client may hand the model either or both), and what the
// server announces once per connection: the initialize instructions and
// tools/list.
//
// The script uses only the arguments the binary's own tools/list
// describes, so that one script measures an old build and a new one
// (--binary). It makes the calls the tools asked for before issue 33, and
// takes a one-call path only where the input schemas offer it: process_start
// with wait_ms runs a short command and answers with its end, where an
// older build needs process_start then process_wait.
//
// The runs use a state dir of their own, so that process_list answers the
// same whether other scenarios ran before or not, and the server an
// environment of its own (which its runs inherit): a Go build cache, warmed
// before the first counted call so that go test never waits on the
// compiler's first build of the standard library, and a HOME in the work
// dir, where the Python REPL writes its history.
func (b *bench) benchTokens() []metric {
	t, err := b.newTokenBench()
	if err != nil {
		return []metric{failed("tokens: setup", err)}
	}
	if err := t.openTranscript(); err != nil {
		return []metric{failed("tokens: setup", err)}
	}
	if t.transcript != nil {
		defer t.transcript.Close()
	}
	if err := t.connect(); err != nil {
		return []metric{failed("tokens: setup", err)}
	}
	for _, task := range []struct {
		name string
		fn   func() error
	}{
		{"short commands", t.shortCommands},
		{"build, test, fix", t.buildTestFix},
		{"dev server", t.devServer},
		{"REPL", t.repl},
		{"reconnect and inbox", t.reconnect},
		{"big output", t.bigOutput},
	} {
		t.cur = &tokenTask{name: task.name, tools: map[string]int{}}
		t.tasks = append(t.tasks, t.cur)
		if err := task.fn(); err != nil {
			return append(t.rows(), failed("tokens: "+task.name, err))
		}
	}
	t.c.close()
	return t.rows()
}

// openTranscript starts the transcript, if asked for.
func (t *tokenBench) openTranscript() error {
	if t.b.transcript == "" {
		return nil
	}
	f, err := os.Create(t.b.transcript)
	if err != nil {
		return err
	}
	t.transcript = f
	return nil
}

// record writes a counted call and its reply to the transcript.
func (t *tokenBench) record(tool string, args map[string]any, r *tokenReply, structured []byte) {
	if t.transcript == nil {
		return
	}
	a, _ := json.Marshal(args)
	fmt.Fprintf(t.transcript, "### %s: %s %s\n--- text (%d B):\n%s\n--- structured (%d B):\n%s\n\n",
		t.cur.name, tool, a, r.textBytes, r.text, r.structuredBytes, structured)
}

// tokenWaitMS is the wait_ms a model gives process_start for a command it
// expects to end soon, where the build offers it.
const tokenWaitMS = 30000

// bigOutputBytes is the size of the big-output task's log, about what
// pip prints installing a few hundred packages.
const bigOutputBytes = 2 << 20

// tokenBench is the token scenario's state: the model's connection and
// what has been counted.
type tokenBench struct {
	b        *bench
	dir      string // the scenario's files: the module's copy, the big output
	mod      string // the module's copy
	stateDir string
	env      []string // the server's, and so its runs'
	c        *client  // the model's connection
	// oneCall: process_start takes wait_ms (and answers with the end of a
	// run that ends within it).
	oneCall bool
	waitMS  int // the wait_ms given, within the schema's maximum

	tasks []*tokenTask
	cur   *tokenTask

	// Once per connection, the first one's.
	instructions int // bytes of initialize's instructions
	toolsList    int // bytes of the whole tools/list result
	toolsText    int // descriptions + input schemas, as TestToolTextStaysWithinBudget counts them

	transcript *os.File // nil: none

	echoEnd  *tokenReply // the reply with the end of "echo hi"
	bigTail  *tokenReply // tail_log {name} of the big output
	bigBytes int         // the big output's log size
}

// tokenTask counts one task's calls and the bytes of their replies.
type tokenTask struct {
	name             string
	calls            int
	text, structured int
	tools            map[string]int // calls per tool
}

// tokenReply is one tools/call result as the model receives it.
type tokenReply struct {
	text       string
	structured map[string]any
	isError    bool
	// The bytes a model reads: the text contents' and the structured
	// content's JSON, compact.
	textBytes, structuredBytes int
}

// newTokenBench makes the scenario's dirs, copies the module, writes the
// big output and warms the build cache.
func (b *bench) newTokenBench() (*tokenBench, error) {
	if _, err := exec.LookPath("python3"); err != nil {
		return nil, fmt.Errorf("the dev server and REPL tasks need python3: %w", err)
	}
	src, err := findUp(filepath.Join("testdata", "tokenbench"))
	if err != nil {
		return nil, err
	}
	t := &tokenBench{b: b, dir: filepath.Join(b.work, "tokens"), stateDir: filepath.Join(b.work, "tokens-state"), waitMS: tokenWaitMS}
	t.mod = filepath.Join(t.dir, "mod")
	home := filepath.Join(t.dir, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	store, _, err := runrecord.Open(t.stateDir)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.extraStores = append(b.extraStores, store)
	b.mu.Unlock()
	if err := copyTree(src, t.mod); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(t.dir, "pip-install.log"), pipOutput(bigOutputBytes), 0o644); err != nil {
		return nil, err
	}
	// python3 may be a shim (pyenv's is a bash script that execs the
	// interpreter), which agent-box rightly reports as a command line
	// that changed: noise of this machine's, not of the build measured.
	// The interpreter's own dir first in PATH makes python3 the program.
	py, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		return nil, fmt.Errorf("finding python3's interpreter: %w", err)
	}
	path := filepath.Dir(strings.TrimSpace(string(py))) + string(filepath.ListSeparator) + os.Getenv("PATH")
	t.env = append(os.Environ(),
		"PATH="+path,
		"HOME="+home,
		"GOCACHE="+filepath.Join(t.dir, "gocache"),
		"GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "GOPROXY=off", "GOWORK=off")
	// The test binaries built and run with no test selected: every
	// package compiled into the cache, no test result cached for the
	// counted go test ./... to report as "(cached)".
	warm := exec.Command("go", "test", "-run", "^$", "./...")
	warm.Dir, warm.Env = t.mod, t.env
	if out, err := warm.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("warming the build cache: %w\n%s", err, out)
	}
	return t, nil
}

// dial starts a server on the scenario's state dir with its environment,
// and completes the handshake; the bench's cleanup closes it too.
func (t *tokenBench) dial() (*client, map[string]any, error) {
	c, err := spawnEnv(t.b.binary, t.stateDir, t.env)
	if err != nil {
		return nil, nil, err
	}
	t.b.mu.Lock()
	t.b.clients = append(t.b.clients, c)
	t.b.mu.Unlock()
	init, err := c.Initialize(clientName)
	if err != nil {
		return nil, nil, c.withStderr(err)
	}
	return c, init, nil
}

// connect opens the model's connection. The first one also measures what
// the server announces, and reads the input schemas for the one-call path.
func (t *tokenBench) connect() error {
	c, init, err := t.dial()
	if err != nil {
		return err
	}
	t.c = c
	if t.toolsList > 0 {
		return nil
	}
	instr, _ := init["instructions"].(string)
	t.instructions = len(instr)
	var raw json.RawMessage
	if err := c.Request("tools/list", map[string]any{}, &raw); err != nil {
		return c.withStderr(err)
	}
	var list struct {
		Tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"inputSchema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return fmt.Errorf("tools/list: %w", err)
	}
	t.toolsList = compactLen(raw)
	for _, tool := range list.Tools {
		t.toolsText += len(tool.Description) + compactLen(tool.InputSchema)
		if tool.Name == "process_start" {
			t.oneCall, t.waitMS = waitArg(tool.InputSchema, tokenWaitMS)
		}
	}
	return nil
}

// waitArg reports whether an input schema has a wait_ms property, and the
// wait to give it: want, or the schema's maximum if lower.
func waitArg(schema json.RawMessage, want int) (bool, int) {
	var s struct {
		Properties map[string]struct {
			Maximum *float64 `json:"maximum"`
		} `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return false, want
	}
	p, ok := s.Properties["wait_ms"]
	if !ok {
		return false, want
	}
	if p.Maximum != nil && int(*p.Maximum) < want {
		return true, int(*p.Maximum)
	}
	return true, want
}

// call makes one counted tool call. A tool error is a reply like another
// (the model reads it); only a broken connection is an error.
func (t *tokenBench) call(tool string, args map[string]any) (*tokenReply, error) {
	var res struct {
		Content           []rawmcp.Content `json:"content"`
		StructuredContent json.RawMessage  `json:"structuredContent"`
		IsError           bool             `json:"isError"`
	}
	if err := t.c.Request("tools/call", map[string]any{"name": tool, "arguments": args}, &res); err != nil {
		return nil, t.c.withStderr(err)
	}
	r := newTokenReply(res.Content, res.StructuredContent, res.IsError)
	t.cur.calls++
	t.cur.tools[tool]++
	t.cur.text += r.textBytes
	t.cur.structured += r.structuredBytes
	t.record(tool, args, r, res.StructuredContent)
	return r, nil
}

// mustCall is call for a call that the script needs to succeed.
func (t *tokenBench) mustCall(tool string, args map[string]any) (*tokenReply, error) {
	r, err := t.call(tool, args)
	if err == nil && r.isError {
		err = fmt.Errorf("%s: tool error: %s", tool, r.text)
	}
	return r, err
}

func newTokenReply(content []rawmcp.Content, structured json.RawMessage, isError bool) *tokenReply {
	r := &tokenReply{isError: isError}
	for _, c := range content {
		if c.Type == "text" {
			r.text += c.Text
		}
	}
	r.textBytes = len(r.text)
	if s := bytes.TrimSpace(structured); len(s) > 0 && !bytes.Equal(s, []byte("null")) {
		r.structuredBytes = compactLen(s)
		_ = json.Unmarshal(s, &r.structured)
	}
	return r
}

// runField is a field of the run a reply describes, wherever the build
// puts it: at the top level or under "run".
func (r *tokenReply) runField(key string) any {
	if v, ok := r.structured[key]; ok {
		return v
	}
	if run, ok := r.structured["run"].(map[string]any); ok {
		return run[key]
	}
	return nil
}

// ended: the reply says its run is no longer running.
func (r *tokenReply) ended() bool {
	s, _ := r.runField("state").(string)
	return s != "" && s != "running"
}

// exitCode is the run's exit code, or -1 for none.
func (r *tokenReply) exitCode() int {
	if v, ok := r.runField("exit_code").(float64); ok {
		return int(v)
	}
	return -1
}

// waitEnd calls process_wait until the run ends, again on
// wait_timed_out as the description says.
func (t *tokenBench) waitEnd(name string) (*tokenReply, error) {
	for range 20 {
		r, err := t.mustCall("process_wait", map[string]any{"name": name})
		if err != nil {
			return nil, err
		}
		if r.structured["wait_timed_out"] != true {
			return r, nil
		}
	}
	return nil, fmt.Errorf("process_wait %s: still running after 20 waits", name)
}

// runShort runs a command the model expects to end soon and returns the
// reply with its end: process_start with wait_ms where the build has it,
// else (or if the run outlived the wait) process_start then process_wait.
// A start that fails is its own end.
func (t *tokenBench) runShort(name, command string) (*tokenReply, error) {
	args := map[string]any{"name": name, "command": command, "cwd": t.mod}
	if t.oneCall {
		args["wait_ms"] = t.waitMS
	}
	r, err := t.call("process_start", args)
	if err != nil || r.isError || (t.oneCall && r.ended()) {
		return r, err
	}
	return t.waitEnd(name)
}

// shortCommands: a command with 3 bytes of output and one that is not
// found, each run to its end.
func (t *tokenBench) shortCommands() error {
	r, err := t.runShort("hi", "echo hi")
	if err != nil {
		return err
	}
	if r.isError || !strings.Contains(r.text, "hi") {
		return fmt.Errorf("echo hi: the reply with its end does not show its output: %q", r.text)
	}
	t.echoEnd = r
	_, err = t.runShort("nope", "no-such-binary --version")
	return err
}

// fixedMean is the fix the model writes to the module's stats/mean.go.
const fixedMean = `// Package stats is the token-budget scenario's broken package.
package stats

// Mean is the arithmetic mean of xs, 0 for none.
func Mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}
`

// buildTestFix: go test ./... fails, the model reads the log, writes the
// fixed file with a shell command, and runs the tests again.
func (t *tokenBench) buildTestFix() error {
	r, err := t.runShort("test", "go test ./...")
	if err != nil {
		return err
	}
	if code := r.exitCode(); code != 1 {
		return fmt.Errorf("go test of the broken module: exit code %d, want 1: %s", code, r.text)
	}
	log, err := t.mustCall("tail_log", map[string]any{"name": "test"})
	if err != nil {
		return err
	}
	if !strings.Contains(log.text, "FAIL: TestMean") {
		return fmt.Errorf("tail_log of the failed go test does not show the failure: %q", log.text)
	}
	r, err = t.runShort("fix", "cat > stats/mean.go <<'EOF'\n"+fixedMean+"EOF")
	if err != nil {
		return err
	}
	if code := r.exitCode(); code != 0 {
		return fmt.Errorf("writing the fix: exit code %d: %s", code, r.text)
	}
	r, err = t.runShort("test", "go test ./...")
	if err != nil {
		return err
	}
	if code := r.exitCode(); code != 0 {
		return fmt.Errorf("go test after the fix: exit code %d, want 0: %s", code, r.text)
	}
	return nil
}

// devServer: an HTTP server started with a ready probe, started again
// with if_running reuse (a model that lost track of it), restarted, listed
// and stopped.
func (t *tokenBench) devServer() error {
	port, err := freePort()
	if err != nil {
		return err
	}
	start := map[string]any{
		"name":    "web",
		"command": fmt.Sprintf("python3 -m http.server %d --bind 127.0.0.1", port),
		"cwd":     t.dir,
		"ready":   map[string]any{"http": fmt.Sprintf("http://127.0.0.1:%d/", port)},
	}
	if _, err := t.mustCall("process_start", start); err != nil {
		return err
	}
	again := maps.Clone(start)
	again["if_running"] = "reuse"
	r, err := t.mustCall("process_start", again)
	if err != nil {
		return err
	}
	if r.runField("reused") != true {
		return fmt.Errorf("process_start with if_running reuse did not reuse the server: %s", r.text)
	}
	if _, err := t.mustCall("process_restart", map[string]any{"name": "web"}); err != nil {
		return err
	}
	if _, err := t.mustCall("process_list", map[string]any{}); err != nil {
		return err
	}
	_, err = t.mustCall("process_kill", map[string]any{"name": "web"})
	return err
}

// repl: Python on a terminal; the model waits for the prompt, sends three
// lines, each answered with the output up to the next prompt, and exits.
func (t *tokenBench) repl() error {
	if _, err := t.mustCall("process_start", map[string]any{"name": "py", "command": "python3", "cwd": t.dir, "pty": true}); err != nil {
		return err
	}
	if _, err := t.mustCall("tail_log", map[string]any{"name": "py", "wait_ms": 10000, "until": ">>> "}); err != nil {
		return err
	}
	var last *tokenReply
	for _, line := range []string{"squares = [n * n for n in range(10)]\n", "sum(squares)\n", "print(squares[-3:])\n"} {
		r, err := t.mustCall("process_write", map[string]any{"name": "py", "data": line, "wait_ms": 10000, "until": ">>> "})
		if err != nil {
			return err
		}
		last = r
	}
	if !strings.Contains(last.text, "[49, 64, 81]") {
		return fmt.Errorf("the REPL's answer to print(squares[-3:]) is not in the reply: %q", last.text)
	}
	if _, err := t.mustCall("process_write", map[string]any{"name": "py", "data": "exit()\n"}); err != nil {
		return err
	}
	_, err := t.waitEnd("py")
	return err
}

// reconnect: three runs started and listed (the cursor kept), the
// connection closed while two of them end, then after a reconnect the
// listing and the news since the cursor; the one still running is stopped.
func (t *tokenBench) reconnect() error {
	// The short ones run for a second so that the listing right after
	// their start finds them running in every build, on a busy machine too.
	jobs := map[string]string{
		"migrate": "sleep 1; echo migrations applied",
		"watch":   "sleep 600",
		"lint":    "sleep 1; echo 'lint: 3 problems' >&2; exit 1",
	}
	for _, name := range []string{"migrate", "watch", "lint"} {
		if _, err := t.mustCall("process_start", map[string]any{"name": name, "command": jobs[name], "cwd": t.mod}); err != nil {
			return err
		}
	}
	r, err := t.mustCall("process_list", map[string]any{})
	if err != nil {
		return err
	}
	cursor, _ := r.structured["cursor"].(string)
	if cursor == "" {
		return errors.New("process_list gave no cursor")
	}
	t.c.close()
	// While the model is away, and uncounted: the two short runs end.
	side, _, err := t.dial()
	if err != nil {
		return err
	}
	for _, name := range []string{"migrate", "lint"} {
		var w waitInfo
		if _, err := side.call("process_wait", map[string]any{"name": name, "timeout_ms": 30000}, &w); err != nil {
			side.close()
			return err
		}
		if w.TimedOut {
			side.close()
			return fmt.Errorf("%s still running after 30 s", name)
		}
	}
	side.close()
	if err := t.connect(); err != nil {
		return err
	}
	if _, err := t.mustCall("process_list", map[string]any{}); err != nil {
		return err
	}
	news, err := t.mustCall("process_list", map[string]any{"changed_since": cursor})
	if err != nil {
		return err
	}
	if !strings.Contains(news.text, "migrate") || !strings.Contains(news.text, "lint") {
		return fmt.Errorf("process_list changed_since does not report the runs that ended: %q", news.text)
	}
	_, err = t.mustCall("process_kill", map[string]any{"name": "watch"})
	return err
}

// bigOutput: an install that prints bigOutputBytes, progress bars and
// all, waited for, then its log read as a model first reads it, tail_log
// {name}. The wait comes first so that the read sees the whole log in
// every build.
func (t *tokenBench) bigOutput() error {
	if _, err := t.mustCall("process_start", map[string]any{"name": "install", "command": "cat pip-install.log", "cwd": t.dir}); err != nil {
		return err
	}
	w, err := t.waitEnd("install")
	if err != nil {
		return err
	}
	if code := w.exitCode(); code != 0 {
		return fmt.Errorf("the install run: exit code %d: %s", code, w.text)
	}
	if n, ok := w.runField("log_bytes").(float64); ok {
		t.bigBytes = int(n)
	}
	r, err := t.mustCall("tail_log", map[string]any{"name": "install"})
	if err != nil {
		return err
	}
	t.bigTail = r
	return nil
}

// rows are the figures: per task, then all tasks, then what a connection
// announces and the replies issue 33 sets a size for.
func (t *tokenBench) rows() []metric {
	var out []metric
	var all tokenTask
	for _, task := range t.tasks {
		out = append(out, taskRows(task, "")...)
		all.calls += task.calls
		all.text += task.text
		all.structured += task.structured
	}
	all.name = "all tasks"
	out = append(out, taskRows(&all, fmt.Sprintf("%d tasks", len(t.tasks)))...)

	if t.toolsList > 0 {
		list := metric{Name: "tokens: tools/list, whole result", Unit: "B", Value: float64(t.toolsList), Target: "≤ 24000 B"}
		list.setMet(t.toolsList <= 24000)
		text := metric{Name: "tokens: tools/list, descriptions + input schemas", Unit: "B", Value: float64(t.toolsText), Target: "≤ 10000 B"}
		text.setMet(t.toolsText <= 10000)
		how := "process_start then process_wait for short commands (process_start has no wait_ms)"
		if t.oneCall {
			how = fmt.Sprintf("process_start wait_ms %d for short commands", t.waitMS)
		}
		list.Note = "read once per connection; the tasks took " + how
		out = append(out, list, text,
			metric{Name: "tokens: initialize instructions", Unit: "B", Value: float64(t.instructions)})
	}
	if t.echoEnd != nil {
		m := metric{Name: "tokens: text of the reply with echo hi's end", Unit: "B", Value: float64(t.echoEnd.textBytes), Target: "≤ 160 B"}
		m.setMet(t.echoEnd.textBytes <= 160)
		m.Note = fmt.Sprintf("%d B structured", t.echoEnd.structuredBytes)
		out = append(out, m)
	}
	if t.bigTail != nil {
		text := metric{Name: "tokens: tail_log {name} of the big output, text", Unit: "B", Value: float64(t.bigTail.textBytes), Target: "≤ 16384 B"}
		text.setMet(t.bigTail.textBytes <= 16384)
		text.Note = fmt.Sprintf("log of %d B with \\r progress bars", t.bigBytes)
		structured := metric{Name: "tokens: tail_log {name} of the big output, structured", Unit: "B", Value: float64(t.bigTail.structuredBytes), Target: "≤ 32768 B"}
		structured.setMet(t.bigTail.structuredBytes <= 32768)
		out = append(out, text, structured)
	}
	return out
}

// taskRows are a task's three figures; the calls row names the tools.
func taskRows(task *tokenTask, note string) []metric {
	if note == "" {
		var per []string
		for _, tool := range slices.Sorted(maps.Keys(task.tools)) {
			per = append(per, fmt.Sprintf("%s %d", tool, task.tools[tool]))
		}
		note = strings.Join(per, ", ")
	}
	prefix := "tokens: " + task.name + ", "
	return []metric{
		{Name: prefix + "calls", Unit: "calls", Value: float64(task.calls), Note: note},
		{Name: prefix + "text", Unit: "B", Value: float64(task.text)},
		{Name: prefix + "structured", Unit: "B", Value: float64(task.structured)},
	}
}

// compactLen is the length of a JSON value without insignificant space,
// as a server sends it.
func compactLen(raw []byte) int {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return len(raw)
	}
	return b.Len()
}

// pipOutput is about size bytes of what pip install prints: per package
// a line or two and a progress bar redrawn with \r from 0 to 100 %, then
// the summary.
func pipOutput(size int) []byte {
	var b bytes.Buffer
	var names []string
	const width = 40
	for i := 0; b.Len() < size-1024; i++ {
		name := fmt.Sprintf("example-package-%d", i)
		names = append(names, name+"-1.0."+fmt.Sprint(i%10))
		kb := 100 + i*37%900
		fmt.Fprintf(&b, "Collecting %s==1.0.%d\n", name, i%10)
		fmt.Fprintf(&b, "  Downloading %s-1.0.%d-py3-none-any.whl (%d kB)\n", strings.ReplaceAll(name, "-", "_"), i%10, kb)
		for p := 0; p <= 100; p += 2 {
			done := p * width / 100
			fmt.Fprintf(&b, "\r     %s%s %d/%d kB %.1f MB/s eta 0:00:0%d",
				strings.Repeat("━", done), strings.Repeat(" ", width-done), kb*p/100, kb, 1+float64(p%7)/10, (100-p)/20)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "Installing collected packages: %d packages\n", len(names))
	fmt.Fprintf(&b, "Successfully installed %s\n", strings.Join(names[max(0, len(names)-20):], " "))
	return b.Bytes()
}

// freePort is a loopback TCP port nobody listens on just now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// findUp finds the directory rel in the working directory or the nearest
// parent that has it: the bench runs from the checkout's root (make bench)
// or its own package dir (go test).
func findUp(rel string) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		p := filepath.Join(dir, rel)
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			return p, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("%s not found in %s or a parent: run the bench in the agent-box checkout", rel, wd)
		}
	}
}

// copyTree copies the regular files under src to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case d.Type().IsRegular():
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(to, data, 0o644)
		}
		return nil
	})
}
