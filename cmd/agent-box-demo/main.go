// Command agent-box-demo shows agent-box doing its job: it speaks plain
// JSON-RPC to a local agent-box over pipes, starts a run, drops the
// connection by killing the server, reconnects with a new server, and lists,
// tails and waits for the run — printing each exchange readably.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/agent-box/agent-box/internal/rawmcp"
)

func main() {
	binary := flag.String("binary", "bin/agent-box", "agent-box executable")
	stateDir := flag.String("state-dir", "", "state directory (default: a fresh temporary one)")
	flag.Parse()
	if *stateDir == "" {
		d, err := os.MkdirTemp("", "agent-box-demo-")
		check(err)
		defer os.RemoveAll(d)
		*stateDir = d
	}
	fmt.Printf("agent-box demo (state dir %s)\n\n", *stateDir)

	fmt.Println("=== connection 1: start a run")
	c := dial(*binary, *stateDir)
	call(c, "process_start", map[string]any{
		"name":         "demo",
		"capture_mode": "framed",
		"command":      `for i in 1 2 3 4 5 6; do echo "step $i"; echo "warning $i" >&2; sleep 0.5; done; exit 3`,
	})
	call(c, "tail_log", map[string]any{"name": "demo", "wait_ms": 2000})
	fmt.Println("\n=== the connection drops (agent-box is SIGKILLed, as when ssh dies)")
	c.Kill()

	fmt.Println("\n=== connection 2: a new agent-box sees the run and its whole log")
	c = dial(*binary, *stateDir)
	call(c, "process_list", map[string]any{})
	call(c, "tail_log", map[string]any{"name": "demo", "offset": 0})
	call(c, "process_wait", map[string]any{"name": "demo", "timeout_ms": 20000})
	call(c, "tail_log", map[string]any{"name": "demo", "tail_lines": 3})
	check(c.Close())
}

func dial(binary, stateDir string) *rawmcp.Conn {
	cmd := exec.Command(binary, "--state-dir", stateDir)
	cmd.Stderr = os.Stderr
	start := time.Now()
	c, res, err := rawmcp.Dial(cmd, "agent-box-demo")
	check(err)
	info, _ := res["serverInfo"].(map[string]any)
	fmt.Printf("(connected to %v %v, pid %d, in %s)\n", info["name"], info["version"], cmd.Process.Pid, time.Since(start).Round(time.Millisecond))
	return c
}

func call(c *rawmcp.Conn, tool string, args map[string]any) {
	var a strings.Builder
	enc := json.NewEncoder(&a)
	enc.SetEscapeHTML(false)
	enc.Encode(args)
	fmt.Printf("\n→ %s %s", tool, a.String())
	res, err := c.Call(tool, args)
	check(err)
	fmt.Println(indent(strings.TrimRight(res.Text(), "\n")))
	if res.IsError {
		fmt.Println("  (the tool reported an error)")
	}
}

func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent-box-demo:", err)
		os.Exit(1)
	}
}
