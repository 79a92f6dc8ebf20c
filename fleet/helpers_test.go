package fleet_test

import (
	"context"
	"encoding/json"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/fleet"
)

// testTimeout is Fleet.Timeout in tests: a box that has not answered by
// then is unreachable, and a test waits about this long for it.
const testTimeout = 300 * time.Millisecond

// harness is a fleet of fake boxes, and the fleet's output schemas to
// check its answers against.
type harness struct {
	t       *testing.T
	f       *fleet.Fleet
	schemas map[string]*jsonschema.Resolved
}

func newHarness(t *testing.T, boxes ...*fakeBox) *harness {
	t.Helper()
	var fb []fleet.Box
	for _, b := range boxes {
		fb = append(fb, fleet.Box{Name: b.name, Caller: b})
	}
	return harnessOf(t, fb)
}

func harnessOf(t *testing.T, fb []fleet.Box) *harness {
	t.Helper()
	f, err := fleet.New(fb)
	require.NoError(t, err)
	f.Timeout = testTimeout
	return &harness{t: t, f: f, schemas: outputSchemas(t, f)}
}

// realToolList is a box's tools/list result, as agent-box answers it
// (regenerate: send tools/list to agent-box --state-dir DIR on stdin).
func realToolList(t *testing.T) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile("testdata/tools.json")
	require.NoError(t, err)
	return b
}

var schemaCache sync.Map

// outputSchemas are the output schemas of f's tool list, resolved.
func outputSchemas(t *testing.T, f *fleet.Fleet) map[string]*jsonschema.Resolved {
	t.Helper()
	list, err := f.ToolList(realToolList(t))
	require.NoError(t, err)
	if s, ok := schemaCache.Load(string(list)); ok {
		return s.(map[string]*jsonschema.Resolved)
	}
	var l struct {
		Tools []struct {
			Name         string             `json:"name"`
			OutputSchema *jsonschema.Schema `json:"outputSchema"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(list, &l))
	out := map[string]*jsonschema.Resolved{}
	for _, tl := range l.Tools {
		if tl.OutputSchema == nil {
			continue
		}
		rs, err := tl.OutputSchema.Resolve(nil)
		require.NoError(t, err, "output schema of %s", tl.Name)
		out[tl.Name] = rs
	}
	schemaCache.Store(string(list), out)
	return out
}

// reply is a tool call's result as a client reads it.
type reply struct {
	Text    string
	IsError bool
	SC      map[string]any
}

func (r reply) code() string {
	e, _ := r.SC["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func (r reply) message() string {
	e, _ := r.SC["error"].(map[string]any)
	m, _ := e["message"].(string)
	return m
}

func (r reply) run() map[string]any {
	m, _ := r.SC["run"].(map[string]any)
	return m
}

func (r reply) list(key string) []map[string]any {
	var out []map[string]any
	l, _ := r.SC[key].([]any)
	for _, x := range l {
		m, _ := x.(map[string]any)
		out = append(out, m)
	}
	return out
}

func (r reply) strings(key string) []string {
	var out []string
	l, _ := r.SC[key].([]any)
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

func params(tool string, args map[string]any, meta map[string]any) json.RawMessage {
	p := map[string]any{"name": tool, "arguments": args}
	if meta != nil {
		p["_meta"] = meta
	}
	b, _ := json.Marshal(p)
	return b
}

// call calls tool through the fleet and checks its answer is one: a
// tool result whose structured content fits the fleet's output schema.
func (h *harness) call(tool string, args map[string]any) reply {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return h.callWith(ctx, tool, args, nil, nil)
}

func (h *harness) callWith(ctx context.Context, tool string, args, meta map[string]any, progress func([]byte)) reply {
	h.t.Helper()
	ans, err := h.f.CallTool(ctx, params(tool, args, meta), progress)
	require.NoError(h.t, err, "%s %v", tool, args)
	require.Nil(h.t, ans.Error, "%s %v: a protocol error", tool, args)
	return h.decode(tool, ans.Result)
}

func (h *harness) decode(tool string, raw json.RawMessage) reply {
	h.t.Helper()
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool           `json:"isError"`
		SC      map[string]any `json:"structuredContent"`
	}
	require.NoError(h.t, json.Unmarshal(raw, &r), "%s: %s", tool, raw)
	require.Len(h.t, r.Content, 1, "%s: %s", tool, raw)
	require.Equal(h.t, "text", r.Content[0].Type)
	if rs := h.schemas[tool]; rs != nil {
		require.NoError(h.t, rs.Validate(r.SC), "%s: structured content does not fit the output schema: %s", tool, raw)
	}
	if r.IsError {
		e, _ := r.SC["error"].(map[string]any)
		require.NotNil(h.t, e, "%s: a failure without a structured error: %s", tool, raw)
		require.Equal(h.t, e["message"], r.Content[0].Text, "%s: a failure's text is its message", tool)
	}
	return reply{Text: r.Content[0].Text, IsError: r.IsError, SC: r.SC}
}

// enter waits until box b has got a call of tool ("": of any).
func enter(t *testing.T, b *fakeBox, tool string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case got := <-b.entered:
			if tool == "" || got == tool {
				return
			}
		case <-deadline:
			t.Fatalf("box %s never got %s", b.name, tool)
		}
	}
}
