//go:build linux

package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
)

// A run killed by a real-time signal has that signal recorded: wait and
// logs -f exit 128+N, ps and MCP name it.
func TestSignalRealtimeExit(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	for _, tc := range []struct {
		name, sig, recorded string
		num                 int
	}{
		{"rt", "RTMIN", "SIGRTMIN", 34},
		{"rtmax", "RTMAX", "SIGRTMAX", 64},
		{"rtmid", "RTMAX-3", "SIGRTMAX-3", 61},
	} {
		_, errOut, code := agentBox(t, state, "start", tc.name, "--", "sh", "-c", "kill -s "+tc.sig+" $$")
		require.Equal(t, 0, code, errOut)
		out, errOut, code := agentBox(t, state, "wait", tc.name)
		assert.Equal(t, 128+tc.num, code, "wait %s: %s%s", tc.name, out, errOut)
		assert.Contains(t, out, "exited("+tc.recorded+")")
		_, errOut, code = agentBox(t, state, "logs", "-f", tc.name)
		assert.Equal(t, 128+tc.num, code, "logs -f %s: %s", tc.name, errOut)

		out, errOut, code = agentBox(t, state, "ps", "--json", tc.name)
		require.Equal(t, 0, code, errOut)
		var list struct {
			Runs []map[string]any `json:"runs"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &list))
		require.Len(t, list.Runs, 1)
		assert.Equal(t, "exited", list.Runs[0]["state"])
		assert.Equal(t, tc.recorded, list.Runs[0]["signal"])
		assert.NotContains(t, list.Runs[0], "exit_code", "ps --json, like process_list: no exit status, so no exit_code (absent, not null)")
	}

	s := connect(t, state)
	run := abtest.RunOf(t, s.OK("process_list", nil), "rt")
	assert.Equal(t, "exited", run["state"])
	assert.Equal(t, "SIGRTMIN", run["signal"])
}
