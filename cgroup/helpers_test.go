package cgroup

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

func newSleep() *exec.Cmd { return exec.Command("sleep", "60") }

func itoa(n int) string { return strconv.Itoa(n) }

// testLeaf is a group name no other test, here or in another test
// process on the machine, uses.
func testLeaf(t *testing.T, name string) string {
	return Leaf(name, itoa(os.Getpid())+"-"+filepath.Base(t.TempDir()))
}
