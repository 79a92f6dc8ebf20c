package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agent-box/agent-box/internal/abtest"
)

// TestMain is also the canned box of the fleet scenario, as main is: the
// scenario starts its own executable, here the test binary.
func TestMain(m *testing.M) {
	if file := os.Getenv(cannedEnv); file != "" {
		os.Exit(cannedBoxMain(file, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// TestPlumbing runs every scenario at the smallest sizes against a freshly
// built agent-box: it checks that each measurement can be made (the
// protocol exchanges, the checks on logs and records, the cleanup), never
// what it measures.
func TestPlumbing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds agent-box and starts some 40 runs")
	}
	if abtest.RaceEnabled {
		// The benchmark drives a plain build in every lane, as make
		// bench does; a race-built harness only makes the race lane
		// slower. The plain lane (make test-plain) and make
		// bench-quick run it; the harness's own goroutines are then not
		// under the race detector, which is a benchmark's loss only.
		t.Skip("bench plumbing: runs in the plain lane (make test-plain, go test ./...) only")
	}
	bin := filepath.Join(t.TempDir(), "agent-box")
	build := exec.Command("go", "build", "-o", bin, "../../cmd/agent-box")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// Quick, as make bench-quick: the scenarios that count bytes rather
	// than time (tokens: a real go test with a cold build cache, python3)
	// run only when named, go run ./test/bench --only tokens.
	b := &bench{binary: bin, mode: "quick", cfg: config{
		spawnN: 2, startN: 2,
		captureBytes: 1 << 20, captureReps: 1,
		drainBytes: 3 << 20,
		listSizes:  []int{50, 120}, listReps: 1,
		followN: 3, waitN: 1, soakN: 20,
		connectHopN: 3, connectDrops: 2, connectCalls: 20,
		fleetSizes: []int{3}, fleetRuns: 1, fleetCalls: 2, fleetCannedCalls: 2,
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

// TestNewBench: the mode picks the sizes, --list-sizes replaces the mode's
// (sorted), and a bad size or a missing binary is refused.
func TestNewBench(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "agent-box")
	if err := os.WriteFile(bin, nil, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		o         options
		mode      string
		listSizes []int
		err       string
	}{
		{"full", options{binary: bin}, "full", fullConfig.listSizes, ""},
		{"quick", options{binary: bin, quick: true}, "quick", quickConfig.listSizes, ""},
		{"list sizes", options{binary: bin, quick: true, listSizes: "10000,50"}, "quick", []int{50, 10000}, ""},
		{"bad size", options{binary: bin, listSizes: "10,0"}, "", nil, `--list-sizes: "0" is not a positive count`},
		{"no binary", options{binary: bin + ".missing"}, "", nil, "run make build first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := newBench(tc.o)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if b.mode != tc.mode || !slices.Equal(b.cfg.listSizes, tc.listSizes) || b.binary != bin {
				t.Errorf("mode %q, list sizes %v, binary %s; want %q, %v, %s", b.mode, b.cfg.listSizes, b.binary, tc.mode, tc.listSizes, bin)
			}
		})
	}
}

// TestSelected: --only picks what it names, tokens too; with no --only the
// full mode runs every scenario and the quick mode all but tokens.
func TestSelected(t *testing.T) {
	for _, tc := range []struct {
		mode, only string
		name       string
		want       bool
	}{
		{"full", "", "tokens", true},
		{"full", "", "list", true},
		{"quick", "", "tokens", false},
		{"quick", "", "list", true},
		{"quick", "tokens", "tokens", true},
		{"quick", "tokens", "list", false},
		{"full", "list,drain", "tokens", false},
	} {
		want := map[string]bool{}
		for s := range strings.SplitSeq(tc.only, ",") {
			if s != "" {
				want[s] = true
			}
		}
		b := &bench{mode: tc.mode}
		if got := b.selected(tc.name, want); got != tc.want {
			t.Errorf("%s mode, --only %q: %s selected %v, want %v", tc.mode, tc.only, tc.name, got, tc.want)
		}
	}
}
