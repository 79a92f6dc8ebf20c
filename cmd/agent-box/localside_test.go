package main

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// The local side (connect, install) runs on the user's laptop, so
// agent-box must build for macOS, with the box side's Linux-only packages
// left out (box_other.go). .ci/run builds both Mac architectures; this
// catches the usual break (a box-side import in main.go) in go test.
func TestBuildsForMacOS(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles agent-box (slow on a cold build cache)")
	}
	t.Parallel()
	cmd := exec.Command("go", "build", "-o", os.DevNull, ".")
	cmd.Env = append(os.Environ(), "GOOS=darwin", "GOARCH=arm64", "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "GOOS=darwin GOARCH=arm64 go build ./cmd/agent-box:\n%s", out)
}
