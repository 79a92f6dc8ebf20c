package runrecord_test

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agent-box/agent-box/runrecord"
)

// TestCrashConsistency SIGKILLs a process that rewrites a record in a tight
// loop, at arbitrary moments, and checks after every kill that the record
// reads back whole: the old version or a newer one, never ErrCorrupt.
//
// A kill leaves the page cache intact, so this tests the atomicity of the
// replace (what a reader can see), not durability across power loss; the
// fsyncs that cover that are in WriteVisible and its durable step.
func TestCrashConsistency(t *testing.T) {
	rounds := 200
	switch {
	case testing.Short():
		rounds = 20
	case raceEnabled:
		// Each round starts this test binary again as the writer, and a
		// race-built one starts several times slower (performance.md,
		// "Figures behind code comments"). The writer has one goroutine, so the race detector
		// finds nothing in it; the plain lane runs all 200.
		rounds = 40
	}
	s := newStore(t)
	r := create(t, s, "crash")
	// A big record takes long enough to write that many kills land while
	// the temp file is half written; a torn write would then be visible.
	r.Command = strings.Repeat("x", 256<<10)
	if err := s.Write(r); err != nil {
		t.Fatal(err)
	}

	last := r.LogBytes
	for round := range rounds {
		cmd := helper("rewrite", s.Root, r.Name, r.RunID)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("round %d: helper said %q, %v", round, line, err)
		}
		// The point is to kill at an arbitrary instant of the write loop,
		// so there is no condition to wait for: a random delay it is.
		time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("round %d: helper ended with %v before the kill", round, err)
		}

		got, err := s.Read(r.Name, r.RunID)
		if err != nil {
			t.Fatalf("round %d: Read after kill: %v", round, err)
		}
		if got.LogBytes <= last || got.Command != r.Command {
			t.Fatalf("round %d: record went from %d to %d (command intact: %v)", round, last, got.LogBytes, got.Command == r.Command)
		}
		last = got.LogBytes
	}

	ents, err := os.ReadDir(s.RunDir(r.Name, r.RunID))
	if err != nil {
		t.Fatal(err)
	}
	temps := 0
	for _, e := range ents {
		if e.Name() != "record.json" {
			if !strings.HasPrefix(e.Name(), ".record.json") {
				t.Errorf("unexpected file %s", filepath.Join(s.RunDir(r.Name, r.RunID), e.Name()))
			}
			temps++
		}
	}
	all, err := s.List("", nil)
	if err != nil || len(all) != 1 || all[0].Err != nil {
		t.Errorf("List after the kills = %+v, %v; want the one run", all, err)
	}
	t.Logf("%d kills, %d writes, %d temp files left by kills mid-write", rounds, last-r.LogBytes, temps)
}

// BenchmarkList lists a whole store (every record read) and one page of
// 100 runs out of 10,000, as process_list reads by default (runs.ListPage:
// the page is chosen from the directory listing, then only its records
// are read).
func BenchmarkList(b *testing.B) {
	for _, n := range []int{100, 10000} {
		s := benchStore(b, n)
		ids := idsOf(b, s)
		b.Run(fmt.Sprintf("runs=%d", n), func(b *testing.B) {
			benchCPU(b, func() {
				ents, err := s.List("", nil)
				if err != nil || len(ents) != n {
					b.Fatalf("List = %d entries, %v", len(ents), err)
				}
			})
		})
		if n <= 100 {
			continue
		}
		page := make(map[string]bool, 100)
		for _, id := range ids[len(ids)-100:] {
			page[id] = true
		}
		b.Run(fmt.Sprintf("page=100of%d", n), func(b *testing.B) {
			benchCPU(b, func() {
				ents, err := s.List("", func(_, id string) bool { return page[id] })
				if err != nil || len(ents) != 100 {
					b.Fatalf("List = %d entries, %v", len(ents), err)
				}
			})
		})
	}
}

// benchStore is a store holding n runs of one name.
func benchStore(b *testing.B, n int) *runrecord.Store {
	s, _, err := runrecord.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	// Plain writes, not Create: the setup would otherwise spend minutes
	// in fsync.
	at := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	for i := range n {
		r := sample("bench", at.Add(time.Duration(i)*time.Second))
		data, err := runrecord.Encode(r)
		if err != nil {
			b.Fatal(err)
		}
		dir := s.RunDir(r.Name, r.RunID)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "record.json"), data, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

func idsOf(b *testing.B, s *runrecord.Store) []string {
	idx, err := s.Index("bench")
	if err != nil || len(idx) != 1 {
		b.Fatalf("Index = %+v, %v", idx, err)
	}
	return idx[0].IDs
}

// benchCPU runs op in b's loop and reports the CPU time (user+sys of the
// whole process) per op next to the wall time: on a shared box the wall
// time says more about the neighbours than about op.
func benchCPU(b *testing.B, op func()) {
	cpu0 := cpuTime()
	for b.Loop() {
		op()
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
