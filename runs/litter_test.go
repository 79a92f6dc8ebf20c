package runs

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/runrecord"
)

// litter plants what a start cut by a killed agent-box leaves: a
// ".new-<run id>" dir with a record naming supervisor sup.
func litter(t *testing.T, store *runrecord.Store, name string, sup int) string {
	t.Helper()
	id := runrecord.NewRunID(time.Now())
	dir := filepath.Join(store.Root, "runs", name, ".new-"+id)
	require.NoError(t, os.MkdirAll(dir, 0o700))
	rec := record(store, "boot")
	rec.Name, rec.RunID, rec.SupervisorPID, rec.SupervisorStartTime = name, id, sup, 1
	data, err := runrecord.Encode(rec)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "record.json"), data, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "supervisor.log"), nil, 0o600))
	return dir
}

// TestRemoveTakesAbandonedStarts: process_remove deletes the half-built
// run dirs of starts cut by a killed agent-box, and a name dir left with
// nothing in it; before (issue 9) nothing ever removed them. A start dir
// whose supervisor still lives is kept, nothing is done while another
// agent-box holds the name's lock, and a symlink planted under such a name
// is removed, never its target.
func TestRemoveTakesAbandonedStarts(t *testing.T) {
	store := newStore(t)
	const liveSup = 4242
	m := &Manager{Store: store, Sys: fakeSys(func(pid int, _ uint64) outcome.Liveness {
		if pid == liveSup {
			return outcome.Same
		}
		return outcome.Gone
	})}
	// A finished run of "a", beside two abandoned starts and a planted link.
	done := record(store, "boot")
	done.Name, done.LogPath = "a", store.LogPath("a", done.RunID)
	code := 0
	done.Exit = &runrecord.Exit{Code: &code, At: time.Now().UTC()}
	done.FinishedAt, done.OutputClosed = &done.Exit.At, true
	require.NoError(t, store.Create(done))
	dead := litter(t, store, "a", 31337)
	noRecord := filepath.Join(store.Root, "runs", "a", ".new-"+runrecord.NewRunID(time.Now().Add(time.Second)))
	require.NoError(t, os.Mkdir(noRecord, 0o700))
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "keep"), []byte("mine"), 0o600))
	link := filepath.Join(store.Root, "runs", "a", ".new-link")
	require.NoError(t, os.Symlink(outside, link))
	// "b" has nothing but a start whose supervisor lives; "c" only litter.
	live := litter(t, store, "b", liveSup)
	onlyLitter := litter(t, store, "c", 31337)

	// While another agent-box holds the lock, nothing is touched.
	unlock, err := store.LockName("c", time.Second)
	require.NoError(t, err)
	res, err := m.Remove("", "", true)
	require.NoError(t, err)
	assert.Len(t, res.Removed, 1, "a's finished run")
	assert.DirExists(t, onlyLitter, "removed under another's lock")
	unlock()

	_, err = m.Remove("", "", true)
	require.NoError(t, err)
	for _, p := range []string{dead, noRecord, link, onlyLitter, filepath.Join(store.Root, "runs", "a"), filepath.Join(store.Root, "runs", "c")} {
		assert.NoFileExists(t, p)
		assert.NoDirExists(t, p)
	}
	assert.DirExists(t, live, "a start whose supervisor lives")
	b, err := os.ReadFile(filepath.Join(outside, "keep"))
	require.NoError(t, err)
	assert.Equal(t, "mine", string(b), "the link's target")

	// A name freed this way can be locked (and so started) again.
	unlock, err = store.LockName("a", time.Second)
	require.NoError(t, err)
	unlock()
}

// TestLockSurvivesTheNameDirsRemoval: an agent-box that opened a name's
// lock before RemoveNameIfEmpty deleted it does not hold a lock that
// excludes nobody: it locks the new file instead, so two starts of one
// name never run at once.
func TestLockSurvivesTheNameDirsRemoval(t *testing.T) {
	store := newStore(t)
	unlock, err := store.LockName("x", time.Second)
	require.NoError(t, err)
	got := make(chan func(), 1)
	go func() {
		u, err := store.LockName("x", 10*time.Second)
		if err == nil {
			got <- u
		}
		close(got)
	}()
	// The waiter has opened the old lock file (and so waits on it) once
	// this process holds it twice: the removal below is then the one the
	// test is about, not one before the waiter's open.
	lockPath := filepath.Join(store.Root, "runs", "x", ".lock")
	for deadline := time.Now().Add(10 * time.Second); openCount(t, lockPath) < 2; time.Sleep(time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "the waiter never opened %s", lockPath)
	}
	removed, err := store.RemoveNameIfEmpty("x")
	require.NoError(t, err)
	require.True(t, removed)
	unlock()
	second, ok := <-got
	require.True(t, ok, "the waiting LockName failed")
	defer second()
	_, err = store.LockName("x", 0)
	assert.ErrorIs(t, err, runrecord.ErrLocked, "the waiter's lock must exclude a third")
}

// openCount is how many of this process's descriptors are open on path.
func openCount(t *testing.T, path string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	n := 0
	for _, e := range ents {
		if link, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && link == path {
			n++
		}
	}
	return n
}
