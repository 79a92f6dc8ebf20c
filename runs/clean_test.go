package runs

import (
	"context"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/logframe"
	"github.com/agent-box/agent-box/logread"
	"github.com/agent-box/agent-box/runrecord"
)

// The count of a cleaned window is of the text shown: a framed window's
// chunks (its Content is made of them again) and a grep's lines.
func TestCleanWindowCountsWhatIsShown(t *testing.T) {
	t.Parallel()
	framed := logread.Window{
		Content: "[10%]x\r[20%]\n",
		Stdout:  "[10%]\r[20%]\n", Stderr: "x",
		Chunks: []logread.Chunk{{Stream: "stdout", Text: "[10%]"}, {Stream: "stderr", Text: "x"}, {Stream: "stdout", Text: "\r[20%]\n"}},
	}
	assert.Equal(t, 1, cleanWindow(&framed, logread.Before{Whole: true}), "the \\r of the last chunk")
	assert.Equal(t, "[10%]x[20%]\n", framed.Content, "Content is the cleaned chunks")
	assert.Equal(t, "[20%]\n", framed.Stdout)

	grep := logread.Window{Matches: []logread.Match{{Line: "\x1b[31mFAIL\x1b[0m x"}, {Line: "ok"}}}
	assert.Equal(t, 9, cleanWindow(&grep, logread.Before{Whole: true}))
	assert.Equal(t, "FAIL x", grep.Matches[0].Line)

	tail := Tail{Output: "a\rb\n", OutputChunks: []logread.Chunk{{Stream: "stdout", Text: "a"}, {Stream: "stdout", Text: "\rb\n"}}}
	assert.Equal(t, 1, tail.clean(logread.Before{Whole: true}))
	assert.Equal(t, "ab\n", tail.Output)
}

// cleanLog is a Manager over one ended run "r" whose log is log, framed or
// not.
func cleanLog(t *testing.T, log []byte, framed bool) *Manager {
	t.Helper()
	store := newStore(t)
	rec := record(store, "boot")
	code := 0
	rec.Exit = &runrecord.Exit{Code: &code, At: time.Now().UTC()}
	rec.OutputClosed = true
	if framed {
		rec.LogFormat, rec.CaptureMode = logframe.FormatName, "separate"
	}
	require.NoError(t, store.Create(rec))
	require.NoError(t, os.WriteFile(store.LogPath(rec.Name, rec.RunID), log, 0o600))
	rec.LogBytes = int64(len(log))
	require.NoError(t, store.Write(rec))
	return &Manager{Store: store, Sys: fakeSys(gone)}
}

// A clean window that begins inside an escape sequence does not show the
// sequence's tail as text (before: a window begun in a long CSI's
// parameters showed tens of KB of "999..."), whether the sequence began
// just before the window or further back than the window's look back.
func TestCleanWindowBeginsAfterTheSequenceItStartsIn(t *testing.T) {
	t.Parallel()
	csi := "\x1b[" + strings.Repeat("9", 40_000) + "m"
	osc := "\x1b]0;" + strings.Repeat("t", 30_000) + "\a"
	longCSI := "\x1b[" + strings.Repeat("9;", 3*logread.CleanLookback/2) + "m"
	longOSC := "\x1b]52;c;" + strings.Repeat("QUJD", logread.CleanLookback) + "\x1b\\"
	yes := true
	for _, c := range []struct {
		name   string
		log    string
		offset int // into the sequence that follows "before\n"
		want   string
	}{
		{"csi", "before\n" + csi + "after\n", 20_000, "after\n"},
		{"osc", "before\n" + osc + "after\n", 20_000, "after\n"},
		{"at its introducer", "before\n" + csi + "after\n", 1, "after\n"},
		{"csi longer than the look back", "before\n" + longCSI + "after\n", len(longCSI) - 100, "after\n"},
		{"osc longer than the look back", "before\n" + longOSC + "after\n", len(longOSC) - 100, "after\n"},
		{"text after a sequence", "before\n" + csi + strings.Repeat("x", 10) + "after\n", len(csi) + 5, "xxxxxafter\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := cleanLog(t, []byte(c.log), false)
			res, err := m.Tail(context.Background(), TailRequest{Name: "r", Offset: new(int64(len("before\n") + c.offset)), MaxBytes: new(logread.MaxWindow), Clean: &yes})
			require.NoError(t, err)
			assert.Equal(t, c.want, res.Window.Content)
		})
	}
	t.Run("process_wait's tail", func(t *testing.T) {
		m := cleanLog(t, []byte("before\n"+csi+"after\n"), false)
		res, err := m.Wait(context.Background(), WaitRequest{Names: []string{"r"}, Timeout: new(time.Duration), Clean: &yes})
		require.NoError(t, err)
		assert.Equal(t, "after\n", res.Tail.Output)
	})
	t.Run("framed", func(t *testing.T) {
		// The sequence is on stdout, split over frames; the window
		// begins at a frame inside it.
		var log []byte
		log = logframe.AppendFrames(log, logframe.Stdout, []byte("before\n"))
		for p := []byte(csi); len(p) > 0; p = p[min(len(p), 1000):] {
			log = logframe.AppendFrames(log, logframe.Stdout, p[:min(len(p), 1000)])
		}
		log = logframe.AppendFrames(log, logframe.Stderr, []byte("err\n"))
		log = logframe.AppendFrames(log, logframe.Stdout, []byte("after\n"))
		m := cleanLog(t, log, true)
		res, err := m.Tail(context.Background(), TailRequest{Name: "r", Offset: new(-int64(len(log) / 2)), MaxBytes: new(logread.MaxWindow), Clean: &yes})
		require.NoError(t, err)
		assert.Equal(t, "err\nafter\n", res.Window.Content)
	})
}

// Cleaning a framed window costs what its chunks hold, not a copy of the
// look back per chunk (before: each chunk appended to its stream's text
// of up to CleanLookback bytes, so a window of many small chunks copied
// the look back once per chunk). The chunks are small and interleaved, and stdout's run
// through a long open OSC, whose head a stream's look back must keep.
func TestCleanChunksCostsWhatTheChunksHold(t *testing.T) {
	before := logread.Before{
		Stdout: strings.Repeat("x", logread.CleanLookback),
		Stderr: strings.Repeat("y", logread.CleanLookback),
	}
	const n = 4000
	chunks := make([]logread.Chunk, 0, n+2)
	chunks = append(chunks, logread.Chunk{Stream: "stdout", Text: "\x1b]52;c;"})
	size := 0
	for i := range n {
		c := logread.Chunk{Stream: "stdout", Text: "QUJDRA"}
		if i%2 == 1 {
			c = logread.Chunk{Stream: "stderr", Text: "err \x1b[1mline\x1b[m\n"}
		}
		chunks = append(chunks, c)
		size += len(c.Text)
	}
	chunks = append(chunks, logread.Chunk{Stream: "stdout", Text: "\aafter\n"})
	work := make([]logread.Chunk, len(chunks))
	allocated := bytesAllocated(func() {
		copy(work, chunks)
		cleanChunks(work, before)
	})
	assert.Less(t, allocated, uint64(64*size+4*logread.CleanLookback), "bytes allocated cleaning %d bytes in %d chunks", size, len(chunks))
	var got []string
	for _, c := range work[len(work)-3:] {
		got = append(got, c.Text)
	}
	assert.Equal(t, []string{"", "err line\n", "after\n"}, got)
}

// bytesAllocated is how many bytes f allocates, measured as
// testing.AllocsPerRun counts allocations: on one P, so that little else
// runs meanwhile.
func bytesAllocated(f func()) uint64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	f() // warm up, as AllocsPerRun does
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	f()
	runtime.ReadMemStats(&m1)
	return m1.TotalAlloc - m0.TotalAlloc
}
