package tools

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// toolText returns the text of a tools/call result and whether it is an
// error result.
func toolText(t *testing.T, line string) (string, bool) {
	t.Helper()
	var m struct {
		Result *struct {
			Content []struct{ Text string }
			IsError bool
		}
	}
	require.NoError(t, json.Unmarshal([]byte(line), &m), line)
	require.NotNil(t, m.Result, line)
	require.NotEmpty(t, m.Result.Content, line)
	return m.Result.Content[0].Text, m.Result.IsError
}

// TestArgumentOfTheWrongType: the error names the argument and the type
// it must have in the schema's words, never our Go types
// ("json: cannot unmarshal string into Go struct field waitArgs.timeout_ms
// of type int64").
func TestArgumentOfTheWrongType(t *testing.T) {
	c := servePipe(t)
	c.initialize()
	for i, tc := range []struct{ tool, args, want string }{
		{"process_wait", `{"name":"x","timeout_ms":"5"}`, "timeout_ms must be an integer, not a string"},
		{"process_start", `{"name":"x","command":["a"]}`, "command must be a string, not an array"},
		{"process_list", `{"all":"yes"}`, "all must be true or false, not a string"},
		{"tail_log", `{"name":"x","max_bytes":1.5}`, "max_bytes must be an integer, not 1.5"},
		{"tail_log", `{"name":"x","offset":1e30}`, "offset 1e30 is out of range"},
		{"process_wait", `{"name":"x","timeout_ms":99999999999999999999}`, "timeout_ms 99999999999999999999 is out of range"},
		{"process_wait", `{"name":"x","timeout_ms":5.0}`, "timeout_ms must be written as an integer (5), not 5.0"},
		{"process_start", `{"name":"x","ready":{"http":"u","bogus":1}}`, `unknown field "ready.bogus" in the arguments (they are: log, tcp_port, http)`},
		// Matched exactly, as the schema does, also inside an object:
		// encoding/json would take "Log" for log.
		{"process_start", `{"name":"x","ready":{"Log":"up"}}`, `unknown field "ready.Log" in the arguments (they are: log, tcp_port, http)`},
		{"process_start", `{"name":"x","limits":{"MEMORY_MB":64}}`, `unknown field "limits.MEMORY_MB" in the arguments (they are: memory_mb, cpu_percent, pids)`},
		{"process_start", `{"name":"x","env":{"A":1}}`, "the values of env must be strings, not a number"},
		{"process_start", `{"name":"x","argv":["ls",2]}`, "the items of argv must be strings, not a number"},
		{"process_start", `{"name":"x","argv":"ls"}`, "argv must be an array of strings, not a string"},
		{"process_start", `{"name":"x","ready":{"tcp_port":"80"}}`, "ready.tcp_port must be an integer, not a string"},
		{"process_start", `{"name":"x","ready":"80"}`, "ready must be an object, not a string"},
		{"process_kill", `{"name":"x","grace_ms":true}`, "grace_ms must be an integer, not true or false"},
	} {
		r := c.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, i+1, tc.tool, tc.args))
		text, isErr := toolText(t, r)
		assert.True(t, isErr, r)
		assert.Equal(t, tc.want, text, "%s %s", tc.tool, tc.args)
		assert.NotContains(t, text, "Go struct", "%s %s", tc.tool, tc.args)
	}
	noRuns(t, c.state)
}

// TestUnknownToolListsTheTools: a misspelt tool name is a protocol error
// (MCP: "Unknown tools" are -32602) whose message lists the tools there
// are, so the caller can correct it without another tools/list.
func TestUnknownToolListsTheTools(t *testing.T) {
	c := servePipe(t)
	c.initialize()
	r := c.call(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"process_stat","arguments":{}}}`)
	var m struct {
		Error *struct {
			Code    int
			Message string
		}
	}
	require.NoError(t, json.Unmarshal([]byte(r), &m), r)
	require.NotNil(t, m.Error, r)
	assert.Equal(t, -32602, m.Error.Code)
	assert.Contains(t, m.Error.Message, `"process_stat"`)
	for _, tool := range []string{"process_start", "process_list", "process_wait", "tail_log", "process_kill", "process_write", "process_remove", "process_restart"} {
		assert.True(t, strings.Contains(m.Error.Message, tool), "%s missing from %q", tool, m.Error.Message)
	}
	// A call without a name is one of an unknown tool too.
	r = c.call(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"arguments":{}}}`)
	assert.Contains(t, errorOf(t, r), `unknown tool ""; the tools are: process_kill`)
	// mcp-go's other refusals of a call stay theirs: a 2026-07-28 call
	// whose _meta lacks what that revision requires gets the same answer
	// whether or not its tool exists.
	bad := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`
	known := errorOf(t, c.call(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"process_list","arguments":{},`+bad+`}}`))
	unknown := errorOf(t, c.call(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"nope","arguments":{},`+bad+`}}`))
	require.Contains(t, known, "_meta")
	assert.Equal(t, known, unknown)
}

// TestTypeWords covers the argument types none of today's tools has, so
// that one added later reads right too.
func TestTypeWords(t *testing.T) {
	type inner struct {
		Y int `json:"y"`
	}
	type args struct {
		Nested [][]string          `json:"nested"`
		Lists  map[string][]string `json:"lists"`
		In     *inner              `json:"in"`
	}
	for _, tc := range []struct{ json, want string }{
		{`{"nested":[["a"],"b"]}`, "the items of nested must be arrays of strings, not a string"},
		{`{"lists":{"k":[1]}}`, "lists must be an object whose values are arrays of strings"},
		{`{"in":{"y":"z"}}`, "in.y must be an integer, not a string"},
	} {
		var a args
		err := json.Unmarshal([]byte(tc.json), &a)
		require.Error(t, err, tc.json)
		assert.Equal(t, tc.want, argError(err, &a).Error(), tc.json)
	}
}
