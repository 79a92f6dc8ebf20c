package watch

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/session"
)

// waitFor polls cond until it holds (abtest.WaitFor builds only on Linux;
// this package builds on macOS too).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// recv is what the watch ended with, failing the test if it does not.
func recv(t *testing.T, ch <-chan Outcome) Outcome {
	t.Helper()
	select {
	case out := <-ch:
		return out
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not end")
		return Quiet
	}
}

// syncBuffer is a report or diagnostics read while a watch writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func opts(file string, boxes ...session.Tools) Options {
	return Options{Boxes: boxes, CursorFile: file, Report: &syncBuffer{}, Diag: &syncBuffer{},
		Poll: 20 * time.Millisecond, OwnerPoll: 5 * time.Millisecond, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}
}

// background runs a watch; its outcome comes on the channel.
func background(t *testing.T, o Options) <-chan Outcome {
	done := make(chan Outcome, 1)
	go func() {
		out, err := Run(context.Background(), o)
		assert.NoError(t, err)
		done <- out
	}()
	return done
}

func look(t *testing.T, o Options) (Outcome, string) {
	t.Helper()
	o.NoWait = true
	out, err := Run(context.Background(), o)
	require.NoError(t, err)
	return out, o.Report.(*syncBuffer).String()
}

func TestLine(t *testing.T) {
	code := func(n int) *int { return &n }
	for _, tc := range []struct {
		run  run
		want string
	}{
		{run{State: "exited", ExitCode: code(0)}, "exit code 0"},
		{run{State: "exited", ExitCode: code(3), TimedOut: true}, "exit code 3, timed out"},
		{run{State: "exited", Signal: "SIGTERM"}, "killed by SIGTERM"},
		{run{State: "exited", Signal: "SIGKILL", OOMKilled: true}, "out of memory (killed by SIGKILL)"},
		{run{State: "unknown", Reason: "supervisor lost\x1b[31m"}, "status unknown (supervisor lost [31m)"},
	} {
		assert.Equal(t, tc.want, status(tc.run))
	}
	assert.Equal(t, "agent-box: run build (id7) on dev ended: exit code 2 after 1m5s; last line: make: Error 2",
		line("dev", "build", "id7", "exit code 2", 65*time.Second, "make: Error 2"))
	assert.Equal(t, "agent-box: run t (id1) on dev ended: status unknown; no output",
		line("dev", "t", "id1", "status unknown", -1, ""))
	assert.Equal(t, 65*time.Second, duration(run{StartedAt: "2026-01-01T00:00:00Z", FinishedAt: "2026-01-01T00:01:05.2Z"}))
	assert.Equal(t, 250*time.Millisecond, duration(run{StartedAt: "2026-01-01T00:00:00Z", FinishedAt: "2026-01-01T00:00:00.25Z"}))
	assert.Equal(t, time.Duration(-1), duration(run{StartedAt: "2026-01-01T00:00:00Z"}))
}

func TestSanitize(t *testing.T) {
	assert.Equal(t, "done", sanitize("first\ndone\n\n  \r\n"))
	assert.Equal(t, "[31mred text bell", sanitize("\x1b[31mred\ttext\x07bell\u202e"), "tail_log cleans escapes; what is left is no control character")
	assert.Equal(t, "", sanitize("\n\x00\n"))
	long := sanitize(strings.Repeat("é", 300))
	assert.Equal(t, maxLastLine, len([]rune(long)))
	assert.True(t, strings.HasSuffix(long, "…"))
}

// A first watch starts from now; an end after it is reported once, by
// the next watch, even though no watch ran when it happened.
func TestReportsEachEndOnce(t *testing.T) {
	box := newFakeBox()
	box.start("old")
	box.end("old", 1, "old output")
	box.start("build")
	file := filepath.Join(t.TempDir(), "state", "cursor.json")

	out, report := look(t, opts(file, box.tools("dev")))
	assert.Equal(t, Quiet, out)
	assert.Empty(t, report, "a first watch reports nothing older than itself")
	fi, err := os.Stat(file)
	require.NoError(t, err, "a first watch saves its cursor at once")
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	di, err := os.Stat(filepath.Dir(file))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), di.Mode().Perm())

	box.end("build", 2, "compiling\nmake: *** [all] Error 2\n")
	out, report = look(t, opts(file, box.tools("dev")))
	assert.Equal(t, Reported, out)
	assert.Equal(t, "agent-box: run build (id3) on dev ended: exit code 2 after 1m5s; last line: make: *** [all] Error 2\n", report)

	out, report = look(t, opts(file, box.tools("dev")))
	assert.Equal(t, Quiet, out)
	assert.Empty(t, report, "the same end is not reported twice")
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("stderr closed") }

// The cursor moves only after the report was written: a report that
// could not be written is made again by the next watch.
func TestCursorOnlyAfterReport(t *testing.T) {
	box := newFakeBox()
	box.start("build")
	file := filepath.Join(t.TempDir(), "cursor.json")
	look(t, opts(file, box.tools("dev")))
	before, err := os.ReadFile(file)
	require.NoError(t, err)

	box.end("build", 0, "ok")
	o := opts(file, box.tools("dev"))
	o.NoWait, o.Report = true, failingWriter{}
	_, err = Run(context.Background(), o)
	require.Error(t, err)
	after, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after), "the cursor moved past a report never written")

	out, report := look(t, opts(file, box.tools("dev")))
	assert.Equal(t, Reported, out)
	assert.Contains(t, report, "run build (id1) on dev ended: exit code 0")
}

// A blocking watch waits on the running runs and wakes when one ends.
func TestBlockingWatchWakes(t *testing.T) {
	box := newFakeBox()
	box.start("build")
	file := filepath.Join(t.TempDir(), "cursor.json")
	o := opts(file, box.tools("dev"))
	o.Poll = time.Minute // it must wake on the end, not at a poll
	done := background(t, o)
	waitFor(t, "the watch to wait", func() bool { return box.count("process_wait") > 0 })
	box.end("build", 0, "fine")
	assert.Equal(t, Reported, recv(t, done))
	assert.Contains(t, o.Report.(*syncBuffer).String(), "run build (id1) on dev ended: exit code 0")
}

// A new watch on the same cursor file takes it over; the older one ends
// quietly, and the new one reports.
func TestNewestWatchWins(t *testing.T) {
	box := newFakeBox()
	box.start("build")
	file := filepath.Join(t.TempDir(), "cursor.json")
	oa, ob := opts(file, box.tools("dev")), opts(file, box.tools("dev"))
	a := background(t, oa)
	waitFor(t, "watch A to wait", func() bool { return box.count("process_wait") > 0 })
	b := background(t, ob)
	assert.Equal(t, Superseded, recv(t, a))
	assert.Empty(t, oa.Report.(*syncBuffer).String())
	box.end("build", 0, "fine")
	assert.Equal(t, Reported, recv(t, b))
	assert.Contains(t, ob.Report.(*syncBuffer).String(), "run build")
}

// Two watches that both saw the same end report it once between them:
// the second, under the lock, finds the cursor moved and looks again.
func TestOneReportUnderTheLock(t *testing.T) {
	box := newFakeBox()
	box.start("build")
	file := filepath.Join(t.TempDir(), "cursor.json")
	look(t, opts(file, box.tools("dev")))
	box.end("build", 0, "fine")

	// Both watches get the news before either reports it.
	var arrived sync.WaitGroup
	arrived.Add(2)
	var mu sync.Mutex
	looks := 0
	box.beforeChanges = func() {
		mu.Lock()
		looks++
		first := looks <= 2
		mu.Unlock()
		if first { // the first two looks meet; later ones pass
			arrived.Done()
			arrived.Wait()
		}
	}
	var reports [2]*syncBuffer
	var wg sync.WaitGroup
	for i := range reports {
		o := opts(file, box.tools("dev"))
		o.NoWait = true
		reports[i] = o.Report.(*syncBuffer)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := Run(context.Background(), o)
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	assert.Equal(t, 1, strings.Count(reports[0].String()+reports[1].String(), "run build"))
}

// A box that cannot be reached is said once per outage, and the other
// boxes are watched meanwhile.
func TestUnreachableBoxSaidOnce(t *testing.T) {
	down, up := newFakeBox(), newFakeBox()
	up.start("build")
	down.setDown(true)
	file := filepath.Join(t.TempDir(), "cursor.json")
	o := opts(file, down.tools("gone"), up.tools("dev"))
	done := background(t, o)
	waitFor(t, "several tries of the box down", func() bool { return down.count("process_list") >= 3 })
	waitFor(t, "the other box to be waited on", func() bool { return up.count("process_wait") > 0 })
	up.end("build", 1, "")
	assert.Equal(t, Reported, recv(t, done))
	diag := o.Diag.(*syncBuffer).String()
	assert.Equal(t, 1, strings.Count(diag, "gone:"), diag)
	assert.Contains(t, diag, "Connection refused")
	assert.Contains(t, o.Report.(*syncBuffer).String(), "run build (id1) on dev ended: exit code 1 after 1m5s; no output")
}

// A signal (ctx ending) ends the watch quietly, with nothing reported.
func TestEndsQuietlyOnCancel(t *testing.T) {
	box := newFakeBox()
	box.start("build")
	o := opts(filepath.Join(t.TempDir(), "cursor.json"), box.tools("dev"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Outcome, 1)
	go func() {
		out, err := Run(ctx, o)
		assert.NoError(t, err)
		done <- out
	}()
	waitFor(t, "the watch to wait", func() bool { return box.count("process_wait") > 0 })
	cancel()
	assert.Equal(t, Quiet, recv(t, done))
	assert.Empty(t, o.Report.(*syncBuffer).String())
}

// A signal that comes while a report is being made leaves it unmade, and
// the cursor where it was: the next watch reports the end.
func TestCancelledReportIsNotMade(t *testing.T) {
	box := newFakeBox()
	box.start("build")
	file := filepath.Join(t.TempDir(), "cursor.json")
	look(t, opts(file, box.tools("dev")))
	before, err := os.ReadFile(file)
	require.NoError(t, err)
	box.end("build", 0, "fine")

	ctx, cancel := context.WithCancel(context.Background())
	box.onTail = cancel
	o := opts(file, box.tools("dev"))
	o.NoWait = true
	out, err := Run(ctx, o)
	require.NoError(t, err)
	assert.Equal(t, Quiet, out)
	assert.Empty(t, o.Report.(*syncBuffer).String())
	after, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after))

	box.onTail = nil
	out, report := look(t, opts(file, box.tools("dev")))
	assert.Equal(t, Reported, out)
	assert.Contains(t, report, "run build")
}

// A saved cursor the box refuses (not a cursor: an edited file) is
// said, and the box is watched from now: the refused cursor is replaced.
func TestRefusedCursorStartsFromNow(t *testing.T) {
	box := newFakeBox()
	box.start("build")
	file := filepath.Join(t.TempDir(), "cursor.json")
	require.NoError(t, store{file}.write(cursors{Version: cursorsVersion, Cursors: map[string]string{"dev": "not-a-cursor", "other": "7"}}))

	o := opts(file, box.tools("dev"))
	out, report := look(t, o)
	assert.Equal(t, Quiet, out)
	assert.Empty(t, report)
	assert.Contains(t, o.Diag.(*syncBuffer).String(), "dev: the box does not take the saved cursor")
	c, err := store{file}.read()
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"dev": "1", "other": "7"}, c.Cursors, "another box's cursor stays")

	box.end("build", 0, "")
	out, report = look(t, opts(file, box.tools("dev")))
	assert.Equal(t, Reported, out)
	assert.Contains(t, report, "run build")
}

// A cursor file that is not one is the watch's failure, never taken as
// empty (which would skip what ended before it was spoiled).
func TestCorruptCursorFileFails(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cursor.json")
	require.NoError(t, os.WriteFile(file, []byte("{"), 0o600))
	o := opts(file, newFakeBox().tools("dev"))
	o.NoWait = true
	_, err := Run(context.Background(), o)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is not a cursor file")
}

// A box that refuses even the cursor it has just given (it cannot answer
// changed_since) is said once and tried again, not dropped and said at
// every look.
func TestBoxRefusingEveryCursorSaidOnce(t *testing.T) {
	box := newFakeBox()
	box.refuseCursors = true
	o := opts(filepath.Join(t.TempDir(), "cursor.json"), box.tools("old"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Outcome, 1)
	go func() {
		out, err := Run(ctx, o)
		assert.NoError(t, err)
		done <- out
	}()
	waitFor(t, "several looks", func() bool { return box.count("process_list") >= 10 })
	cancel()
	assert.Equal(t, Quiet, recv(t, done))
	diag := o.Diag.(*syncBuffer).String()
	assert.Equal(t, 1, strings.Count(diag, "\n"), diag)
}

// A watch that waits for the cursor file's lock, which another holds
// (stuck writing its report to a reader that stalls), ends at its signal.
func TestWaitForTheLockEndsOnCancel(t *testing.T) {
	box := newFakeBox()
	box.start("build")
	file := filepath.Join(t.TempDir(), "cursor.json")
	unlock, err := store{file}.lock(context.Background())
	require.NoError(t, err)
	defer unlock()
	o := opts(file, box.tools("dev"))
	o.NoWait = true
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Outcome, 1)
	go func() {
		out, err := Run(ctx, o)
		assert.NoError(t, err)
		done <- out
	}()
	// Its first call is made before it saves its first cursor, under the
	// lock.
	waitFor(t, "the watch to look", func() bool { return box.count("process_list") > 0 })
	cancel()
	assert.Equal(t, Quiet, recv(t, done))
}
