//go:build !unix

package cli

import "context"

// followWindowSize gives a pty run the terminal's size; without SIGWINCH
// a change is not seen.
func (c *cmd) followWindowSize(ctx context.Context, r run, fd uintptr) {
	c.resize(ctx, r, fd)
}
