package chaos

import (
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/agent-box/agent-box/internal/abtest"
)

var (
	roundsFlag = flag.Int("chaos.rounds", 0, "chaos rounds for TestChaos (default $CHAOS_ROUNDS, else 100)")
	seedFlag   = flag.Int64("chaos.seed", 0, "seed for the chaos tests (default $CHAOS_SEED, else the clock)")
	trialsFlag = flag.Int("chaos.trials", 0, "trials for the tagged concurrency and mid-write tests (default $CHAOS_TRIALS, else 200 and 300)")
)

// token marks every child this test process starts (it is in their argv),
// so that the final sweep can find and kill children whose pid no record
// holds, and only those: children of another test run carry another token.
var token = func() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}()

func TestMain(m *testing.M) {
	// The test binary doubles as the children the runs execute (STYLE 14):
	// argv[1] says so, before any flag parsing.
	if len(os.Args) > 1 && os.Args[1] == childMarker {
		os.Exit(childMain(os.Args[2:]))
	}
	flag.Parse()
	abtest.WaitBoundParallel()
	// agent-box is built as this binary was (abtest.Build): the tagged
	// suites' 100 rounds run without -race, as .ci/run runs them, and its
	// -race lane runs fewer rounds of race-built servers and supervisors,
	// whose stderr and supervisor.log are scanned for race reports.
	code := m.Run()
	if binCleanup != nil {
		binCleanup()
	}
	sweepChildren(token)
	os.Exit(code)
}

var (
	binOnce    sync.Once
	binPath    string
	binErr     error
	binCleanup func()
)

// agentBox returns agent-box built once for the whole test binary, and only
// if some selected test needs it.
func agentBox(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() { binPath, binCleanup, binErr = abtest.Build() })
	if binErr != nil {
		t.Fatalf("building agent-box: %v", binErr)
	}
	return binPath
}

// self is the test binary, which the runs execute as their child.
func self(t testing.TB) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatalf("os.Executable: %v", err)
	}
	return p
}

func envInt(name string, def int) int {
	if v := os.Getenv(name); v != "" {
		var n int
		if _, err := fmt.Sscan(v, &n); err == nil && n > 0 {
			return n
		}
	}
	return def
}
