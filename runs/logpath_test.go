package runs

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/runrecord"
)

// The log is where the supervisor writes it, in the run's own directory,
// whatever path the record names: a state dir moved elsewhere still shows
// its logs, and a record edited to name another file is never read.
func TestLogIsReadFromTheRunDirNotTheRecordsPath(t *testing.T) {
	store := newStore(t)
	rec := record(store, "boot")
	code := 0
	rec.Exit = &runrecord.Exit{Code: &code, At: time.Now().UTC()}
	rec.OutputClosed = true
	elsewhere := filepath.Join(t.TempDir(), "foreign")
	require.NoError(t, os.WriteFile(elsewhere, []byte("not this run's output\n"), 0o600))
	rec.LogPath = elsewhere
	require.NoError(t, store.Create(rec))
	own := store.LogPath(rec.Name, rec.RunID)
	require.NoError(t, os.WriteFile(own, []byte("mine\n"), 0o600))
	rec.LogBytes = 5
	require.NoError(t, store.Write(rec))

	m := &Manager{Store: store, Sys: fakeSys(gone)}
	run, err := m.Get(rec.Name, "")
	require.NoError(t, err)
	assert.Equal(t, own, run.LogPath)
	res, err := m.Tail(context.Background(), TailRequest{Name: rec.Name, MaxBytes: new(1 << 10)})
	require.NoError(t, err)
	assert.Equal(t, "mine\n", res.Window.Content)
}
