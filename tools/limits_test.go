//go:build linux

package tools

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mark3labs/mcp-go/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/wire"
)

// TestSchemaBounds: every bound, enum and pattern an input schema states
// is the rule the server enforces. For each one the test sends a value just
// past it, which must be refused as invalid_argument naming the argument,
// and a value at it, which must not be refused for that argument. So a
// schema cannot tell the model a rule the server does not keep, nor keep
// quiet about one it does, for any bound the schema has.
func TestSchemaBounds(t *testing.T) {
	s := server.NewMCPServer("t", "0")
	(&Handlers{}).Register(s)
	c := servePipe(t)
	c.initialize()
	id := 0
	call := func(tool string, args map[string]any) (wire.Error, bool) {
		id++
		b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call",
			"params": map[string]any{"name": tool, "arguments": args}})
		require.NoError(t, err)
		line := c.call(string(b))
		if _, isErr := toolText(t, line); !isErr {
			return wire.Error{}, false
		}
		return toolError(t, line), true
	}
	checked := 0
	for _, tool := range slices.Sorted(maps.Keys(s.ListTools())) {
		var in jsonschema.Schema
		require.NoError(t, json.Unmarshal(s.GetTool(tool).Tool.RawInputSchema, &in))
		for path, prop := range properties(&in, "") {
			for _, b := range boundsOf(path, prop) {
				t.Run(fmt.Sprintf("%s.%s.%s", tool, path, b.keyword), func(t *testing.T) {
					arg := path[strings.LastIndex(path, ".")+1:]
					if b.past != nil {
						e, failed := call(tool, argsWith(tool, path, b.past))
						require.True(t, failed, "%s past its %s: accepted", path, b.keyword)
						assert.Equal(t, wire.InvalidArgument, e.Code, e.Message)
						assert.Contains(t, e.Message, arg)
					}
					if e, failed := call(tool, argsWith(tool, path, b.at)); failed {
						assert.False(t, e.Code == wire.InvalidArgument && strings.Contains(e.Message, arg),
							"%s at its %s refused: %s", path, b.keyword, e.Message)
					}
				})
				checked++
			}
		}
	}
	assert.Greater(t, checked, 40, "bounds found in the schemas")
}

// properties are the properties of s and of its object properties, by
// dotted path.
func properties(s *jsonschema.Schema, prefix string) map[string]*jsonschema.Schema {
	out := map[string]*jsonschema.Schema{}
	for name, p := range s.Properties {
		out[prefix+name] = p
		if p.Properties != nil {
			maps.Copy(out, properties(p, prefix+name+"."))
		}
	}
	return out
}

type bound struct {
	keyword  string
	past, at any // past is nil when no value is past the bound
}

// boundsOf are the bounds p, the property at path, states, each with a value past it and one at
// it.
func boundsOf(path string, p *jsonschema.Schema) []bound {
	var out []bound
	if p.Maximum != nil {
		out = append(out, bound{"maximum", int64(*p.Maximum) + 1, int64(*p.Maximum)})
	}
	if p.Minimum != nil {
		b := bound{"minimum", int64(*p.Minimum) - 1, int64(*p.Minimum)}
		if strings.HasPrefix(path, "limits.") && *p.Minimum == 1 {
			// A limit (cpu_percent, pids) of 0 is no limit, the same as
			// leaving it out: nothing is past its minimum.
			b.past = nil
		}
		out = append(out, b)
	}
	if p.MaxLength != nil {
		text := func(n int) string { return strings.Repeat("a", n) }
		if path == "ready.http" {
			// At its bound, the value must be valid otherwise: a URL.
			text = func(n int) string { return "http://h/" + strings.Repeat("a", n-len("http://h/")) }
		}
		out = append(out, bound{"maxLength", text(*p.MaxLength + 1), text(*p.MaxLength)})
	}
	if p.MaxItems != nil {
		items := func(n int) []string {
			var l []string
			for i := range n {
				l = append(l, fmt.Sprintf("x%d", i))
			}
			return l
		}
		out = append(out, bound{"maxItems", items(*p.MaxItems + 1), items(*p.MaxItems)})
	}
	if p.MaxProperties != nil {
		vars := func(n int) map[string]string {
			m := map[string]string{}
			for i := range n {
				m[fmt.Sprintf("V%d", i)] = "v"
			}
			return m
		}
		out = append(out, bound{"maxProperties", vars(*p.MaxProperties + 1), vars(*p.MaxProperties)})
	}
	if p.Pattern != "" {
		out = append(out, bound{"pattern", "-x", "x"})
	}
	if len(p.Enum) > 0 {
		out = append(out, bound{"enum", "no-such-value", p.Enum[0]})
	}
	return out
}

// argsWith are arguments that tool takes, with v at path: a run that
// does not exist (or a start that cannot launch its supervisor), and what
// the argument at path needs beside it.
func argsWith(tool, path string, v any) map[string]any {
	args := map[string]any{"name": "nobody"}
	switch tool {
	case "process_list":
		delete(args, "name")
	case "process_start":
		args["command"], args["cwd"] = "true", "/"
	case "process_write":
		args["data"] = "x"
	case "process_resize":
		args["cols"], args["rows"] = 80, 24
	}
	switch path {
	case "argv":
		delete(args, "command")
		v.([]string)[0] = "/bin/true"
	case "names":
		delete(args, "name")
	case "ready_timeout_s":
		args["ready"] = map[string]any{"log": "x"}
	case "context":
		args["grep"] = "x"
	case "until", "idle_ms":
		args["wait_ms"] = 1
	case "cols", "rows":
		if tool == "process_start" {
			args["pty"] = true
		}
	}
	if outer, inner, ok := strings.Cut(path, "."); ok {
		args[outer] = map[string]any{inner: v}
		return args
	}
	args[path] = v
	return args
}
