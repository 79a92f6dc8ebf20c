package runs

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/logframe"
)

// growing is a log that has grown to size of its bytes.
type growing struct {
	b    []byte
	size int
}

func (g *growing) ReadAt(p []byte, off int64) (int, error) {
	return copy(p, g.b[off:g.size]), nil
}

func never() bool { return false }

// The scanner matches a line whatever the reads split it into: a byte at
// a time, a character cut in two, the prompt that ends no line, and a
// framed log's stderr frame between two halves of a stdout line. The
// unterminated last line is matched as it stands when the reads end
// there (a prompt is such a line), so a byte at a time may match it
// before its newline comes.
func TestUntilScanAcrossReads(t *testing.T) {
	t.Parallel()
	frames := func(parts ...string) []byte {
		var b []byte
		for i, p := range parts {
			b = logframe.AppendFrames(b, logframe.Stream(1+i%2), []byte(p))
		}
		return b
	}
	framedLen := func(parts ...string) int64 { return int64(len(frames(parts...))) }
	for _, c := range []struct {
		name        string
		log         []byte
		framed      bool
		pattern     string
		whole, each int64 // where the match ends read whole, and a byte a read; -1: none
	}{
		{"prompt at the end", []byte("1\n>>> "), false, `>>> $`, 6, 6},
		{"a whole line", []byte("a\nREADY\nb\n"), false, `^READY$`, 8, 7},
		{"a line, not its start", []byte("a\nREADY\nb\n"), false, `^READY\n?b`, -1, -1},
		{"a character split", []byte("x\ncafé!\n"), false, `café!`, 9, 8},
		{"a prompt that was answered", []byte(">>> x\n"), false, `>>> $`, -1, 4},
		{"framed: stdout line around a stderr frame", frames("ab", "err\n", "cd\n"), true, `^abcd$`, framedLen("ab", "err\n", "cd\n"), framedLen("ab", "err\n", "cd\n")},
		{"framed: the stderr prompt", frames("", ">>> "), true, `^>>> $`, framedLen("", ">>> "), framedLen("", ">>> ")},
		{"framed: streams are not joined", frames("a", "b\n", "\n"), true, `ab`, -1, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			for step, want := range map[int]int64{len(c.log): c.whole, 1: c.each} {
				g := &growing{b: c.log}
				s := newUntilScan(regexp.MustCompile(c.pattern), 0, c.framed)
				got := int64(-1)
				for g.size < len(c.log) && got < 0 {
					g.size = min(g.size+step, len(c.log))
					var err error
					got, err = s.scan(g, int64(g.size), never)
					require.NoError(t, err)
				}
				assert.Equal(t, want, got, "reads of %d bytes", step)
			}
		})
	}
}

// A line longer than UntilLineBytes is matched by its end.
func TestUntilScanLongLine(t *testing.T) {
	t.Parallel()
	log := []byte(strings.Repeat("x", 3*UntilLineBytes) + "END")
	s := newUntilScan(regexp.MustCompile(`xEND$`), 0, false)
	end, err := s.scan(&growing{b: log, size: len(log)}, int64(len(log)), never)
	require.NoError(t, err)
	assert.Equal(t, int64(len(log)), end)
	assert.LessOrEqual(t, cap(s.line[0]), 2*UntilLineBytes+len(s.buf))
}

// tail_log with until returns once a line written in pieces matches, and
// its window ends with that line; the rest waits for the next call.
func TestTailUntilMatchesAcrossWrites(t *testing.T) {
	t.Parallel()
	m, store, rec := runningLog(t, false, []byte("2**64\n>"))
	wrote := make(chan error, 1)
	go func() {
		// Most often after the waiter's first read, whose ">" does not
		// match; either order must give the same answer.
		time.Sleep(50 * time.Millisecond)
		wrote <- appendLog(store, rec, []byte(">> \nmore"))
	}()
	start := time.Now()
	res, err := m.Tail(context.Background(), TailRequest{Name: rec.Name, Offset: new(int64(6)), Wait: 10 * time.Second, Await: Await{Until: `^>>> $`}})
	require.NoError(t, err)
	require.NoError(t, <-wrote)
	assert.True(t, res.Matched)
	assert.Equal(t, ">>> \n", res.Window.Content)
	assert.Equal(t, int64(6), res.Window.Offset)
	assert.Equal(t, int64(11), res.Window.EndOffset)
	assert.True(t, res.Window.Truncated, "more is past end_offset")
	assert.Less(t, time.Since(start), 5*time.Second, "woken by the write, not by wait_ms")
}

// until that never matches returns at wait_ms, with what there is.
func TestTailUntilNoMatchReturnsAtWait(t *testing.T) {
	t.Parallel()
	m, _, rec := runningLog(t, false, []byte("a\nb\n"))
	start := time.Now()
	res, err := m.Tail(context.Background(), TailRequest{Name: rec.Name, Wait: 300 * time.Millisecond, Await: Await{Until: `never`}})
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	assert.False(t, res.Matched)
	assert.Equal(t, "a\nb\n", res.Window.Content)
	assert.False(t, res.EOF)
}

// until that never matches returns when the run's output closes.
func TestTailUntilEndsWithTheRun(t *testing.T) {
	t.Parallel()
	m, store, rec := runningLog(t, false, []byte("a\n"))
	wrote := make(chan error, 1)
	go func() {
		time.Sleep(50 * time.Millisecond) // after the waiter's first read, most often
		wrote <- endRun(store, rec, 0)
	}()
	start := time.Now()
	res, err := m.Tail(context.Background(), TailRequest{Name: rec.Name, Wait: 10 * time.Second, Await: Await{Until: `never`}})
	require.NoError(t, err)
	require.NoError(t, <-wrote)
	assert.False(t, res.Matched)
	assert.True(t, res.EOF)
	assert.Less(t, time.Since(start), 5*time.Second)
}

// idle_ms returns once the output has been quiet that long after a byte,
// not before the first byte, and wait_ms caps it.
func TestTailIdle(t *testing.T) {
	t.Parallel()
	t.Run("after a burst", func(t *testing.T) {
		t.Parallel()
		m, store, rec := runningLog(t, false, nil)
		wrote := make(chan error, 1)
		go func() {
			time.Sleep(50 * time.Millisecond) // the waiter waits for the first byte, most often
			wrote <- appendLog(store, rec, []byte("x"))
		}()
		start := time.Now()
		res, err := m.Tail(context.Background(), TailRequest{Name: rec.Name, Wait: 10 * time.Second, Await: Await{Idle: 100 * time.Millisecond}})
		require.NoError(t, err)
		require.NoError(t, <-wrote)
		assert.Equal(t, "x", res.Window.Content)
		took := time.Since(start)
		assert.GreaterOrEqual(t, took, 150*time.Millisecond, "the byte, then 100 ms of quiet")
		assert.Less(t, took, 5*time.Second)
	})
	t.Run("none before the first byte", func(t *testing.T) {
		t.Parallel()
		m, _, rec := runningLog(t, false, []byte("old\n"))
		start := time.Now()
		res, err := m.Tail(context.Background(), TailRequest{Name: rec.Name, Offset: new(int64(4)), Wait: 300 * time.Millisecond, Await: Await{Idle: 10 * time.Millisecond}})
		require.NoError(t, err)
		assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "quiet with no new byte is not idle")
		assert.Empty(t, res.Window.Content)
	})
	t.Run("until first", func(t *testing.T) {
		t.Parallel()
		m, _, rec := runningLog(t, false, []byte("ok\n"))
		start := time.Now()
		res, err := m.Tail(context.Background(), TailRequest{Name: rec.Name, Wait: 10 * time.Second, Await: Await{Until: "ok", Idle: 5 * time.Second}})
		require.NoError(t, err)
		assert.True(t, res.Matched)
		assert.Less(t, time.Since(start), 4*time.Second)
	})
}

// A wait that until or idle_ms would end ends on cancel too.
func TestTailUntilEndsOnCancel(t *testing.T) {
	t.Parallel()
	m, _, rec := runningLog(t, false, []byte("a\n"))
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(50 * time.Millisecond) // while it waits, most often
		cancel()
	}()
	start := time.Now()
	res, err := m.Tail(ctx, TailRequest{Name: rec.Name, Wait: 10 * time.Second, Await: Await{Until: "never"}})
	require.NoError(t, err)
	assert.False(t, res.Matched)
	assert.Less(t, time.Since(start), 5*time.Second)
}

// until and idle_ms are checked once, before anything is read.
func TestAwaitChecks(t *testing.T) {
	t.Parallel()
	m, _, rec := runningLog(t, false, []byte("a\n"))
	tl := 3
	for _, c := range []struct {
		req  TailRequest
		want string
	}{
		{TailRequest{Await: Await{Until: "x"}}, "give wait_ms too"},
		{TailRequest{Wait: time.Second, Await: Await{Until: "("}}, "until is not a valid RE2 regular expression: error parsing regexp: missing closing ): `(`"},
		{TailRequest{Wait: time.Second, Await: Await{Until: strings.Repeat("a", MaxGrepBytes+1)}}, "until pattern is 4097 bytes, at most 4096"},
		{TailRequest{Wait: time.Second, Await: Await{Idle: MaxWait + time.Millisecond}}, "idle_ms 60001 is out of range 0..60000"},
		{TailRequest{Wait: time.Second, Await: Await{Idle: -time.Millisecond}}, "idle_ms -1 is out of range"},
		{TailRequest{Wait: time.Second, Grep: "a", Await: Await{Until: "a"}}, "without grep or tail_lines"},
		{TailRequest{Wait: time.Second, TailLines: &tl, Await: Await{Idle: time.Second}}, "without grep or tail_lines"},
		{TailRequest{Wait: time.Second, Offset: new(int64(-1)), Await: Await{Until: "a"}}, "give offset >= 0"},
	} {
		c.req.Name = rec.Name
		_, err := m.Tail(context.Background(), c.req)
		assert.ErrorIs(t, err, ErrInvalid)
		assert.ErrorContains(t, err, c.want)
	}
}

// An offset past the end of the log is refused at once, not after the wait.
func TestTailUntilOffsetPastTheEnd(t *testing.T) {
	t.Parallel()
	m, _, rec := runningLog(t, false, []byte("a\n"))
	start := time.Now()
	_, err := m.Tail(context.Background(), TailRequest{Name: rec.Name, Offset: new(int64(10)), Wait: 10 * time.Second, Await: Await{Until: "x"}})
	assert.ErrorIs(t, err, ErrInvalid)
	assert.Less(t, time.Since(start), 5*time.Second)
}

// A long scan stops between reads when told, and goes on from there.
func TestUntilScanStopsAndGoesOn(t *testing.T) {
	t.Parallel()
	log := []byte(strings.Repeat("x\n", 100<<10) + "END\n")
	g := &growing{b: log, size: len(log)}
	s := newUntilScan(regexp.MustCompile(`^END$`), 0, false)
	reads := 0
	end, err := s.scan(g, int64(len(log)), func() bool { reads++; return reads > 1 })
	require.NoError(t, err)
	assert.Equal(t, int64(-1), end, "stopped after one read")
	assert.Equal(t, int64(len(s.buf)), s.pos)
	end, err = s.scan(g, int64(len(log)), never)
	require.NoError(t, err)
	assert.Equal(t, int64(len(log)), end)
}
