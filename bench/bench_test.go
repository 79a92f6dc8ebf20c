package main

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// TestPlumbing runs every scenario at the smallest sizes against a freshly
// built agent-box: it checks that each measurement can be made (the
// protocol exchanges, the checks on logs and records, the cleanup), never
// what it measures.
func TestPlumbing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds agent-box and starts some 40 runs")
	}
	bin := filepath.Join(t.TempDir(), "agent-box")
	build := exec.Command("go", "build", "-o", bin, "../cmd/agent-box")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	b := &bench{binary: bin, cfg: config{
		spawnN: 2, startN: 2,
		captureBytes: 1 << 20, captureReps: 1,
		drainBytes: 3 << 20,
		listSizes:  []int{50, 120}, listReps: 1,
		followN: 3, waitN: 1, soakN: 20,
	}}
	if err := b.setup(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.cleanup)
	ms := b.runScenarios(nil)
	if len(ms) == 0 {
		t.Fatal("no rows")
	}
	for _, m := range ms {
		if m.Error != "" {
			t.Errorf("%s: %s", m.Name, m.Error)
		}
	}
}
