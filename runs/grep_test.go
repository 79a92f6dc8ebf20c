package runs

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/logread"
	"github.com/agent-box/agent-box/runrecord"
)

// A finished run whose log is out.
func grepRun(t *testing.T, out string) *Manager {
	t.Helper()
	store := newStore(t)
	rec := record(store, "boot")
	code := 0
	rec.Exit = &runrecord.Exit{Code: &code, At: time.Now().UTC()}
	rec.OutputClosed = true
	require.NoError(t, store.Create(rec))
	require.NoError(t, os.WriteFile(store.LogPath(rec.Name, rec.RunID), []byte(out), 0o600))
	rec.LogBytes = int64(len(out))
	require.NoError(t, store.Write(rec))
	return &Manager{Store: store, Sys: fakeSys(gone)}
}

// tail_log's grep returns context lines when asked, and cuts every line
// of a text answer to GrepLineBytes; a base64 answer keeps lines whole.
func TestTailGrepContextAndLineCut(t *testing.T) {
	dump := strings.Repeat("x", 3*GrepLineBytes)
	m := grepRun(t, "a\nx.go:7: want 2\n--- FAIL: T ("+dump+")\nok\n")
	name := m.mustName(t)
	res, err := m.Tail(context.Background(), TailRequest{Name: name, Grep: "FAIL", Context: 1})
	require.NoError(t, err)
	ms := res.Window.Matches
	require.Len(t, ms, 3)
	assert.Equal(t, logread.Match{Offset: 2, Line: "x.go:7: want 2", Context: true, Group: true}, ms[0])
	assert.Len(t, ms[1].Line, GrepLineBytes)
	assert.Equal(t, len("--- FAIL: T ()")+len(dump), ms[1].Bytes)
	assert.Equal(t, "ok", ms[2].Line)

	res, err = m.Tail(context.Background(), TailRequest{Name: name, Grep: "FAIL", Exact: true})
	require.NoError(t, err)
	require.Len(t, res.Window.Matches, 1)
	assert.Zero(t, res.Window.Matches[0].Bytes, "whole")
}

func TestTailGrepContextIsChecked(t *testing.T) {
	m := grepRun(t, "a\n")
	name := m.mustName(t)
	for _, req := range []TailRequest{
		{Name: name, Grep: "a", Context: logread.MaxContext + 1},
		{Name: name, Context: 1},
	} {
		_, err := m.Tail(context.Background(), req)
		assert.ErrorIs(t, err, ErrInvalid, "%+v", req)
		assert.ErrorIs(t, err, logread.ErrBadRequest, "%+v: logread's rule", req)
	}
}

func (m *Manager) mustName(t *testing.T) string {
	t.Helper()
	rs, err := m.List("", false)
	require.NoError(t, err)
	require.Len(t, rs, 1)
	return rs[0].Name
}
