package runrecord_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agent-box/agent-box/runrecord"
)

// Tidy of every name reaches the names Index and List leave out (a lock
// alone, a killed start's dir alone) and keeps what holds a run, or a start
// whose supervisor live vouches for.
func TestTidyEveryName(t *testing.T) {
	s := newStore(t)
	kept := create(t, s, "kept")
	for _, name := range []string{"lockonly", "kept"} {
		unlock, err := s.LockName(name, 0)
		if err != nil {
			t.Fatal(err)
		}
		unlock()
	}
	abandoned := filepath.Join(s.Root, "runs", "abandoned", ".new-x")
	live := filepath.Join(s.Root, "runs", "live", ".new-x")
	for _, dir := range []string{abandoned, live} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		r := *kept
		r.Name = filepath.Base(filepath.Dir(dir))
		data, err := runrecord.Encode(&r)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "record.json"), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	s.Tidy("", func(r *runrecord.Record) bool { return r.Name == "live" })

	for _, gone := range []string{"lockonly", "abandoned"} {
		if _, err := os.Lstat(filepath.Join(s.Root, "runs", gone)); !os.IsNotExist(err) {
			t.Errorf("runs/%s after Tidy: %v, want it removed", gone, err)
		}
	}
	if _, err := os.Lstat(live); err != nil {
		t.Errorf("the start live vouches for: %v", err)
	}
	if _, err := s.Read(kept.Name, kept.RunID); err != nil {
		t.Errorf("the run of kept: %v", err)
	}
}
