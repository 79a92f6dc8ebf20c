package tools

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/mark3labs/mcp-go/server"
)

// A model reads every tool's description and input schema in every
// session: together they stay under 10 KB (compact JSON), whatever the
// tools grow.
func TestToolTextStaysWithinBudget(t *testing.T) {
	const budget = 10_000
	s := server.NewMCPServer("t", "0")
	(&Handlers{}).Register(s)
	total := 0
	for name, st := range s.ListTools() {
		var in bytes.Buffer
		if err := json.Compact(&in, st.Tool.RawInputSchema); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		n := len(st.Tool.Description) + in.Len()
		t.Logf("%-15s %5d bytes", name, n)
		total += n
	}
	t.Logf("total %d bytes", total)
	if total >= budget {
		t.Errorf("tool descriptions and input schemas are %d bytes, over the %d budget", total, budget)
	}
}

// TestToolListStaysWithinBudget: the whole of tools/list, output schemas
// and annotations too, is what a client loads into the model's context
// for every session.
func TestToolListStaysWithinBudget(t *testing.T) {
	const budget = 24_000
	s := server.NewMCPServer("t", "0")
	(&Handlers{}).Register(s)
	var tools []any
	for _, st := range s.ListTools() {
		tools = append(tools, st.Tool)
	}
	b, err := json.Marshal(map[string]any{"tools": tools})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("tools/list is %d bytes", len(b))
	if len(b) > budget {
		t.Errorf("tools/list is %d bytes, over the %d budget", len(b), budget)
	}
}
