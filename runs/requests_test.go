package runs

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/runrecord"
)

func requestsManager(t *testing.T) *Manager {
	t.Helper()
	store, _, err := runrecord.Open(t.TempDir())
	require.NoError(t, err)
	return &Manager{Store: store, Sys: &fakeSys{boot: "boot"}}
}

// TestOnceChecksTheID: a bad request id is ErrInvalid and applies nothing.
func TestOnceChecksTheID(t *testing.T) {
	m := requestsManager(t)
	for _, id := range []string{"", "../x", "a b", strings.Repeat("x", 65)} {
		_, _, err := m.Once(context.Background(), Repeatable{ID: id, Tool: "process_kill"}, func(context.Context) []byte {
			t.Fatal("applied")
			return nil
		})
		assert.ErrorIs(t, err, ErrInvalid, "%q", id)
	}
}

// TestOnceComparesArgumentsButNotSecrets: a repeat must bring the same
// arguments, but secret_env's values are not kept, even as a digest.
func TestOnceComparesArgumentsButNotSecrets(t *testing.T) {
	m := requestsManager(t)
	args := func(cmd, secret string) map[string]any {
		return map[string]any{"name": "a", "command": cmd, "secret_env": map[string]any{"TOKEN": secret}}
	}
	applied := 0
	apply := func(context.Context) []byte { applied++; return []byte(`{"content":[]}`) }
	_, first, err := m.Once(context.Background(), Repeatable{ID: "r", Tool: "process_start", Args: args("true", "s1")}, apply)
	require.NoError(t, err)
	assert.True(t, first)
	_, again, err := m.Once(context.Background(), Repeatable{ID: "r", Tool: "process_start", Args: args("true", "s2")}, apply)
	require.NoError(t, err)
	assert.False(t, again)
	_, _, err = m.Once(context.Background(), Repeatable{ID: "r", Tool: "process_start", Args: args("false", "s1")}, apply)
	assert.ErrorIs(t, err, ErrInvalid)
	assert.Equal(t, 1, applied)
}
