package runs

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/runrecord"
)

// srvSpec is a server that says it is ready once told to on its stdin,
// started with a probe for that.
func srvSpec() Spec {
	return Spec{Argv: []string{"sh", "-c", "echo starting; read go; echo ready; exec sleep 30"}, Cwd: "/", Stdin: "pipe",
		Ready: &ReadyProbe{Log: "^ready"}}
}

// A restart probes the new run with the probe its run was started with,
// and answers once it passes, as process_start did: a request right after
// it reaches a server that is up.
func TestRestartWaitsForTheRecordedProbe(t *testing.T) {
	m := supervisedManager(t)
	t.Cleanup(func() { m.Kill("srv", "", unix.SIGKILL, 0) })
	spec := srvSpec()
	spec.Argv = []string{"sh", "-c", "echo starting; sleep 0.3; echo ready; exec sleep 30"}
	first, err := m.Start(context.Background(), StartRequest{Name: "srv", Spec: spec})
	require.NoError(t, err)
	require.NotNil(t, first.ReadyResult)
	require.True(t, first.Ready, "%+v", first.ReadyResult)

	res, err := m.Restart(context.Background(), RestartRequest{Name: "srv"})
	require.NoError(t, err)
	require.NotNil(t, res.ReadyResult, "the restart waited for no probe")
	assert.True(t, res.Ready, "%+v", res.ReadyResult)
	if assert.NotNil(t, res.Offset) {
		assert.EqualValues(t, len("starting\n"), *res.Offset)
	}
	assert.NotEqual(t, first.Run.RunID, res.Run.RunID)
	assert.Equal(t, first.Run.RunID, res.Previous.RunID)
}

// TestRepeatOfACutRestartRestartsOnce: a restart whose ready wait its ctx
// cut is stored cut; its repeat stops and starts nothing again, and
// probes the run the first try started until it is ready.
func TestRepeatOfACutRestartRestartsOnce(t *testing.T) {
	m := supervisedManager(t)
	t.Cleanup(func() { m.Kill("srv", "", unix.SIGKILL, 0) })
	orig, err := m.Start(cancelled(), StartRequest{Name: "srv", Spec: srvSpec()})
	require.NoError(t, err)
	r := Repeatable{ID: "r", Tool: "process_restart", Args: map[string]any{"name": "srv"}}
	n := 0
	apply := onceJSON(t, &n, func(ctx context.Context) (any, error) {
		return m.Restart(ctx, RestartRequest{Name: "srv", RequestID: "r"})
	})
	b, _, err := m.Once(cancelled(), r, apply)
	require.NoError(t, err)
	var first RestartResult
	require.NoError(t, json.Unmarshal(b, &first))
	require.NotNil(t, first.ReadyResult)
	assert.False(t, first.Ready, "%+v", first.ReadyResult)
	assert.True(t, first.Stopped)

	_, err = m.Write(context.Background(), WriteRequest{Name: "srv", Data: []byte("go\n")})
	require.NoError(t, err)
	b, ran, err := m.Once(context.Background(), r, apply)
	require.NoError(t, err)
	assert.True(t, ran)
	var again RestartResult
	require.NoError(t, json.Unmarshal(b, &again))
	require.NotNil(t, again.ReadyResult)
	assert.True(t, again.Ready, "%+v", again.ReadyResult)
	assert.Equal(t, first.Run.RunID, again.Run.RunID)
	assert.Equal(t, orig.Run.RunID, again.Previous.RunID)
	assert.True(t, again.Stopped)
	ents, err := m.Store.List("srv", nil)
	require.NoError(t, err)
	assert.Len(t, ents, 2, "one restart")
	assert.Equal(t, 2, n)
}

// A record's probe is checked as a request's before anything is stopped:
// one planted in the record (here a URL past the bound) refuses the
// restart.
func TestRestartChecksTheRecordedProbe(t *testing.T) {
	store := newStore(t)
	for _, p := range []ReadyProbe{
		{HTTP: "http://localhost/" + strings.Repeat("x", MaxPathBytes)},
		{Log: strings.Repeat("a", MaxGrepBytes+1)},
		{TCPPort: 70000},
		{Log: "a", TCPPort: 80},
	} {
		rec := record(store, "boot")
		rec.Name = "srv"
		rec.RunID = runrecord.NewRunID(time.Now().UTC())
		rec.LogPath = store.LogPath(rec.Name, rec.RunID)
		rec.Ready = &p
		require.NoError(t, store.Create(rec))
		_, err := goneManager(store).Restart(context.Background(), RestartRequest{Name: "srv"})
		assert.ErrorIs(t, err, ErrInvalid)
		assert.ErrorContains(t, err, "cannot be started again as it was: ")
		assert.ErrorContains(t, err, "ready")
	}
}
