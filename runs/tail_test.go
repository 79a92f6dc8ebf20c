package runs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/logread"
	"github.com/agent-box/agent-box/runrecord"
)

// tail_log without an offset reads the end, in whole lines, at most
// DefaultTailBytes; offset 0 still reads the start, a negative offset
// the last bytes, max_bytes more; grep, given no offset, searches from
// the start.
func TestTailReadsTheEndByDefault(t *testing.T) {
	t.Parallel()
	var log strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&log, "line %04d\n", i)
	}
	size := int64(log.Len())
	m := cleanLog(t, []byte(log.String()), false)
	tail := func(req TailRequest) logread.Window {
		t.Helper()
		req.Name = "r"
		res, err := m.Tail(context.Background(), req)
		require.NoError(t, err)
		return res.Window
	}

	w := tail(TailRequest{})
	assert.Equal(t, size, w.EndOffset)
	assert.Equal(t, int64(0), (size-w.Offset)%10, "whole lines: %d", w.Offset)
	assert.LessOrEqual(t, len(w.Content), DefaultTailBytes)
	assert.Greater(t, len(w.Content), DefaultTailBytes-10, "as many lines as fit")
	assert.True(t, strings.HasPrefix(w.Content, "line ") && strings.HasSuffix(w.Content, "line 4999\n"), "%.20q", w.Content)
	assert.Equal(t, []logread.Gap{{From: 0, Bytes: w.Offset}}, w.Skipped, "the output before it is said to exist")

	w = tail(TailRequest{Offset: new(int64(0))})
	assert.Equal(t, [2]int64{0, DefaultTailBytes}, [2]int64{w.Offset, w.EndOffset}, "offset 0 is the start")
	assert.True(t, strings.HasPrefix(w.Content, "line 0000\n"))

	w = tail(TailRequest{Offset: new(int64(-25))})
	assert.Equal(t, "4997\nline 4998\nline 4999\n", w.Content)

	w = tail(TailRequest{MaxBytes: new(logread.MaxWindow)})
	assert.Equal(t, [2]int64{0, size}, [2]int64{w.Offset, w.EndOffset}, "max_bytes asks for more")

	w = tail(TailRequest{Grep: "^line 000[12]$"})
	require.Len(t, w.Matches, 2, "grep searches from the start")
	assert.Equal(t, "line 0001", w.Matches[0].Line)
}

// ptyLog is a Manager over one ended pty run "r" of cols × rows whose
// log is log.
func ptyLog(t *testing.T, log string, cols, rows int) *Manager {
	t.Helper()
	store := newStore(t)
	rec := record(store, "boot")
	code := 0
	rec.Exit = &runrecord.Exit{Code: &code, At: time.Now().UTC()}
	rec.OutputClosed = true
	rec.Pty, rec.Cols, rec.Rows = true, cols, rows
	require.NoError(t, store.Create(rec))
	require.NoError(t, os.WriteFile(store.LogPath(rec.Name, rec.RunID), []byte(log), 0o600))
	rec.LogBytes = int64(len(log))
	require.NoError(t, store.Write(rec))
	return &Manager{Store: store, Sys: fakeSys(gone)}
}

// The terminal's size a screen renders at is the record's, which a run's
// own processes can write: a size agent-box never sets is refused, not
// rendered (a planted 65535x65535 would have the emulator allocate four
// billion cells). A large terminal replays less of the log, so that a
// screen costs about what the default one does.
func TestTailScreenOfAPlantedSize(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, size := range [][2]int{{65535, 65535}, {-1, 40}, {120, 0}} {
		_, err := ptyLog(t, "x\r\n", size[0], size[1]).Tail(ctx, TailRequest{Name: "r", Screen: true})
		require.ErrorIs(t, err, ErrRefused, "%v", size)
		assert.Contains(t, err.Error(), fmt.Sprintf("its terminal is %dx%d", size[0], size[1]))
	}
	long := strings.Repeat("x\r\n", ScreenReplayBytes)
	res, err := ptyLog(t, long, MaxCols, MaxRows).Tail(ctx, TailRequest{Name: "r", Screen: true})
	require.NoError(t, err)
	assert.LessOrEqual(t, res.Window.EndOffset-res.Window.Offset, screenReplay(MaxCols, MaxRows))
	assert.Less(t, screenReplay(MaxCols, MaxRows), int64(ScreenReplayBytes))
	assert.Equal(t, int64(ScreenReplayBytes), screenReplay(DefaultCols, DefaultRows))
}

// screen renders the end of a pty run's log at the run's size; a replay
// that begins after the log's start says it may miss rows, unless the
// screen was cleared within it.
func TestTailScreen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	log := "$ top\r\n\x1b[?1049h\x1b[H\x1b[2Jload 3\r\nPID\r\n\x1b[H\x1b[Jload 2\r\n\x1b[1;7H"
	res, err := ptyLog(t, log, 20, 6).Tail(ctx, TailRequest{Name: "r", Screen: true})
	require.NoError(t, err)
	require.NotNil(t, res.Screen)
	assert.Equal(t, []string{"load 2"}, res.Screen.Lines)
	assert.Equal(t, [4]int{20, 6, 1, 7}, [4]int{res.Screen.Cols, res.Screen.Rows, res.Screen.CursorRow, res.Screen.CursorCol})
	assert.False(t, res.Screen.Partial)
	assert.Equal(t, [2]int64{0, int64(len(log))}, [2]int64{res.Window.Offset, res.Window.EndOffset})
	assert.True(t, res.EOF)

	long := strings.Repeat("scrolled away\r\n", ScreenReplayBytes/15+100) + "last\r\n"
	res, err = ptyLog(t, long, 20, 6).Tail(ctx, TailRequest{Name: "r", Screen: true})
	require.NoError(t, err)
	assert.Equal(t, "last", res.Screen.Lines[len(res.Screen.Lines)-1])
	assert.True(t, res.Screen.Partial, "rows drawn before the replay may be missing")
	assert.Greater(t, res.Window.Offset, int64(len(long)-ScreenReplayBytes-1))
	assert.Equal(t, byte('\n'), long[res.Window.Offset-1], "the replay begins at a line")

	res, err = ptyLog(t, long+"\x1b[2J\x1b[Hclear\r\n", 20, 6).Tail(ctx, TailRequest{Name: "r", Screen: true})
	require.NoError(t, err)
	assert.Equal(t, []string{"clear"}, res.Screen.Lines)
	assert.False(t, res.Screen.Partial, "a clear within the replay: nothing before it shows")

	m := ptyLog(t, log, 20, 6)
	for _, req := range []TailRequest{
		{Grep: "x"}, {TailLines: new(3)}, {MaxBytes: new(10)}, {Exact: true}, {Clean: new(true)},
	} {
		req.Name, req.Screen = "r", true
		_, err := m.Tail(ctx, req)
		assert.ErrorIs(t, err, ErrInvalid, "%+v", req)
	}
	_, err = cleanLog(t, []byte("plain\n"), false).Tail(ctx, TailRequest{Name: "r", Screen: true})
	require.True(t, errors.Is(err, ErrInvalid), "%v", err)
	assert.Contains(t, err.Error(), "started without pty: true")
}
