package fleet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/fleet"
)

type toolDef struct {
	Name         string         `json:"name"`
	InputSchema  map[string]any `json:"inputSchema"`
	OutputSchema map[string]any `json:"outputSchema"`
}

func fleetOf(t *testing.T, n int) *fleet.Fleet {
	t.Helper()
	var boxes []fleet.Box
	for i := range n {
		boxes = append(boxes, fleet.Box{Name: fmt.Sprintf("box%d", i), Caller: newFakeBox("x")})
	}
	f, err := fleet.New(boxes)
	require.NoError(t, err)
	return f
}

func toolList(t *testing.T, f *fleet.Fleet) (map[string]toolDef, []string) {
	t.Helper()
	out, err := f.ToolList(realToolList(t))
	require.NoError(t, err)
	var l struct {
		Tools []toolDef `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(out, &l))
	m := map[string]toolDef{}
	var order []string
	for _, tl := range l.Tools {
		m[tl.Name] = tl
		order = append(order, tl.Name)
	}
	return m, order
}

func props(s map[string]any) map[string]any {
	p, _ := s["properties"].(map[string]any)
	return p
}

func TestToolList(t *testing.T) {
	var boxTools []toolDef
	var l struct {
		Tools []toolDef `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(realToolList(t), &l))
	boxTools = l.Tools
	require.NotEmpty(t, boxTools)

	f := fleetOf(t, 2)
	tools, order := toolList(t, f)
	var want []string
	for _, tl := range boxTools {
		want = append(want, tl.Name)
	}
	assert.Equal(t, want, order, "the box's tools, no more, in its order")
	for _, orig := range boxTools {
		tl := tools[orig.Name]
		in := tl.InputSchema
		assert.Equal(t, "object", in["type"], tl.Name)
		box, _ := props(in)["box"].(map[string]any)
		require.NotNil(t, box, "%s takes box", tl.Name)
		assert.Equal(t, "string", box["type"])
		assert.Equal(t, []any{"box0", "box1"}, box["enum"], tl.Name)
		for k := range props(orig.InputSchema) {
			assert.Contains(t, props(in), k, "%s keeps its arguments", tl.Name)
		}
		req, _ := in["required"].([]any)
		if tl.Name == "process_start" {
			assert.Contains(t, req, "box")
			for _, r := range orig.InputSchema["required"].([]any) {
				assert.Contains(t, req, r, "process_start keeps what it required")
			}
		} else {
			assert.NotContains(t, req, "box", tl.Name)
		}
		for _, s := range []map[string]any{tl.InputSchema, tl.OutputSchema} {
			if s == nil {
				continue
			}
			b, _ := json.Marshal(s)
			var js jsonschema.Schema
			require.NoError(t, json.Unmarshal(b, &js), tl.Name)
			_, err := js.Resolve(nil)
			require.NoError(t, err, "%s: a schema that resolves", tl.Name)
		}
		if orig.OutputSchema == nil {
			assert.Nil(t, tl.OutputSchema)
			continue
		}
		assert.Equal(t, orig.OutputSchema["type"], tl.OutputSchema["type"], tl.Name)
		if defs, ok := orig.OutputSchema["$defs"].(map[string]any); ok && defs["run"] != nil {
			run := tl.OutputSchema["$defs"].(map[string]any)["run"].(map[string]any)
			assert.Equal(t, map[string]any{"type": "string"}, props(run)["box"], "%s: a run says its box", tl.Name)
		}
	}
	_, hasDefs := tools["process_list"].OutputSchema["$defs"].(map[string]any)["run"]
	assert.True(t, hasDefs)
	for _, name := range []string{"process_list", "process_wait"} {
		u, _ := props(tools[name].OutputSchema)["unreachable"].(map[string]any)
		require.NotNil(t, u, "%s output has unreachable", name)
		assert.Equal(t, "array", u["type"])
	}
	names, _ := props(tools["process_wait"].InputSchema)["names"].(map[string]any)
	assert.Contains(t, names["description"], "NAME@BOX")

	// Many boxes: names said once, in the instructions, not in every tool.
	many := fleetOf(t, 21)
	tools, _ = toolList(t, many)
	for name, tl := range tools {
		box, _ := props(tl.InputSchema)["box"].(map[string]any)
		require.NotNil(t, box, name)
		assert.NotContains(t, box, "enum", name)
	}
	assert.Contains(t, many.Instructions(), "box0, box1, box2")
	assert.Contains(t, many.Instructions(), "box20.")
	tools, _ = toolList(t, fleetOf(t, 20))
	assert.Len(t, props(tools["tail_log"].InputSchema)["box"].(map[string]any)["enum"], 20)

	_, err := f.ToolList(json.RawMessage(`{"tools": 5}`))
	assert.Error(t, err)
}

func TestNewChecksNames(t *testing.T) {
	c := newFakeBox("x")
	for _, bad := range [][]string{{}, {"a", "a"}, {"a@b"}, {""}, {"-a"}, {"a b"}} {
		var boxes []fleet.Box
		for _, n := range bad {
			boxes = append(boxes, fleet.Box{Name: n, Caller: c})
		}
		_, err := fleet.New(boxes)
		assert.Error(t, err, "%q", bad)
	}
	f, err := fleet.New([]fleet.Box{{Name: "gpu-1.lab_2", Caller: c}, {Name: "B", Caller: c}})
	require.NoError(t, err)
	assert.Equal(t, []string{"gpu-1.lab_2", "B"}, f.Names())
}

// A caller who gives up gets its ctx's error, at once, whichever boxes
// the call was waiting on.
func TestCallerCancels(t *testing.T) {
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"tail_log", map[string]any{"box": "B", "name": "web"}},
		{"tail_log", map[string]any{"name": "web"}},
		{"process_kill", map[string]any{"name": "web"}},
		{"process_list", map[string]any{}},
		{"process_wait", map[string]any{"names": []string{"web@A", "db@B"}}},
		{"process_wait", map[string]any{"names": []string{"web", "db@B"}}},
		{"process_wait", map[string]any{"name": "web"}},
	} {
		t.Run(fmt.Sprintf("%s %v", c.tool, c.args), func(t *testing.T) {
			a, b := newFakeBox("A"), newFakeBox("B")
			a.start("web", 1)
			b.setHang(true)
			h := newHarness(t, a, b)
			h.f.Timeout = time.Minute // only the caller ends this call
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ch := make(chan error, 1)
			go func() {
				_, err := h.f.CallTool(ctx, params(c.tool, c.args, nil), nil)
				ch <- err
			}()
			enter(t, b, "") // B got its call, whatever it was
			cancel()
			began := time.Now()
			select {
			case err := <-ch:
				assert.True(t, errors.Is(err, context.Canceled), "got %v", err)
			case <-time.After(5 * time.Second):
				t.Fatalf("CallTool still going %s after its ctx was cancelled", time.Since(began))
			}
		})
	}
}

// TestToolListCostsLittleMoreThanOneBoxs: one tool list for many boxes is
// about one box's: box adds a short property to each tool, its names once
// per tool up to 20 boxes, and none beyond (then the instructions say
// them). A model reads all of it at every session.
func TestToolListCostsLittleMoreThanOneBoxs(t *testing.T) {
	list := realToolList(t)
	var compact bytes.Buffer
	require.NoError(t, json.Compact(&compact, list))
	for _, c := range []struct{ boxes, most int }{{2, 1400}, {20, 2700}, {100, 1200}} {
		var boxes []fleet.Box
		for i := range c.boxes {
			boxes = append(boxes, fleet.Box{Name: fmt.Sprintf("box%02d", i)})
		}
		f, err := fleet.New(boxes)
		require.NoError(t, err)
		out, err := f.ToolList(list)
		require.NoError(t, err)
		t.Logf("%d boxes: %d bytes, one box's %d", c.boxes, len(out), compact.Len())
		assert.LessOrEqual(t, len(out)-compact.Len(), c.most, "%d boxes", c.boxes)
	}
}
