package tools

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mark3labs/mcp-go/server"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/runs"
)

// TestOutputSchemasAcceptFailures: a client that checks structuredContent
// against the output schema also when isError is set (the TypeScript
// SDK's does) accepts a failed call's {"error": ...}; an answer that is
// neither a success's fields nor an error is still refused.
func TestOutputSchemasAcceptFailures(t *testing.T) {
	s := server.NewMCPServer("t", "0")
	(&Handlers{}).Register(s)
	tools := s.ListTools()
	require.Len(t, tools, 9)
	failed := fail(fmt.Errorf("%w: no run named x", runs.ErrNotFound))
	b, err := json.Marshal(failed.StructuredContent)
	require.NoError(t, err)
	var content any
	require.NoError(t, json.Unmarshal(b, &content))
	for name, tool := range tools {
		var schema jsonschema.Schema
		require.NoError(t, json.Unmarshal(tool.Tool.RawOutputSchema, &schema), name)
		rs, err := schema.Resolve(nil)
		require.NoError(t, err, name)
		require.NoError(t, rs.Validate(content), "%s: a failure's structured content %s", name, b)
		require.Error(t, rs.Validate(map[string]any{}), "%s: an empty answer", name)
	}
}
