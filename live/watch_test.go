package live

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// woken reports whether w was woken within a generous bound; a watch that
// missed its event would only wake on the next recheck.
func woken(w *Watch) bool {
	select {
	case <-w.wake:
		return true
	case <-time.After(10 * time.Second):
		return false
	}
}

// kernelWatches counts the watches the kernel holds on the hub's instance,
// as /proc/self/fdinfo lists them: the leak a forgotten inotify_rm_watch
// would leave, which the hub's own map cannot show.
func kernelWatches(t *testing.T, h *watchHub) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(h.fd))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), "inotify wd:")
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func touch(t *testing.T, dir string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("x")
	f.Close()
}

// A mask of its own, so that these tests' watches are not mixed with
// those of other tests of the package running at the same time.
const testMask = WatchOutput | unix.IN_ACCESS

func TestWatchersOfOneDirShareItsDescriptor(t *testing.T) {
	dir := t.TempDir()
	a := WatchDirs(testMask, dir)
	b := WatchDirs(testMask, dir)
	if a.hub == nil || a.hub != b.hub {
		t.Fatal("no shared inotify instance")
	}
	h := a.hub
	if got := h.watches(); got != 1 {
		t.Fatalf("two watchers of one dir hold %d descriptors, want 1", got)
	}
	// The first to let go must not take the second's watch with it.
	a.Close()
	touch(t, dir)
	if !woken(b) {
		t.Fatal("the remaining watcher was not woken after the other closed")
	}
	b.Close()
	if got, k := h.watches(), kernelWatches(t, h); got != 0 || k != 0 {
		t.Fatalf("after both closed the hub holds %d descriptors and the kernel %d watches, want 0", got, k)
	}
}

func TestWatchWakesOnlyItsOwnDirs(t *testing.T) {
	d1, d2 := t.TempDir(), t.TempDir()
	w1 := WatchDirs(testMask, d1)
	defer w1.Close()
	w2 := WatchDirs(testMask, d2)
	defer w2.Close()
	touch(t, d2)
	if !woken(w2) {
		t.Fatal("the watcher of the written dir was not woken")
	}
	// The event for d2 was dispatched before w2 woke; w1 had none.
	select {
	case <-w1.wake:
		t.Fatal("a write in another dir woke the watcher")
	default:
	}
}

func TestWatchOfARemovedDir(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "run")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	w := WatchDirs(testMask, dir)
	h := w.hub
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if !woken(w) {
		t.Fatal("removing the watched dir did not wake its watcher")
	}
	w.Close()
	// A new dir of the same path is a new inode and a new descriptor.
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	w = WatchDirs(testMask, dir)
	defer w.Close()
	touch(t, dir)
	if !woken(w) {
		t.Fatal("a watch of the re-made dir was not woken")
	}
	// A watch of a dir that is gone cannot be made: its Wait polls.
	gone := WatchDirs(testMask, filepath.Join(parent, "missing"))
	if gone.hub != nil {
		t.Fatal("a watch of a missing dir claims a hub")
	}
	if got := h.watches(); got != 1 {
		t.Fatalf("the hub holds %d descriptors, want 1 (the re-made dir)", got)
	}
}

// TestWatchChurnLeaksNothing is the soak of one waiter after another (each
// follow and wait call makes and closes one): descriptors, kernel watches
// and open files stay where they were.
func TestWatchChurnLeaksNothing(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	warm := WatchDirs(testMask, dirs[0])
	h := warm.hub
	warm.Close()
	fds := openFDs(t)
	n := 10000
	if testing.Short() {
		n = 1000
	}
	for i := range n {
		w := WatchDirs(testMask, dirs[i%3], dirs[(i+1)%3])
		if i%100 == 0 {
			touch(t, dirs[i%3])
			w.Wait(context.Background(), time.Millisecond)
		}
		w.Close()
	}
	if got, k := h.watches(), kernelWatches(t, h); got != 0 || k != 0 {
		t.Errorf("after %d watch/close cycles the hub holds %d descriptors and the kernel %d watches, want 0", n, got, k)
	}
	if got := openFDs(t); got > fds {
		t.Errorf("open files went from %d to %d over %d watch/close cycles", fds, got, n)
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("read failed") }

// A hub whose reader fails wakes its waiters, which then poll, closes its
// inotify instance instead of leaking it, and takes no new watch on it.
func TestBrokenHubClosesItsInstance(t *testing.T) {
	h := newHub(testMask)
	if h == nil {
		t.Skip("no inotify instance")
	}
	dir := t.TempDir()
	w := &Watch{wake: make(chan struct{}, 1)}
	if !h.add(w, []string{dir}) {
		t.Fatal("add")
	}
	h.read(failingReader{})
	if !woken(w) {
		t.Error("the waiter was not woken when its hub broke")
	}
	if !h.broken.Load() {
		t.Error("the hub does not say it is broken")
	}
	if fd := h.file.Fd(); fd != ^uintptr(0) {
		t.Errorf("the broken hub's inotify fd %d is still open", fd)
	}
	w.Close()
	if h.add(&Watch{wake: make(chan struct{}, 1)}, []string{dir}) {
		t.Error("a broken hub took a new watch")
	}
}

// watches is how many watch descriptors the hub holds.
func (h *watchHub) watches() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.byWD)
}
