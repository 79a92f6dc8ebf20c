package faults

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/runrecord"
)

// TestStartTakesAbandonedStarts: the half-built run dir an agent-box
// killed inside process_start leaves (runs/<name>/.new-<run id>; 13 of 100
// such kills did) is removed by the next start of that name; before
// (issue 9) nothing ever removed it.
func TestStartTakesAbandonedStarts(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	planted := plant(t, state, "again", func(r *runrecord.Record) {
		code := 0
		now := time.Now().UTC()
		r.Exit, r.FinishedAt, r.OutputClosed = &runrecord.Exit{Code: &code, At: now}, &now, true
	})
	nameDir := filepath.Dir((&runrecord.Store{Root: state}).RunDir("again", planted.RunID))
	cut := filepath.Join(nameDir, ".new-"+runrecord.NewRunID(time.Now()))
	require.NoError(t, os.Mkdir(cut, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(cut, "supervisor.log"), nil, 0o600))

	s := connect(t, state)
	s.OK("process_start", map[string]any{"name": "again", "command": "true"})
	assert.NoDirExists(t, cut, "the abandoned start's dir")
	s.OK("process_wait", map[string]any{"name": "again", "timeout_ms": 10000})
	s.OK("process_remove", map[string]any{"all_finished": true})
	assert.NoDirExists(t, nameDir, "a name with no run left")
}
