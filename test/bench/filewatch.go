package main

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// fileWatch is the follow baseline: an inotify watch of one file, read by
// poll(2), the least a reader of the log can do to learn that it grew.
type fileWatch struct {
	fd   int
	path string
}

func newFileWatch(path string) (*fileWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	if _, err := unix.InotifyAddWatch(fd, path, unix.IN_MODIFY); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("watching %s: %w", path, err)
	}
	return &fileWatch{fd: fd, path: path}, nil
}

// drain discards queued events.
func (w *fileWatch) drain() {
	var buf [4096]byte
	for {
		if n, _ := unix.Read(w.fd, buf[:]); n <= 0 {
			return
		}
	}
}

// grown waits until the file is larger than size and returns its size.
func (w *fileWatch) grown(size int64, limit time.Duration) (int64, error) {
	deadline := time.Now().Add(limit)
	for {
		fi, err := os.Stat(w.path)
		if err != nil {
			return 0, err
		}
		if fi.Size() > size {
			return fi.Size(), nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return 0, fmt.Errorf("%s did not grow past %d bytes in %s", w.path, size, limit)
		}
		fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, int(left.Milliseconds())+1); err != nil && err != unix.EINTR {
			return 0, err
		}
		w.drain()
	}
}

func (w *fileWatch) close() { unix.Close(w.fd) }
