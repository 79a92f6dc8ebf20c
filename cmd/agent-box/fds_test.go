//go:build linux

package main

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Descriptors agent-box inherits without close-on-exec (a caller's
// `9>&1`) must not reach the run's supervisor and child, which outlive
// agent-box: a caller reading that pipe to EOF would wait for the run.
func TestRunDoesNotHoldCallersDescriptors(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	defer pr.Close()
	cmd := exec.Command(binary, "--state-dir", state, "start", "fdleak", "--", "sleep", "30")
	// fds 3 to 5: agent-box replaces 3 and 4 with the spec and report
	// pipes in the supervisor, but not 5.
	cmd.ExtraFiles = []*os.File{pw, pw, pw}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	pw.Close()
	t.Cleanup(func() { exec.Command(binary, "--state-dir", state, "kill", "-s", "KILL", "fdleak").Run() })
	got := make(chan error, 1)
	go func() { _, err := pr.Read(make([]byte, 1)); got <- err }()
	select {
	case err := <-got:
		assert.Error(t, err, "EOF once agent-box has exited")
	case <-time.After(10 * time.Second):
		// Not a timing assertion: the EOF is due the moment agent-box
		// exits, and without the fix it never comes while the run lives.
		t.Errorf("the caller's pipe is still held open by the run's supervisor or child after agent-box exited")
	}
}
