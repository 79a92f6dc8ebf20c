// Command agent-box-demo shows agent-box doing its job: it speaks plain
// JSON-RPC to a local agent-box over pipes, starts a run, drops the
// connection by killing the server, reconnects with a new server, and lists,
// tails and waits for the run — printing each exchange readably.
//
// It also checks what it shows, so that CI running `make demo` notices a
// broken product: every tool call succeeds, the run is still running after
// the reconnect, output kept landing on disk while no agent-box existed, the
// log read back from offset 0 is exactly what the command printed, and the
// recorded exit code is the command's. Any failed check is named on stderr
// and the demo exits 1.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/agent-box/agent-box/internal/rawmcp"
)

// The demo's run. Its steps take 3 s, so that it is still running after
// the drop and the reconnect, and prints on both streams, kept apart by
// capture_mode "framed". wantStdout, wantStderr and demoExit are what this
// command prints and exits with; change them together.
const (
	demoName    = "demo"
	demoCommand = `for i in 1 2 3 4 5 6; do echo "step $i"; echo "warning $i" >&2; sleep 0.5; done; exit 3`
	demoExit    = 3
	demoSteps   = 6
)

var (
	wantStdout = numbered("step", demoSteps)
	wantStderr = numbered("warning", demoSteps)
)

// disconnected is how long the demo leaves the run with no agent-box at all,
// so that some of its output lands while nothing but its supervisor exists.
const disconnected = time.Second

func main() {
	binary := flag.String("binary", "bin/agent-box", "agent-box executable")
	stateDir := flag.String("state-dir", "", "state directory (default: a fresh temporary one)")
	flag.Parse()
	dir := *stateDir
	if dir == "" {
		d, err := os.MkdirTemp("", "agent-box-demo-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "agent-box-demo:", err)
			os.Exit(1)
		}
		dir = d
	}
	err := run(*binary, dir, os.Stdout, os.Stderr)
	if *stateDir == "" {
		os.RemoveAll(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent-box-demo:", err)
		os.Exit(1)
	}
}

// demo is one session: where it prints, and the checks that failed so far.
type demo struct {
	binary, stateDir string
	out, serverErr   io.Writer
	failed           []string
}

// failf records a failed check of step; the demo carries on so that the
// rest of the session still shows, and fails at the end.
func (d *demo) failf(step string, err error) {
	d.failed = append(d.failed, step+": "+err.Error())
}

// run plays the scripted session against binary with runs in stateDir,
// printing it to out (and the servers' stderr to serverErr). It returns an
// error for a transport failure or any failed check.
func run(binary, stateDir string, out, serverErr io.Writer) error {
	d := &demo{binary: binary, stateDir: stateDir, out: out, serverErr: serverErr}
	if err := d.session(); err != nil {
		return err
	}
	if len(d.failed) > 0 {
		return fmt.Errorf("%d check(s) failed; the session above does not show agent-box working:\n  %s",
			len(d.failed), strings.Join(d.failed, "\n  "))
	}
	fmt.Fprintln(out, "\ndemo: all checks passed")
	return nil
}

// session plays the script: a run started on one connection, the
// connection dropped, and the run found whole on a second.
func (d *demo) session() error {
	fmt.Fprintf(d.out, "agent-box demo (state dir %s)\n\n", d.stateDir)
	runID, before, err := d.firstConnection()
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "(no agent-box for %s; the run keeps printing to its log)\n", disconnected)
	// A pause, not a condition: the point is to leave the run alone with
	// its supervisor for a while, as a real drop would.
	time.Sleep(disconnected)
	return d.secondConnection(runID, before)
}

// firstConnection starts the run, reads what it has printed so far, and
// drops the connection by killing the server. It returns the run's id and
// the log as this client saw it.
func (d *demo) firstConnection() (string, *logAssembler, error) {
	fmt.Fprintln(d.out, "=== connection 1: start a run")
	c, err := d.dial()
	if err != nil {
		return "", nil, err
	}
	runID, before, err := d.startRun(c)
	if err != nil {
		c.Kill()
		return "", nil, err
	}
	fmt.Fprintln(d.out, "\n=== the connection drops (agent-box is SIGKILLed, as when ssh dies)")
	c.Kill()
	return runID, before, nil
}

// startRun starts the demo's run and reads its log from offset 0 once.
func (d *demo) startRun(c *rawmcp.Conn) (string, *logAssembler, error) {
	res, err := d.call(c, "connection 1, process_start", "process_start", map[string]any{
		"name":         demoName,
		"capture_mode": "framed",
		"command":      demoCommand,
	})
	if err != nil {
		return "", nil, err
	}
	started, _ := res.StructuredContent["run"].(map[string]any)
	runID := str(started["run_id"])
	if err := checkRun(started, "", "running"); err != nil && !res.IsError {
		d.failf("connection 1, process_start", err)
	}
	res, err = d.call(c, "connection 1, tail_log", "tail_log", map[string]any{"name": demoName, "offset": 0, "wait_ms": 2000})
	if err != nil {
		return "", nil, err
	}
	// What was on disk when the connection dropped, as far as this client
	// saw: the window from offset 0 to its end_offset.
	var before logAssembler
	if err := before.add(res.StructuredContent); err != nil && !res.IsError {
		d.failf("connection 1, tail_log", err)
	}
	return runID, &before, nil
}

// secondConnection dials a new server, which must find run runID still
// running and its whole log on disk, before has what connection 1 read.
func (d *demo) secondConnection(runID string, before *logAssembler) error {
	fmt.Fprintln(d.out, "\n=== connection 2: a new agent-box sees the run and its whole log")
	c, err := d.dial()
	if err != nil {
		return err
	}
	if err := d.findAgain(c, runID, before); err != nil {
		c.Kill()
		return err
	}
	return c.Close()
}

// findAgain lists the run, reads its log from offset 0 to its end, and
// checks the log against what the command printed and connection 1 saw.
func (d *demo) findAgain(c *rawmcp.Conn, runID string, before *logAssembler) error {
	listed, err := d.listRun(c, runID)
	if err != nil {
		return err
	}
	log, err := d.readLog(c, runID)
	if err != nil {
		return err
	}
	if err := checkOutput("stdout", wantStdout, log.stdout); err != nil {
		d.failf("the log from offset 0 to its end", err)
	}
	if err := checkOutput("stderr", wantStderr, log.stderr); err != nil {
		d.failf("the log from offset 0 to its end", err)
	}
	if listed != nil {
		if err := checkAfterDrop(before.stdout, before.next, num(listed["log_bytes"]), log.stdout); err != nil {
			d.failf("output after the drop", err)
		}
	}
	_, err = d.call(c, "connection 2, tail_log tail_lines", "tail_log", map[string]any{"name": demoName, "tail_lines": 3})
	return err
}

// listRun returns the run as process_list shows it (nil if it does not),
// which must be runID and still running.
func (d *demo) listRun(c *rawmcp.Conn, runID string) (map[string]any, error) {
	const step = "connection 2, process_list"
	res, err := d.call(c, step, "process_list", map[string]any{})
	if err != nil {
		return nil, err
	}
	listed, err := findRun(res.StructuredContent, demoName)
	if err == nil {
		err = checkRun(listed, runID, "running")
	}
	if err != nil && !res.IsError {
		d.failf(step, err)
	}
	return listed, nil
}

// readLog reads the log from offset 0 in windows, each call resuming at
// the previous end_offset: one now, while the run is still writing, the
// rest after process_wait says it ended with the command's exit code.
func (d *demo) readLog(c *rawmcp.Conn, runID string) (*logAssembler, error) {
	var log logAssembler
	const tailStep = "connection 2, tail_log from offset 0"
	res, err := d.call(c, tailStep, "tail_log", map[string]any{"name": demoName, "offset": 0})
	if err != nil {
		return nil, err
	}
	if err := log.add(res.StructuredContent); err != nil && !res.IsError {
		d.failf(tailStep, err)
	}
	const waitStep = "connection 2, process_wait"
	res, err = d.call(c, waitStep, "process_wait", map[string]any{"name": demoName, "timeout_ms": 20000})
	if err != nil {
		return nil, err
	}
	if err := checkWait(res.StructuredContent, runID, demoExit); err != nil && !res.IsError {
		d.failf(waitStep, err)
	}
	if err := d.readRest(c, &log); err != nil {
		return nil, err
	}
	return &log, nil
}

// readRest continues log from its end_offset until tail_log says eof.
func (d *demo) readRest(c *rawmcp.Conn, log *logAssembler) error {
	const step = "connection 2, tail_log from end_offset"
	for i := 0; !log.eof; i++ {
		if i == 20 {
			d.failf(step, fmt.Errorf("eof: want true after the run ended, got false after %d calls, at offset %d", i, log.next))
			return nil
		}
		args := map[string]any{"name": demoName, "offset": log.next}
		if i > 0 {
			// The previous window came back empty: follow instead of spinning.
			args["wait_ms"] = 1000
		}
		res, err := d.call(c, step, "tail_log", args)
		if err != nil {
			return err
		}
		if res.IsError {
			return nil // failed in call already
		}
		if err := log.add(res.StructuredContent); err != nil {
			d.failf(step, err)
			return nil
		}
	}
	return nil
}

func (d *demo) dial() (*rawmcp.Conn, error) {
	cmd := exec.Command(d.binary, "--state-dir", d.stateDir)
	cmd.Stderr = d.serverErr
	start := time.Now()
	c, res, err := rawmcp.Dial(cmd, "agent-box-demo")
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", d.binary, err)
	}
	info, _ := res["serverInfo"].(map[string]any)
	fmt.Fprintf(d.out, "(connected to %v %v, pid %d, in %s)\n", info["name"], info["version"], cmd.Process.Pid, time.Since(start).Round(time.Millisecond))
	return c, nil
}

// call prints one exchange. A transport error is returned; a tool error
// (isError) is a failed check of step, since no call of the script is meant
// to fail, and the caller then skips its checks of the result, which would
// only repeat it.
func (d *demo) call(c *rawmcp.Conn, step, tool string, args map[string]any) (*rawmcp.ToolResult, error) {
	var a strings.Builder
	enc := json.NewEncoder(&a)
	enc.SetEscapeHTML(false)
	enc.Encode(args)
	fmt.Fprintf(d.out, "\n→ %s %s", tool, a.String())
	res, err := c.Call(tool, args)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", step, err)
	}
	fmt.Fprintln(d.out, indent(strings.TrimRight(res.Text(), "\n")))
	if err := checkOK(res); err != nil {
		fmt.Fprintln(d.out, "  (the tool reported an error)")
		d.failf(step, err)
	}
	return res, nil
}

func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }

// numbered is the lines "word 1" to "word n".
func numbered(word string, n int) []byte {
	var b []byte
	for i := 1; i <= n; i++ {
		b = fmt.Appendf(b, "%s %d\n", word, i)
	}
	return b
}
