//go:build linux

package cli

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/proc"
)

// The CLI numbers a signal as the box names it, for its exit status
// (128+N), without the box's package proc (it runs on macOS too): every
// name proc gives for 1..64 maps back to its number, and a name proc
// would not read back is not taken for a signal.
func TestLinuxSignalNumbersAsTheBoxNamesThem(t *testing.T) {
	for n := 1; n <= 64; n++ {
		name := proc.SignalName(unix.Signal(n))
		got, ok := linuxSignal(name)
		if !ok || got != n {
			t.Errorf("%s: got %d, %v; want %d", name, got, ok, n)
		}
	}
	for _, name := range []string{"TERM", "SIGRTMIN+0", "SIGRTMAX-0", "SIG0", "SIG65", "SIG+5", "SIGBOGUS", "SIGRTMAX-64"} {
		if n, ok := linuxSignal(name); ok {
			if pn, pok := proc.SignalNumber(name); !pok || int(pn) != n {
				t.Errorf("%s: read as %d, proc reads %d, %v", name, n, pn, pok)
			}
		}
	}
}
