package runs

import (
	"context"
	"time"

	"golang.org/x/sys/unix"
)

// dirWatch wakes a waiter when something in a run directory changes: the
// supervisor appending to the log (IN_MODIFY) or replacing the record
// (rename: IN_MOVED_TO). It is what makes tail_log's wait_ms and
// process_wait event-driven instead of polling loops.
type dirWatch struct {
	fd int
}

// What a waiter wakes on: tail_log's follow needs the log's writes,
// process_wait only the record being replaced (a busy log must not wake it
// on every write).
const (
	watchOutput = unix.IN_MODIFY | unix.IN_MOVED_TO | unix.IN_CLOSE_WRITE | unix.IN_CREATE | unix.IN_DELETE_SELF
	watchRecord = unix.IN_MOVED_TO | unix.IN_DELETE_SELF
)

// watchDirs watches every one of dirs on one inotify instance. Without
// one (no instances left, a dir gone) its Wait sleeps briefly instead.
func watchDirs(mask uint32, dirs ...string) *dirWatch {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return &dirWatch{fd: -1}
	}
	for _, dir := range dirs {
		if _, err := unix.InotifyAddWatch(fd, dir, mask); err != nil {
			unix.Close(fd)
			return &dirWatch{fd: -1}
		}
	}
	return &dirWatch{fd: fd}
}

// recheck bounds every sleep: a supervisor that is SIGKILLed writes no
// event, so the state must be probed again now and then.
const recheck = time.Second

// pollFallback is the sleep when inotify is unavailable (no instances left).
const pollFallback = 25 * time.Millisecond

// Wait blocks until an event, d elapses (capped at recheck) or ctx ends.
func (w *dirWatch) Wait(ctx context.Context, d time.Duration) {
	if d > recheck {
		d = recheck
	}
	if d <= 0 {
		return
	}
	if w.fd < 0 {
		d = min(d, pollFallback)
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		return
	}
	deadline := time.Now().Add(d)
	for {
		slice := time.Until(deadline)
		if slice <= 0 || ctx.Err() != nil {
			return
		}
		// Short slices keep a cancelled context noticed promptly.
		slice = min(slice, 100*time.Millisecond)
		fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(slice.Milliseconds())+1)
		if err == unix.EINTR {
			continue
		}
		if n > 0 {
			// Drain the queue; what changed does not matter, only that
			// something did.
			var buf [4096]byte
			for {
				if k, _ := unix.Read(w.fd, buf[:]); k <= 0 {
					break
				}
			}
			return
		}
		if err != nil {
			return
		}
	}
}

// Close releases the watch; a nil watch (never made) is fine.
func (w *dirWatch) Close() {
	if w != nil && w.fd >= 0 {
		unix.Close(w.fd)
	}
}
