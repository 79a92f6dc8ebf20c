//go:build unix

package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// followWindowSize gives a pty run the terminal's size now and at each
// change (SIGWINCH), until ctx ends.
func (c *cmd) followWindowSize(ctx context.Context, r run, fd uintptr) {
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)
	for {
		c.resize(ctx, r, fd)
		select {
		case <-ctx.Done():
			return
		case <-winch:
		}
	}
}
