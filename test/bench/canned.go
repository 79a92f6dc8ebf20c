package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/agent-box/agent-box/internal/rawmcp"
)

// cannedEnv, set to a file written by captureCanned, makes the bench
// program a canned box instead (main and TestMain check it first): an MCP
// stdio server answering from what a real box once said, so that a fleet
// of them costs connect's own work and almost nothing else. Its one
// argument is the box's index, which each run id it lists gets as a
// suffix: every box has runs of its own for connect to merge.
const cannedEnv = "AGENT_BOX_BENCH_CANNED"

// cannedAnswers are a real box's answers, as JSON-RPC results.
type cannedAnswers struct {
	Initialize json.RawMessage `json:"initialize"`
	Tools      json.RawMessage `json:"tools_list"`
	List       json.RawMessage `json:"process_list"` // with no arguments
}

// captureCanned asks a server on stateDir for its initialize, tools/list
// and process_list answers, and writes them to path for canned boxes.
func (b *bench) captureCanned(stateDir, path string) error {
	c, err := spawn(b.binary, stateDir)
	if err != nil {
		return err
	}
	defer c.close()
	var a cannedAnswers
	if err := c.Request("initialize", rawmcp.InitializeParams(clientName, rawmcp.ProtocolVersion), &a.Initialize); err != nil {
		return c.withStderr(err)
	}
	if err := c.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}); err != nil {
		return c.withStderr(err)
	}
	if err := c.Request("tools/list", map[string]any{}, &a.Tools); err != nil {
		return c.withStderr(err)
	}
	call := map[string]any{"name": "process_list", "arguments": map[string]any{}}
	if err := c.Request("tools/call", call, &a.List); err != nil {
		return c.withStderr(err)
	}
	data, err := json.Marshal(a)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// cannedBoxMain serves a canned box on stdin and stdout until stdin ends;
// it is the process's main, and returns its exit status.
func cannedBoxMain(file string, args []string) int {
	if err := cannedBox(file, args, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "canned box %s: %v\n", filepath.Base(file), err)
		return 1
	}
	return 0
}

// cannedBox answers each request read from r on w: initialize, tools/list
// and ping as the real box did, tools/call of process_list with the real
// box's list (its run ids suffixed with the box's index), any other tool
// with an error result, any other method with a JSON-RPC error.
// Notifications are read and dropped.
func cannedBox(file string, args []string, r io.Reader, w io.Writer) error {
	if len(args) != 1 || args[0] == "" || strings.ContainsAny(args[0], `"\`) {
		return fmt.Errorf("want one argument, the box's index (got %q)", args)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var a cannedAnswers
	if err := json.Unmarshal(data, &a); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	list, err := ownRunIDs(a.List, "-b"+args[0])
	if err != nil {
		return err
	}
	refused := []byte(`{"content":[{"type":"text","text":"a canned box answers process_list only"}],"isError":true}`)
	in := bufio.NewReaderSize(r, 64<<10)
	out := bufio.NewWriter(w)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 {
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params struct {
					Name string `json:"name"`
				} `json:"params"`
			}
			if jerr := json.Unmarshal(line, &m); jerr != nil {
				return fmt.Errorf("reading a request: %w", jerr)
			}
			if m.ID != nil {
				var result []byte
				switch m.Method {
				case "initialize":
					result = a.Initialize
				case "tools/list":
					result = a.Tools
				case "ping":
					result = []byte(`{}`)
				case "tools/call":
					result = refused
					if m.Params.Name == "process_list" {
						result = list
					}
				}
				if result != nil {
					fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", m.ID, result)
				} else {
					fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`+"\n", m.ID)
				}
				if err := out.Flush(); err != nil {
					return err
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// ownRunIDs is a process_list result with every run id in it, in the
// structured content and the text alike, suffixed with suffix.
func ownRunIDs(result json.RawMessage, suffix string) (json.RawMessage, error) {
	var l struct {
		StructuredContent struct {
			Runs []struct {
				RunID string `json:"run_id"`
			} `json:"runs"`
		} `json:"structuredContent"`
	}
	if err := json.Unmarshal(result, &l); err != nil {
		return nil, fmt.Errorf("the canned process_list: %w", err)
	}
	if len(l.StructuredContent.Runs) == 0 {
		return nil, errors.New("the canned process_list lists no run")
	}
	out := []byte(result)
	for _, r := range l.StructuredContent.Runs {
		if r.RunID == "" {
			return nil, errors.New("the canned process_list has a run without run_id")
		}
		out = bytes.ReplaceAll(out, []byte(r.RunID), []byte(r.RunID+suffix))
	}
	return out, nil
}
