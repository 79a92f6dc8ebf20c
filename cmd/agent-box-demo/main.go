// Command agent-box-demo shows agent-box doing its job: it speaks plain
// JSON-RPC to a local agent-box over pipes, starts a run, drops the
// connection by killing the server, reconnects with a new server, and lists,
// tails and waits for the run — printing each exchange readably.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
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
	c.call("process_start", map[string]any{
		"name":         "demo",
		"capture_mode": "framed",
		"command":      `for i in 1 2 3 4 5 6; do echo "step $i"; echo "warning $i" >&2; sleep 0.5; done; exit 3`,
	})
	c.call("tail_log", map[string]any{"name": "demo", "wait_ms": 2000})
	fmt.Println("\n=== the connection drops (agent-box is SIGKILLed, as when ssh dies)")
	c.kill()

	fmt.Println("\n=== connection 2: a new agent-box sees the run and its whole log")
	c = dial(*binary, *stateDir)
	c.call("process_list", map[string]any{})
	c.call("tail_log", map[string]any{"name": "demo", "offset": 0})
	c.call("process_wait", map[string]any{"name": "demo", "timeout_ms": 20000})
	c.call("tail_log", map[string]any{"name": "demo", "tail_lines": 3})
	c.close()
}

type conn struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	next int
}

func dial(binary, stateDir string) *conn {
	cmd := exec.Command(binary, "--state-dir", stateDir)
	in, err := cmd.StdinPipe()
	check(err)
	out, err := cmd.StdoutPipe()
	check(err)
	cmd.Stderr = os.Stderr
	check(cmd.Start())
	c := &conn{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 4<<20)}
	start := time.Now()
	res := c.request("initialize", map[string]any{
		"protocolVersion": "2025-06-18",
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "agent-box-demo", "version": "1"},
	})
	info, _ := res["serverInfo"].(map[string]any)
	fmt.Printf("(connected to %v %v, pid %d, in %s)\n", info["name"], info["version"], cmd.Process.Pid, time.Since(start).Round(time.Millisecond))
	c.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	return c
}

func (c *conn) send(msg map[string]any) {
	b, err := json.Marshal(msg)
	check(err)
	_, err = c.in.Write(append(b, '\n'))
	check(err)
}

func (c *conn) request(method string, params any) map[string]any {
	c.next++
	id := c.next
	c.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	for {
		line, err := c.out.ReadBytes('\n')
		check(err)
		var msg struct {
			ID     *int            `json:"id"`
			Result map[string]any  `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		check(json.Unmarshal(line, &msg))
		if msg.ID == nil || *msg.ID != id {
			continue // a notification
		}
		if msg.Error != nil {
			fmt.Fprintf(os.Stderr, "protocol error: %s\n", msg.Error)
			os.Exit(1)
		}
		return msg.Result
	}
}

func (c *conn) call(tool string, args map[string]any) {
	a, _ := json.Marshal(args)
	fmt.Printf("\n→ %s %s\n", tool, a)
	res := c.request("tools/call", map[string]any{"name": tool, "arguments": args})
	content, _ := res["content"].([]any)
	for _, x := range content {
		if m, ok := x.(map[string]any); ok && m["type"] == "text" {
			text, _ := m["text"].(string)
			fmt.Println(indent(strings.TrimRight(text, "\n")))
		}
	}
	if res["isError"] == true {
		fmt.Println("  (the tool reported an error)")
	}
}

func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }

func (c *conn) kill() {
	c.cmd.Process.Kill()
	c.cmd.Wait()
}

func (c *conn) close() {
	c.in.Close()
	c.cmd.Wait()
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent-box-demo:", err)
		os.Exit(1)
	}
}
