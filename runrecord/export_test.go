package runrecord

import (
	"testing"

	"github.com/google/renameio/v2"
)

// SetCommit replaces the rename step of atomic writes for one test.
func SetCommit(t testing.TB, fn func(*renameio.PendingFile) error) {
	old := commit
	commit = fn
	t.Cleanup(func() { commit = old })
}

// FastDecode is the reflection-free decoder Decode tries first.
func FastDecode(data []byte) (*Record, bool) {
	var r Record
	if !fastDecode(data, &r) {
		return nil, false
	}
	return &r, true
}
