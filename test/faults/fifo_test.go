package faults

import (
	"errors"
	"os"
	"syscall"
	"testing"
	"time"
)

// release writes a line to the FIFO a child reads, once the child has it
// open: open(2) with O_NONBLOCK fails with ENXIO until a reader is there,
// so a child that died never hangs the test the way a blocking open would.
func release(t *testing.T, fifo string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			_, err = f.WriteString("go\n")
			f.Close()
			if err != nil {
				t.Fatalf("writing %s: %v", fifo, err)
			}
			return
		}
		if !errors.Is(err, syscall.ENXIO) {
			t.Fatalf("opening %s: %v", fifo, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("nobody reads %s: the child is gone", fifo)
		}
		// No event says a reader opened a FIFO; poll.
		time.Sleep(5 * time.Millisecond)
	}
}
