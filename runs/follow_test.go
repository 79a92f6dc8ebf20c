package runs

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/logframe"
	"github.com/agent-box/agent-box/logread"
	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/runrecord"
)

// runningLog makes a running run (its supervisor alive, so its log can
// still grow) whose log holds out, and a Manager that sees it.
func runningLog(t *testing.T, framed bool, out []byte) (*Manager, *runrecord.Store, *runrecord.Record) {
	t.Helper()
	store := newStore(t)
	rec := record(store, "boot")
	if framed {
		rec.CaptureMode, rec.LogFormat = "framed", logframe.FormatName
	}
	require.NoError(t, store.Create(rec))
	require.NoError(t, os.WriteFile(store.LogPath(rec.Name, rec.RunID), out, 0o600))
	m := &Manager{Store: store, Sys: fakeSys(alive)}
	return m, store, rec
}

// endRun records rec's exit with its output closed, as the supervisor
// does: the log can grow no more.
func endRun(store *runrecord.Store, rec *runrecord.Record, code int) error {
	rec.Exit = &runrecord.Exit{Code: &code, At: time.Now().UTC()}
	rec.OutputClosed = true
	return store.Write(rec)
}

func appendLog(store *runrecord.Store, rec *runrecord.Record, p []byte) error {
	f, err := os.OpenFile(store.LogPath(rec.Name, rec.RunID), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(p)
	return errors.Join(err, f.Close())
}

// Follow waits for a growing log, window after window, and ends with the
// window that reaches the end of a log that can grow no more.
func TestFollowGrowingLogToEOF(t *testing.T) {
	t.Parallel()
	m, store, rec := runningLog(t, false, []byte("a\n"))
	var out []byte
	var chunks []FollowChunk
	wrote := make(chan error, 1)
	start := time.Now()
	for ch, err := range m.Follow(context.Background(), FollowRequest{Name: rec.Name, Wait: 10 * time.Second}) {
		require.NoError(t, err)
		out = append(out, ch.Output...)
		chunks = append(chunks, ch)
		if len(chunks) == 1 {
			assert.False(t, ch.EOF, "the run can still write")
			go func() {
				// Later than the follower's next read, most often, so that
				// the bytes wake a waiting follower; either order must
				// give the same output.
				time.Sleep(50 * time.Millisecond)
				wrote <- errors.Join(appendLog(store, rec, []byte("b\n")), endRun(store, rec, 3))
			}()
		}
		require.Less(t, len(chunks), 10, "windows of a log that grows twice")
	}
	require.NoError(t, <-wrote) // and the writer is done with the store
	assert.Equal(t, "a\nb\n", string(out))
	last := chunks[len(chunks)-1]
	assert.True(t, last.EOF)
	assert.Equal(t, int64(4), last.Run.LogBytes)
	code, ok := last.Run.ShellStatus()
	assert.True(t, ok)
	assert.Equal(t, 3, code)
	assert.Less(t, time.Since(start), 5*time.Second, "woken by the writes, not by the 10 s wait")
}

// Follow ends once its context is done: at once after a window, and in
// the middle of a window's wait.
func TestFollowEndsOnCancel(t *testing.T) {
	t.Parallel()
	m, _, rec := runningLog(t, false, []byte("a\n"))

	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	for ch, err := range m.Follow(ctx, FollowRequest{Name: rec.Name, Wait: 10 * time.Second}) {
		require.NoError(t, err)
		assert.Equal(t, "a\n", string(ch.Output))
		n++
		cancel()
	}
	assert.Equal(t, 1, n, "windows after the cancel")

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	var chunks []FollowChunk
	for ch, err := range m.Follow(ctx, FollowRequest{Name: rec.Name, Wait: 10 * time.Second}) {
		require.NoError(t, err)
		chunks = append(chunks, ch)
		if len(chunks) == 1 {
			go func() {
				// The follower is then waiting for output that never comes.
				time.Sleep(50 * time.Millisecond)
				cancel()
			}()
		}
	}
	require.Len(t, chunks, 2)
	assert.Empty(t, chunks[1].Output)
	assert.False(t, chunks[1].EOF)
	assert.Less(t, time.Since(start), 5*time.Second, "ended by the cancel, not by the 10 s wait")
}

// With Wait 0 Follow reads what is written and ends, though the run can
// still write: it never spins on a log that does not grow.
func TestFollowWithoutWaitReadsWhatIsThere(t *testing.T) {
	t.Parallel()
	out := bytes.Repeat([]byte("x"), logread.MaxWindow+10)
	m, _, rec := runningLog(t, false, out)
	var got []byte
	n := 0
	for ch, err := range m.Follow(context.Background(), FollowRequest{Name: rec.Name}) {
		require.NoError(t, err)
		got = append(got, ch.Output...)
		n++
		require.Less(t, n, 10, "it does not end")
	}
	assert.Equal(t, out, got)
	assert.Equal(t, 2, n, "a full window and the rest")
}

// Both streams of a framed run come out byte for byte in the order they
// were written, across windows (more than logread.MaxWindow of frames),
// and a cut last frame is left out and counted.
func TestFollowFramedInterleavedIsTheWrittenOrder(t *testing.T) {
	t.Parallel()
	var log, want, stdout, stderr []byte
	write := func(s logframe.Stream, p []byte) {
		log = logframe.AppendFrames(log, s, p)
		want = append(want, p...)
		if s == logframe.Stdout {
			stdout = append(stdout, p...)
		} else {
			stderr = append(stderr, p...)
		}
	}
	// Not UTF-8, and a character split across the two streams.
	write(logframe.Stdout, []byte("out \xff\xfe \xe2\x82"))
	write(logframe.Stderr, []byte("\xac err\n"))
	big := bytes.Repeat([]byte("0123456789abcdef"), 40<<10) // 640 KiB, frames of 48 KiB
	for i := range 3 {
		write(logframe.Stream(1+i%2), big)
		write(logframe.Stderr, []byte("e\n"))
	}
	require.Greater(t, len(log), logread.MaxWindow)
	cut := []byte("1 QUJD") // a frame line the writer never ended
	m, store, rec := runningLog(t, true, append(log, cut...))
	require.NoError(t, endRun(store, rec, 0))

	var got []byte
	windows, cutAt := 0, -1
	for ch, err := range m.Follow(context.Background(), FollowRequest{Name: rec.Name}) {
		require.NoError(t, err)
		got = append(got, ch.Output...)
		windows++
		if ch.EOF {
			cutAt = ch.Cut
		}
	}
	assert.Greater(t, windows, 1)
	assert.True(t, bytes.Equal(want, got), "interleaved output differs from what was written")
	assert.Equal(t, len(cut), cutAt)

	// One stream alone is logread's decoded window, whose last (Final)
	// one keeps what a cut frame holds: today's logs --stream (reported
	// in issue 13's follow notes, not changed here).
	for stream, want := range map[string][]byte{"stdout": append(stdout, "ABC"...), "stderr": stderr} {
		got = nil
		for ch, err := range m.Follow(context.Background(), FollowRequest{Name: rec.Name, Stream: stream}) {
			require.NoError(t, err)
			got = append(got, ch.Output...)
		}
		assert.True(t, bytes.Equal(want, got), "%s differs from what was written", stream)
	}
}

// A stream alone needs a framed run, and is stdout or stderr.
func TestFollowStreamChecks(t *testing.T) {
	t.Parallel()
	m, _, rec := runningLog(t, false, []byte("a\n"))
	for _, stream := range []string{"stdout", "both"} {
		n := 0
		for _, err := range m.Follow(context.Background(), FollowRequest{Name: rec.Name, Stream: stream}) {
			assert.ErrorIs(t, err, ErrInvalid, "stream %q", stream)
			n++
		}
		assert.Equal(t, 1, n, "stream %q: yields its error alone", stream)
	}
}

func TestShellStatus(t *testing.T) {
	code := func(c int) *int { return &c }
	for _, c := range []struct {
		run    Run
		status int
		ok     bool
	}{
		{Run{ExitCode: code(0)}, 0, true},
		{Run{ExitCode: code(3)}, 3, true},
		{Run{Signal: "SIGKILL"}, 137, true},
		{Run{Signal: "SIGTERM"}, 143, true},
		{Run{Signal: "SIGNOTONE"}, 128, true},
		{Run{State: outcome.Running}, 0, false},
		{Run{State: outcome.Unknown}, 0, false},
	} {
		status, ok := c.run.ShellStatus()
		assert.Equal(t, c.status, status, "%+v", c.run)
		assert.Equal(t, c.ok, ok, "%+v", c.run)
	}
}
