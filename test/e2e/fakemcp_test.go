package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeMCPServerArg, as the test binary's only argument, makes it a stdio
// MCP server (TestMain) with one tool whose output schema has the type
// array agent-box's exit_code had: what the inspector's --strict lint must
// report (TestInspectorStrict shows that the lint runs).
const fakeMCPServerArg = "fake-mcp-server"

func fakeMCPServer() int {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &req) != nil || len(req.ID) == 0 {
			continue // a notification
		}
		reply := map[string]any{"jsonrpc": "2.0", "id": req.ID}
		switch req.Method {
		case "initialize":
			reply["result"] = map[string]any{
				"protocolVersion": req.Params.ProtocolVersion,
				"capabilities":    map[string]any{"tools": map[string]any{}},
				"serverInfo":      map[string]any{"name": "fake", "version": "1"},
			}
		case "tools/list":
			reply["result"] = map[string]any{"tools": []any{map[string]any{
				"name":        "nullable",
				"description": "has exit_code typed as agent-box's was before issue 14",
				"inputSchema": map[string]any{"type": "object"},
				"outputSchema": map[string]any{"type": "object", "properties": map[string]any{
					"exit_code": map[string]any{"type": []string{"integer", "null"}},
				}},
			}}}
		default:
			reply["error"] = map[string]any{"code": -32601, "message": "method not found: " + req.Method}
		}
		if out.Encode(reply) != nil {
			return 1
		}
	}
	return 0
}

// testBinary is the path of this test binary, to run it as a helper.
func testBinary(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	return exe
}
