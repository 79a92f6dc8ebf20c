//go:build linux

package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/tools"
)

// Calls that wait hold a worker each; however many an agent makes at once,
// the calls that answer at once are still served: a process_kill never
// queues behind process_waits. Past tools.MaxBlockingCalls a wait is refused
// at once with a clear error instead of taking the last workers.
func TestWaitsDoNotStarveOtherCalls(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	s.OK("process_start", map[string]any{"name": "srv", "command": "sleep 600"})
	t.Cleanup(func() { s.Call("process_kill", map[string]any{"name": "srv", "signal": "KILL"}) })
	s.OK("process_start", map[string]any{"name": "term", "command": "echo hi", "pty": true, "wait_ms": 30000})

	const waits = tools.MaxBlockingCalls + 12
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	refused := make(chan string, waits)
	var wg sync.WaitGroup
	for i := range waits {
		wg.Go(func() {
			args := map[string]any{"name": "srv", "timeout_ms": 600000}
			tool := "process_wait"
			if i%2 == 1 {
				tool, args = "tail_log", map[string]any{"name": "srv", "wait_ms": 60000}
			}
			r, err := s.Session().CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
			if err == nil && r.IsError {
				refused <- r.Content[0].(*mcp.TextContent).Text
			}
		})
	}
	// The run cannot end before the kill below, so no wait returns before
	// it: exactly the calls past the bound are refused, whatever the order.
	for range waits - tools.MaxBlockingCalls {
		select {
		case text := <-refused:
			assert.Contains(t, text, "calls that wait are in progress")
		case <-ctx.Done():
			t.Fatal("the waits past the bound were not refused")
		}
	}
	// A screen's render can take long on a large terminal: it counts
	// among the calls that wait.
	scr := s.Call("tail_log", map[string]any{"name": "term", "screen": true})
	require.True(t, scr.IsError, "a screen with every slot for waits taken: %s", scr.Text)
	assert.Contains(t, scr.Text, "calls that wait are in progress")
	// A bound on a hang, not a timing assertion: starved behind the waits,
	// the kill would wait for them (10 minutes).
	kctx, kcancel := context.WithTimeout(ctx, time.Minute)
	defer kcancel()
	r, err := s.Session().CallTool(kctx, &mcp.CallToolParams{Name: "process_kill",
		Arguments: map[string]any{"name": "srv", "signal": "KILL"}})
	require.NoError(t, err, "process_kill queued behind %d waits", tools.MaxBlockingCalls)
	require.False(t, r.IsError)
	wg.Wait()
	select {
	case text := <-refused:
		t.Errorf("more waits refused than past the bound: %s", strings.SplitN(text, "\n", 2)[0])
	default:
	}
}
