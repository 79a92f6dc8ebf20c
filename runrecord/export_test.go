package runrecord

import (
	"os"
	"testing"
)

// Faults replaces steps of the atomic write for one test; a nil field keeps
// the real step. Write, Sync and Close get the temp file, Rename its name
// and the record's, SyncDir every directory the package fsyncs (FsyncDir is
// the real one, for the directories a hook lets through).
type Faults struct {
	Write   func(f *os.File, b []byte) (int, error)
	Sync    func(f *os.File) error
	Close   func(f *os.File) error
	Rename  func(oldpath, newpath string) error
	SyncDir func(dir string) error
}

// SetFaults installs f until the test ends. The steps are package
// variables, so a test that sets them must not be parallel.
func SetFaults(t testing.TB, f Faults) {
	w, s, c, r, d := writeTemp, syncTemp, closeTemp, renameTemp, syncDir
	t.Cleanup(func() { writeTemp, syncTemp, closeTemp, renameTemp, syncDir = w, s, c, r, d })
	if f.Write != nil {
		writeTemp = f.Write
	}
	if f.Sync != nil {
		syncTemp = f.Sync
	}
	if f.Close != nil {
		closeTemp = f.Close
	}
	if f.Rename != nil {
		renameTemp = f.Rename
	}
	if f.SyncDir != nil {
		syncDir = f.SyncDir
	}
}

// FsyncDir is the real directory fsync.
var FsyncDir = fsyncDir

// FastDecode is the reflection-free decoder Decode tries first.
func FastDecode(data []byte) (*Record, bool) {
	var r Record
	if !fastDecode(data, &r) {
		return nil, false
	}
	return &r, true
}
