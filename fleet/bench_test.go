package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/agent-box/agent-box/fleet"
	"github.com/agent-box/agent-box/session"
)

// answered is a box that gives one answer, made once.
type answered struct{ a session.Answer }

func (x answered) CallTool(context.Context, json.RawMessage, func([]byte)) (session.Answer, error) {
	return x.a, nil
}

// BenchmarkListTwentyBoxes is the fleet's own part of a process_list over
// 20 boxes of 5 runs each, answered from memory: the merge, without the
// sessions (docs/architecture/performance.md, "Many boxes").
func BenchmarkListTwentyBoxes(b *testing.B) {
	var boxes []fleet.Box
	for i := range 20 {
		fb := newFakeBox(fmt.Sprintf("b%02d", i))
		for j := range 5 {
			fb.start(fmt.Sprintf("run%d", j), i*10+j+1)
		}
		a, err := fb.CallTool(context.Background(), params("process_list", map[string]any{}, nil), nil)
		if err != nil {
			b.Fatal(err)
		}
		boxes = append(boxes, fleet.Box{Name: fb.name, Caller: answered{a}})
	}
	f, err := fleet.New(boxes)
	if err != nil {
		b.Fatal(err)
	}
	p := params("process_list", map[string]any{}, nil)
	b.ResetTimer()
	for range b.N {
		if _, err := f.CallTool(context.Background(), p, nil); err != nil {
			b.Fatal(err)
		}
	}
}
