package live

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A Watch wakes a waiter when something in a run directory changes: the
// supervisor appending to the log (IN_MODIFY) or replacing the record
// (rename: IN_MOVED_TO). It is what makes tail_log's wait_ms and
// process_wait event-driven instead of polling loops.
//
// Every waiter of the process shares one inotify instance per mask (a
// watchHub) rather than making its own. Closing an inotify instance blocks
// for an SRCU grace period of the kernel's fsnotify teardown
// (performance.md, "Figures behind code
// comments"), which an instance per call put on the reply
// path of every follow and wait; inotify_rm_watch on a shared instance
// does not wait for one. Sharing also keeps a busy server far from
// fs.inotify.max_user_instances (128 by default, per user, across every
// process of that user).
type Watch struct {
	hub     *watchHub // nil: no inotify, Wait sleeps briefly instead
	entries []*watched
	wake    chan struct{} // capacity 1: "something changed", coalesced
}

// What a waiter wakes on: tail_log's follow needs the log's writes,
// process_wait only the record being replaced (a busy log must not wake it
// on every write). Each mask has its own instance, so that the record
// waiters' reader is not woken by log writes either.
const (
	WatchOutput = unix.IN_MODIFY | unix.IN_MOVED_TO | unix.IN_CLOSE_WRITE | unix.IN_CREATE | unix.IN_DELETE_SELF
	WatchRecord = unix.IN_MOVED_TO | unix.IN_DELETE_SELF
)

// WatchDirs watches every one of dirs. Without inotify (no instances left,
// a dir gone) its Wait sleeps briefly instead.
func WatchDirs(mask uint32, dirs ...string) *Watch {
	w := &Watch{wake: make(chan struct{}, 1)}
	hub := sharedHub(mask)
	if hub == nil || !hub.add(w, dirs) {
		return &Watch{}
	}
	return w
}

// recheck bounds every sleep: a supervisor that is SIGKILLed writes no
// event, so the state must be probed again now and then.
const recheck = time.Second

// pollFallback is the sleep when inotify is unavailable (no instances left).
const pollFallback = 25 * time.Millisecond

// Wait blocks until an event, d elapses (capped at recheck) or ctx ends.
// An event that came after WatchDirs and before Wait ends it at once, so a
// waiter that watches, re-reads and then waits misses nothing.
func (w *Watch) Wait(ctx context.Context, d time.Duration) {
	if d > recheck {
		d = recheck
	}
	if d <= 0 {
		return
	}
	if w.hub == nil || w.hub.broken.Load() {
		d = min(d, pollFallback)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.wake:
	case <-t.C:
	case <-ctx.Done():
	}
}

// Close releases the watch; a nil watch (never made) is fine. It does not
// block: the inotify instance stays open for the next waiter.
func (w *Watch) Close() {
	if w != nil && w.hub != nil {
		w.hub.release(w)
		w.hub = nil
	}
}

// A watchHub is one inotify instance and the goroutine that reads it,
// shared by every Watch of its mask in this process. The kernel gives a
// directory watched twice the same watch descriptor, so each descriptor
// has a count of the waiters that hold it; the last one to let go removes
// it.
type watchHub struct {
	mask   uint32
	fd     int
	file   *os.File    // fd, for the reader; closed when the reader stops
	broken atomic.Bool // the reader stopped: waiters poll

	mu   sync.Mutex
	byWD map[int32]*watched
}

// watched is one watch descriptor of a hub and the waiters on it.
type watched struct {
	wd   int32
	subs map[*Watch]int // waiter → how many of its dirs this is
}

// hubs are the process's hubs, one per mask, made on first use and kept
// for the life of the process (like the runtime's netpoller: the instance
// is the cheap part, its teardown the dear one).
var hubs struct {
	sync.Mutex
	m map[uint32]*watchHub
}

// sharedHub returns the hub of mask, making it if need be; nil when the
// kernel gives no instance (the next call tries again).
func sharedHub(mask uint32) *watchHub {
	hubs.Lock()
	defer hubs.Unlock()
	if h := hubs.m[mask]; h != nil && !h.broken.Load() {
		return h
	}
	// Non-blocking, so that os.NewFile hands reads to the runtime's poller
	// instead of pinning a thread; close-on-exec, so that no child (no
	// supervisor) inherits it.
	h := newHub(mask)
	if h == nil {
		return nil
	}
	if hubs.m == nil {
		hubs.m = map[uint32]*watchHub{}
	}
	hubs.m[mask] = h
	go h.read(h.file)
	return h
}

// newHub makes an inotify instance for mask; its reader is not started.
func newHub(mask uint32) *watchHub {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil
	}
	return &watchHub{mask: mask, fd: fd, file: os.NewFile(uintptr(fd), "inotify"), byWD: map[int32]*watched{}}
}

// add watches dirs for w; false (and nothing held) if one cannot be
// watched.
func (h *watchHub) add(w *Watch, dirs []string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.broken.Load() {
		return false // its fd is closed, and its number may be another's
	}
	w.hub = h
	for _, dir := range dirs {
		wd, err := unix.InotifyAddWatch(h.fd, dir, h.mask)
		if err != nil {
			h.releaseLocked(w)
			w.hub = nil
			return false
		}
		e := h.byWD[int32(wd)]
		if e == nil {
			e = &watched{wd: int32(wd), subs: map[*Watch]int{}}
			h.byWD[e.wd] = e
		}
		e.subs[w]++
		w.entries = append(w.entries, e)
	}
	return true
}

func (h *watchHub) release(w *Watch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.releaseLocked(w)
}

func (h *watchHub) releaseLocked(w *Watch) {
	for _, e := range w.entries {
		if e.subs[w]--; e.subs[w] <= 0 {
			delete(e.subs, w)
		}
		// An entry no longer in byWD was dropped on IN_IGNORED: the
		// kernel removed the watch itself (its directory went), and the
		// number may since have been given to another directory.
		if len(e.subs) == 0 && h.byWD[e.wd] == e {
			delete(h.byWD, e.wd)
			_, _ = unix.InotifyRmWatch(h.fd, uint32(e.wd))
		}
	}
	w.entries = nil
}

// read wakes the waiters of each event's descriptor, as src (the hub's
// file) yields them, until reading fails, which it does not in practice.
// Then every waiter polls, and the instance is closed: its waiters hold no
// descriptor any more (so none is removed from a reused fd number later),
// and the next sharedHub makes a new one.
func (h *watchHub) read(src io.Reader) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			h.mu.Lock()
			h.broken.Store(true)
			for wd, e := range h.byWD {
				e.wakeAll()
				delete(h.byWD, wd)
			}
			h.file.Close()
			h.mu.Unlock()
			return
		}
		h.dispatch(buf[:n])
	}
}

// dispatch wakes the waiters of every event in buf, a whole number of
// inotify_event records as read(2) returns them.
func (h *watchHub) dispatch(buf []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for len(buf) >= unix.SizeofInotifyEvent {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[0]))
		size := unix.SizeofInotifyEvent + int(ev.Len)
		if size > len(buf) {
			break
		}
		buf = buf[size:]
		if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
			// Events were lost: anyone may have missed theirs.
			for _, e := range h.byWD {
				e.wakeAll()
			}
			continue
		}
		e := h.byWD[ev.Wd]
		if e == nil {
			continue
		}
		e.wakeAll()
		if ev.Mask&unix.IN_IGNORED != 0 {
			delete(h.byWD, ev.Wd)
		}
	}
}

func (e *watched) wakeAll() {
	for w := range e.subs {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}
