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

	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/runrecord"
)

func requestsManager(t *testing.T) *Manager {
	t.Helper()
	store, _, err := runrecord.Open(t.TempDir())
	require.NoError(t, err)
	return &Manager{Store: store, Sys: fakeSys(gone)}
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

// TestTimeLeft: a repeat's wait is what its call's bound has left since
// the first try began, never below 0, nor above the bound when the clock
// was set back.
func TestTimeLeft(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		began time.Time
		want  time.Duration
	}{
		{now, time.Minute},
		{now.Add(-20 * time.Second), 40 * time.Second},
		{now.Add(-time.Minute), 0},
		{now.Add(-time.Hour), 0},
		{now.Add(time.Hour), time.Minute}, // the clock was set back
	} {
		assert.Equal(t, c.want, timeLeft(time.Minute, c.began, now), "began %v", c.began.Sub(now))
	}
}

// onceJSON is an apply for Once that counts its calls and answers with
// what f returns, as JSON.
func onceJSON(t *testing.T, n *int, f func(ctx context.Context) (any, error)) func(context.Context) []byte {
	return func(ctx context.Context) []byte {
		*n++
		v, err := f(ctx)
		require.NoError(t, err)
		b, err := json.Marshal(v)
		require.NoError(t, err)
		return b
	}
}

// cancelled is a ctx that is done already: the client went away before
// the call's wait.
func cancelled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// TestRepeatOfACutWriteWaitsAgain: a write whose wait for output its
// ctx cut is stored cut; its repeat writes nothing again and waits for
// the output since the first write (here a line written after the cut),
// and its answer is the one a third try gets, without a third wait.
func TestRepeatOfACutWriteWaitsAgain(t *testing.T) {
	m := supervisedManager(t)
	_, err := m.Start(context.Background(), StartRequest{Name: "cat", Spec: Spec{Argv: []string{"cat"}, Cwd: "/", Stdin: "pipe"}})
	require.NoError(t, err)
	t.Cleanup(func() { m.Kill("cat", "", unix.SIGKILL, 0) })

	r := Repeatable{ID: "w", Tool: "process_write", Args: map[string]any{"name": "cat", "data": "hello\n"}}
	n := 0
	apply := onceJSON(t, &n, func(ctx context.Context) (any, error) {
		res, err := m.Write(ctx, WriteRequest{Name: "cat", Data: []byte("hello\n"), Wait: time.Minute, Await: Await{Until: "^world"}})
		return map[string]any{"written": res.Written, "output": res.Output.Window.Content, "matched": res.Output.Matched}, err
	})
	first, ran, err := m.Once(cancelled(), r, apply)
	require.NoError(t, err)
	assert.True(t, ran)
	assert.Contains(t, string(first), `"matched":false`)

	_, err = m.Write(context.Background(), WriteRequest{Name: "cat", Data: []byte("world\n")})
	require.NoError(t, err)
	again, ran, err := m.Once(context.Background(), r, apply)
	require.NoError(t, err)
	assert.True(t, ran, "the repeat did the wait")
	assert.JSONEq(t, `{"written":6,"output":"hello\nworld\n","matched":true}`, string(again), "hello written once, and waited for world")

	third, ran, err := m.Once(context.Background(), r, apply)
	require.NoError(t, err)
	assert.False(t, ran)
	assert.JSONEq(t, string(again), string(third))
	assert.Equal(t, 2, n, "the first try, the repeat that waited again")
}

// TestRepeatOfACutStartProbesAgain: a start whose ready wait its ctx cut
// is stored cut; its repeat starts no other run, and probes the first
// one again until it is ready.
func TestRepeatOfACutStartProbesAgain(t *testing.T) {
	m := supervisedManager(t)
	t.Cleanup(func() { m.Kill("srv", "", unix.SIGKILL, 0) })
	r := Repeatable{ID: "s", Tool: "process_start", Args: map[string]any{"name": "srv"}}
	n := 0
	apply := onceJSON(t, &n, func(ctx context.Context) (any, error) {
		return m.Start(ctx, StartRequest{Name: "srv",
			Spec: Spec{Argv: []string{"sh", "-c", "echo starting; read go; echo ready; exec sleep 30"}, Cwd: "/", Stdin: "pipe", Ready: &ReadyProbe{Log: "^ready"}},
		})
	})
	b, _, err := m.Once(cancelled(), r, apply)
	require.NoError(t, err)
	var first StartResult
	require.NoError(t, json.Unmarshal(b, &first))
	require.NotNil(t, first.ReadyResult)
	assert.False(t, first.Ready, "%+v", first.ReadyResult)

	_, err = m.Write(context.Background(), WriteRequest{Name: "srv", Data: []byte("go\n")})
	require.NoError(t, err)
	b, ran, err := m.Once(context.Background(), r, apply)
	require.NoError(t, err)
	assert.True(t, ran)
	var again StartResult
	require.NoError(t, json.Unmarshal(b, &again))
	require.NotNil(t, again.ReadyResult)
	assert.True(t, again.Ready, "%+v", again.ReadyResult)
	assert.Equal(t, first.Run.RunID, again.Run.RunID)
	ents, err := m.Store.List("srv", nil)
	require.NoError(t, err)
	assert.Len(t, ents, 1, "one run started")
	assert.Equal(t, 2, n)
}

// TestRepeatOfACutStartWaitsAgain: a start whose wait_ms wait its ctx
// cut is stored cut; its repeat starts no other run, and waits for the
// first one's end for what is left of wait_ms.
func TestRepeatOfACutStartWaitsAgain(t *testing.T) {
	m := supervisedManager(t)
	t.Cleanup(func() { m.Kill("job", "", unix.SIGKILL, 0) })
	r := Repeatable{ID: "j", Tool: "process_start", Args: map[string]any{"name": "job"}}
	n := 0
	apply := onceJSON(t, &n, func(ctx context.Context) (any, error) {
		return m.Start(ctx, StartRequest{Name: "job", WaitMS: 60000,
			Spec: Spec{Argv: []string{"sh", "-c", "read go; echo done"}, Cwd: "/", Stdin: "pipe"}})
	})
	b, _, err := m.Once(cancelled(), r, apply)
	require.NoError(t, err)
	var first StartResult
	require.NoError(t, json.Unmarshal(b, &first))
	assert.Equal(t, outcome.Running, first.Run.State)

	_, err = m.Write(context.Background(), WriteRequest{Name: "job", Data: []byte("go\n")})
	require.NoError(t, err)
	b, ran, err := m.Once(context.Background(), r, apply)
	require.NoError(t, err)
	assert.True(t, ran, "the repeat waited again")
	var again StartResult
	require.NoError(t, json.Unmarshal(b, &again))
	assert.Equal(t, first.Run.RunID, again.Run.RunID)
	assert.Equal(t, outcome.Exited, again.Run.State, "the end, waited for by the repeat")
	ents, err := m.Store.List("job", nil)
	require.NoError(t, err)
	assert.Len(t, ents, 1, "one run started")
}

// TestWaitAgainWithNoTimeLeftAnswersAtOnce: a repeat whose call's bound
// has passed since its first try began writes nothing and answers with
// the output there is, at once, as final.
func TestWaitAgainWithNoTimeLeftAnswersAtOnce(t *testing.T) {
	m := supervisedManager(t)
	res, err := m.Start(context.Background(), StartRequest{Name: "piped", Spec: Spec{Argv: []string{"cat"}, Cwd: "/", Stdin: "pipe"}})
	require.NoError(t, err)
	t.Cleanup(func() { m.Kill("piped", "", unix.SIGKILL, 0) })
	tr := &try{again: &cut{RunID: res.Run.RunID, Written: 3}, began: time.Now().Add(-time.Hour)}
	ctx := context.WithValue(context.Background(), tryKey{}, tr)
	w, err := m.Write(ctx, WriteRequest{Name: "piped", Data: []byte("x\n"), Wait: time.Minute, Await: Await{Until: "never"}})
	require.NoError(t, err)
	assert.Equal(t, 3, w.Written, "the first try's count")
	require.NotNil(t, w.Output)
	assert.False(t, w.Output.Matched)
	assert.Empty(t, w.Output.Window.Content, "nothing written again")
	assert.Nil(t, tr.cut, "its time was up: not cut")
}

// TestOnlyStartAndWriteWaitAgain: a cut answer of any other tool (none is
// cut, but an entry may be planted) is returned as it is: its call is
// never applied again.
func TestOnlyStartAndWriteWaitAgain(t *testing.T) {
	m := requestsManager(t)
	n := 0
	apply := func(ctx context.Context) []byte {
		n++
		cutShort(ctx, cut{RunID: "x"})
		return []byte(`{"content":[]}`)
	}
	r := Repeatable{ID: "k", Tool: "process_kill", Args: map[string]any{"name": "a"}}
	_, ran, err := m.Once(context.Background(), r, apply)
	require.NoError(t, err)
	assert.True(t, ran)
	_, ran, err = m.Once(context.Background(), r, apply)
	require.NoError(t, err)
	assert.False(t, ran)
	assert.Equal(t, 1, n)
}
