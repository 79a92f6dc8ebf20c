package runrecord_test

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/agent-box/agent-box/runrecord"
)

const helperEnv = "RUNRECORD_TEST_HELPER"

// TestMain turns the test binary into a helper process when helperEnv is
// set (go-plugin's pattern), so the multi-process tests need no scripts.
//
//	rewrite ROOT NAME RUNID: rewrite the record forever, bumping LogBytes;
//	    print "ready" after the first write
//	lock ROOT NAME: take the name lock, print "locked", wait for EOF on stdin
func TestMain(m *testing.M) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		os.Exit(m.Run())
	}
	args := os.Args[1:]
	if err := runHelper(mode, args); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
	os.Exit(0)
}

func runHelper(mode string, args []string) error {
	s := &runrecord.Store{Root: args[0]}
	switch mode {
	case "rewrite":
		r, err := s.Read(args[1], args[2])
		if err != nil {
			return err
		}
		for i := 0; ; i++ {
			r.LogBytes++
			if err := s.Write(r); err != nil {
				return err
			}
			if i == 0 {
				fmt.Println("ready")
			}
		}
	case "lock":
		unlock, err := s.LockName(args[1], 0)
		if err != nil {
			return err
		}
		defer unlock()
		fmt.Println("locked")
		_, _ = io.Copy(io.Discard, os.Stdin)
		return nil
	}
	return fmt.Errorf("unknown mode %q", mode)
}

func helper(mode string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	cmd.Stderr = os.Stderr
	return cmd
}

// newStore opens a fresh store in a temp dir.
func newStore(t testing.TB) *runrecord.Store {
	t.Helper()
	s, warn, err := runrecord.Open(t.TempDir() + "/state")
	if err != nil {
		t.Fatal(err)
	}
	if warn != "" {
		t.Fatalf("fresh store warns: %s", warn)
	}
	return s
}

var clock = time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)

// runIDs is Index of one name: its run ids, oldest first, or why its
// directory cannot be listed.
func runIDs(s *runrecord.Store, name string) ([]string, error) {
	idx, err := s.Index(name)
	if err != nil {
		return nil, err
	}
	return idx[0].IDs, idx[0].Err
}

// create writes a new run of name at a time later than any before.
func create(t testing.TB, s *runrecord.Store, name string) *runrecord.Record {
	t.Helper()
	clock = clock.Add(time.Second)
	r := sample(name, clock)
	r.Exit, r.FinishedAt = nil, nil
	if err := s.Create(r); err != nil {
		t.Fatal(err)
	}
	return r
}
