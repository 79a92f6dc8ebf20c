package journal

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestMain doubles as a claimant in a process of its own: with
// JOURNAL_CLAIM=dir:id it claims id in the journal of dir, says "claimed"
// and blocks in the call until killed.
func TestMain(m *testing.M) {
	if v := os.Getenv("JOURNAL_CLAIM"); v != "" {
		dir, id, _ := strings.Cut(v, ":")
		j, err := Open(dir)
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		_, err = j.Do(context.Background(), call(id), func() Answer {
			fmt.Println("claimed")
			select {}
		})
		fmt.Println(err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func call(id string) Call {
	return Call{ID: id, Tool: "process_write", Fingerprint: Fingerprint([]byte(`{"data":"x"}`))}
}

func open(t *testing.T, state string) *Journal {
	t.Helper()
	j, err := Open(state)
	require.NoError(t, err)
	return j
}

// counted is an apply that counts its calls and answers answer.
func counted(n *atomic.Int32, answer string) func() Answer {
	return func() Answer { n.Add(1); return Answer{Body: []byte(answer)} }
}

// TestRepeatGetsTheFirstAnswer: two journals (two agent-box processes)
// on one state dir: the second Do of an id applies nothing and returns
// the first answer.
func TestRepeatGetsTheFirstAnswer(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	var n atomic.Int32
	a, err := open(t, state).Do(context.Background(), call("r1"), counted(&n, `{"content":[]}`))
	require.NoError(t, err)
	assert.False(t, a.Repeat)
	b, err := open(t, state).Do(context.Background(), call("r1"), counted(&n, `{"other":1}`))
	require.NoError(t, err)
	assert.True(t, b.Repeat)
	assert.JSONEq(t, string(a.Body), string(b.Body))
	assert.Nil(t, b.Cut)
	assert.True(t, a.Began.Equal(b.Began), "began %v, then %v", a.Began, b.Began)
	assert.EqualValues(t, 1, n.Load(), "applied twice")

	// Another id is another call.
	c, err := open(t, state).Do(context.Background(), call("r2"), counted(&n, `{}`))
	require.NoError(t, err)
	assert.False(t, c.Repeat)
	assert.EqualValues(t, 2, n.Load())
}

// TestCutAnswerIsSettledByItsRepeat: an answer stored cut comes back to
// a repeat with its Cut and the time its first try began (the claim's,
// on the box's clock, kept in the answer); the repeat's Settle makes its
// own answer the one a third try gets, still with the first try's time.
func TestCutAnswerIsSettledByItsRepeat(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	began := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	first := open(t, state)
	first.now = func() time.Time { return began }
	var n atomic.Int32
	a, err := first.Do(context.Background(), call("r"), func() Answer {
		n.Add(1)
		return Answer{Body: []byte(`{"cut":"body"}`), Cut: json.RawMessage(`{"run_id":"x","from":7}`)}
	})
	require.NoError(t, err)
	assert.False(t, a.Repeat)
	assert.Equal(t, began, a.Began)

	j := open(t, state) // another agent-box, later
	b, err := j.Do(context.Background(), call("r"), counted(&n, `{}`))
	require.NoError(t, err)
	assert.True(t, b.Repeat)
	assert.JSONEq(t, `{"cut":"body"}`, string(b.Body))
	assert.JSONEq(t, `{"run_id":"x","from":7}`, string(b.Cut))
	assert.True(t, began.Equal(b.Began), "began %v", b.Began)
	assert.EqualValues(t, 1, n.Load(), "a cut answer's call was applied again")

	require.NoError(t, j.Settle(call("r"), b.Began, Answer{Body: []byte(`{"final":true}`)}))
	c, err := open(t, state).Do(context.Background(), call("r"), counted(&n, `{}`))
	require.NoError(t, err)
	assert.True(t, c.Repeat)
	assert.JSONEq(t, `{"final":true}`, string(c.Body))
	assert.Nil(t, c.Cut, "a settled answer is final")
	assert.True(t, began.Equal(c.Began), "began %v", c.Began)
	assert.EqualValues(t, 1, n.Load())
}

// TestRepeatOfAnotherCallIsRefused: an id given to another tool, or with
// other arguments, is not answered with the first call's answer.
func TestRepeatOfAnotherCallIsRefused(t *testing.T) {
	t.Parallel()
	j := open(t, t.TempDir())
	var n atomic.Int32
	_, err := j.Do(context.Background(), call("r"), counted(&n, `{}`))
	require.NoError(t, err)
	other := call("r")
	other.Fingerprint = Fingerprint([]byte(`{"data":"y"}`))
	_, err = j.Do(context.Background(), other, counted(&n, `{}`))
	assert.ErrorIs(t, err, ErrOtherCall)
	other = call("r")
	other.Tool = "process_kill"
	_, err = j.Do(context.Background(), other, counted(&n, `{}`))
	assert.ErrorIs(t, err, ErrOtherCall)
	assert.EqualValues(t, 1, n.Load())
}

// TestRepeatWaitsForTheFirstTry: a repeat that comes while the first try
// runs waits for it (the waiting hook says it does, before the first try
// is let go) and gets its answer.
func TestRepeatWaitsForTheFirstTry(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	release, claimed := make(chan struct{}), make(chan struct{})
	var n atomic.Int32
	first := make(chan []byte, 1)
	go func() {
		a, err := open(t, state).Do(context.Background(), call("r"), func() Answer {
			n.Add(1)
			close(claimed)
			<-release
			return Answer{Body: []byte(`{"first":true}`)}
		})
		assert.NoError(t, err)
		first <- a.Body
	}()
	<-claimed
	j := open(t, state)
	waits := make(chan struct{}, 100)
	j.waiting = func() {
		select {
		case waits <- struct{}{}:
		default:
		}
	}
	second := make(chan []byte, 1)
	go func() {
		b, err := j.Do(context.Background(), call("r"), counted(&n, `{"second":true}`))
		assert.NoError(t, err)
		assert.True(t, b.Repeat)
		second <- b.Body
	}()
	<-waits // the repeat found the first try alive and waits
	close(release)
	assert.JSONEq(t, `{"first":true}`, string(<-first))
	assert.JSONEq(t, `{"first":true}`, string(<-second))
	assert.EqualValues(t, 1, n.Load())
}

// TestRepeatOfALiveClaimantGivesUp: a repeat waits at most Wait (or its
// ctx) for a first try that does not end, then says it is in progress.
func TestRepeatOfALiveClaimantGivesUp(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	release, claimed := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		open(t, state).Do(context.Background(), call("r"), func() Answer { close(claimed); <-release; return Answer{Body: []byte(`{}`)} })
	}()
	t.Cleanup(func() { close(release); <-done })
	<-claimed
	j := open(t, state)
	j.Wait = time.Millisecond
	var n atomic.Int32
	_, err := j.Do(context.Background(), call("r"), counted(&n, `{}`))
	assert.ErrorIs(t, err, ErrInProgress)
	j.Wait = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	j.waiting = cancel
	_, err = j.Do(ctx, call("r"), counted(&n, `{}`))
	assert.ErrorIs(t, err, ErrInProgress)
	assert.Zero(t, n.Load())
}

// TestDeadClaimantIsLost: the agent-box that claimed an id is SIGKILLed
// while it applies the call. While it lives a repeat waits for it; once
// it is dead (the kernel dropped its lock) and left no answer, a repeat
// says the answer is lost, and applies nothing.
func TestDeadClaimantIsLost(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "JOURNAL_CLAIM="+state+":r")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "claimed\n", line)

	j := open(t, state)
	j.Wait = time.Millisecond
	var n atomic.Int32
	_, err = j.Do(context.Background(), call("r"), counted(&n, `{}`))
	require.ErrorIs(t, err, ErrInProgress, "the claimant lives")

	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	r, err := j.Do(context.Background(), call("r"), counted(&n, `{}`))
	var lost *LostError
	require.ErrorAs(t, err, &lost)
	assert.True(t, r.Repeat)
	assert.Equal(t, cmd.Process.Pid, lost.PID)
	assert.Zero(t, n.Load(), "a lost call was applied again")
}

// TestClaimWithoutLockIsLost: a claim in place whose lock nobody holds
// (as a dead claimant leaves it, or a planter writes it) is lost, even
// when it names a live process (this one).
func TestClaimWithoutLockIsLost(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	j := open(t, state)
	e := j.self
	e.Version, e.ID, e.Tool, e.Fingerprint, e.At = version, "r", "process_write", call("r").Fingerprint, time.Now()
	b, err := json.Marshal(&e)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(state, Dir, "r.json"), b, 0o600))
	var n atomic.Int32
	_, err = j.Do(context.Background(), call("r"), counted(&n, `{}`))
	var lost *LostError
	require.ErrorAs(t, err, &lost)
	assert.Zero(t, n.Load())
}

// TestPlantedEntriesAreRefused: whatever a run puts at an id's entry, a
// call of that id neither follows it, nor blocks on it, nor reads a huge
// one, nor crashes on garbage, nor applies the call: it says the entry is
// not agent-box's.
func TestPlantedEntriesAreRefused(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	j := open(t, state)
	dir := filepath.Join(state, Dir)
	// A valid answer, to be reached only by following a symlink.
	var n atomic.Int32
	_, err := j.Do(context.Background(), call("real"), counted(&n, `{"real":true}`))
	require.NoError(t, err)
	require.NoError(t, os.Symlink(filepath.Join(dir, "real.json"), filepath.Join(dir, "symlink.json")))
	require.NoError(t, unix.Mkfifo(filepath.Join(dir, "fifo.json"), 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "dir.json"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "garbage.json"), []byte("{\"version\":1,\"id\":"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "wrongid.json"), []byte(`{"version":1,"id":"real","answer":{}}`), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cutclaim.json"), []byte(`{"version":1,"id":"cutclaim","cut":{}}`), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cutnull.json"), []byte(`{"version":1,"id":"cutnull","answer":{},"cut":null}`), 0o600))
	huge, err := os.Create(filepath.Join(dir, "huge.json"))
	require.NoError(t, err)
	require.NoError(t, huge.Truncate(MaxEntryBytes+1)) // sparse: nothing is read
	huge.Close()
	for _, id := range []string{"symlink", "fifo", "dir", "garbage", "wrongid", "cutclaim", "cutnull", "huge"} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := j.Do(ctx, call(id), counted(&n, `{}`))
		cancel()
		assert.ErrorIs(t, err, ErrForeign, id)
		assert.NotErrorIs(t, err, context.DeadlineExceeded, id)
	}
	assert.EqualValues(t, 1, n.Load(), "a call under a planted entry was applied")
}

// TestInvalidIDsAreRefused: an id that is not 1..64 bytes of
// [A-Za-z0-9._-] is refused before anything is made.
func TestInvalidIDsAreRefused(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	j := open(t, state)
	var n atomic.Int32
	for _, id := range []string{"", "../x", "a/b", "a b", "é", strings.Repeat("a", 65), "x\x00"} {
		_, err := j.Do(context.Background(), call(id), counted(&n, `{}`))
		assert.Error(t, err, "%q", id)
	}
	assert.Zero(t, n.Load())
	ents, err := os.ReadDir(filepath.Join(state, Dir))
	require.NoError(t, err)
	assert.Empty(t, ents)
	// The odd but valid ones are files of the journal's directory.
	for _, id := range []string{".", "..", strings.Repeat("a", 64), "A-z_0.9"} {
		_, err := j.Do(context.Background(), call(id), counted(&n, `{}`))
		assert.NoError(t, err, "%q", id)
	}
	ents, err = os.ReadDir(filepath.Join(state, Dir))
	require.NoError(t, err)
	assert.Len(t, ents, 4)
}

// TestPruneRemovesOldEntries: entries written over MaxAge ago go, newer
// ones and directories stay.
func TestPruneRemovesOldEntries(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	j := open(t, state)
	var n atomic.Int32
	for _, id := range []string{"old", "new"} {
		_, err := j.Do(context.Background(), call(id), counted(&n, `{}`))
		require.NoError(t, err)
	}
	dir := filepath.Join(state, Dir)
	require.NoError(t, os.Mkdir(filepath.Join(dir, "d.json"), 0o700))
	old := time.Now().Add(-MaxAge - time.Hour)
	for _, f := range []string{"old.json", "d.json"} {
		require.NoError(t, os.Chtimes(filepath.Join(dir, f), old, old))
	}
	j.Prune()
	_, err := os.Lstat(filepath.Join(dir, "old.json"))
	assert.True(t, errors.Is(err, os.ErrNotExist), "old entry kept: %v", err)
	for _, f := range []string{"new.json", "d.json"} {
		_, err := os.Lstat(filepath.Join(dir, f))
		assert.NoError(t, err, f)
	}
}

// FuzzEntry: whatever bytes an entry holds, a call of its id answers or
// fails at once, and applies nothing.
func FuzzEntry(f *testing.F) {
	f.Add([]byte(`{"version":1,"id":"r","tool":"process_write","fingerprint":"x","pid":1,"pid_start_time":1,"boot_id":"b","at":"2026-01-01T00:00:00Z","answer":{"content":[]}}`))
	f.Add([]byte(`{"version":1,"id":"r","answer":null}`))
	f.Add([]byte(`{"version":1,"id":"r","tool":"process_write","fingerprint":"x","at":"2026-01-01T00:00:00Z","answer":{},"cut":{"from":1}}`))
	f.Add([]byte(`{"version":2}`))
	f.Add([]byte(``))
	f.Add([]byte(`[`))
	state := f.TempDir()
	j, err := Open(state)
	require.NoError(f, err)
	j.Wait = time.Millisecond
	f.Fuzz(func(t *testing.T, b []byte) {
		require.NoError(t, os.WriteFile(filepath.Join(state, Dir, "r.json"), b, 0o600))
		applied := false
		_, _ = j.Do(context.Background(), call("r"), func() Answer { applied = true; return Answer{} })
		assert.False(t, applied)
	})
}

// TestSymlinkForTheDirIsRefused: a symlink planted as requests/ is not
// followed: the journal does not open.
func TestSymlinkForTheDirIsRefused(t *testing.T) {
	t.Parallel()
	state, elsewhere := t.TempDir(), t.TempDir()
	require.NoError(t, os.Symlink(elsewhere, filepath.Join(state, Dir)))
	_, err := Open(state)
	assert.ErrorContains(t, err, "symlink")
	ents, err := os.ReadDir(elsewhere)
	require.NoError(t, err)
	assert.Empty(t, ents)
}
