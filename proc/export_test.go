package proc

import "testing"

// SetProcRoot points the package at a fake /proc tree for the test.
func SetProcRoot(t testing.TB, dir string) {
	old := procRoot
	procRoot = dir
	t.Cleanup(func() { procRoot = old })
}
