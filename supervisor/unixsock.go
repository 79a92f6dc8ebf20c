package supervisor

import (
	"fmt"
	"net"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// sunPathMax is the room in sockaddr_un.sun_path (unix(7)), less the NUL.
const sunPathMax = 107

// listenUnix binds a unix socket at path, through the directory's
// /proc/self/fd entry when the path is too long for sun_path (state dirs
// under deep home directories are).
func listenUnix(path string) (net.Listener, error) {
	addr, closeDir, err := shortPath(path)
	if err != nil {
		return nil, err
	}
	defer closeDir()
	ln, err := net.Listen("unix", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	// The file is removed by whoever removes the run directory; the
	// listener must not unlink it through a /proc path on close.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	return ln, nil
}

func dialUnix(path string) (net.Conn, error) {
	addr, closeDir, err := shortPath(path)
	if err != nil {
		return nil, err
	}
	defer closeDir()
	return net.Dial("unix", addr)
}

func shortPath(path string) (string, func(), error) {
	if len(path) <= sunPathMax {
		return path, func() {}, nil
	}
	fd, err := unix.Open(filepath.Dir(path), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, fmt.Errorf("opening %s: %w", filepath.Dir(path), err)
	}
	return fmt.Sprintf("/proc/self/fd/%d/%s", fd, filepath.Base(path)), func() { unix.Close(fd) }, nil
}

// acceptOn serves ln until it is closed: each connection is handled by
// handle, in a goroutine of its own counted in handlers. accepted is
// closed when it returns, so that after it no handler starts (the
// servers' Close waits for that, then for handlers).
func acceptOn(ln net.Listener, handlers *sync.WaitGroup, accepted chan<- struct{}, handle func(net.Conn)) {
	defer close(accepted)
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		handlers.Add(1)
		go handle(c)
	}
}
