package connect_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
)

var binary string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	abtest.WaitBoundParallel()
	bin, cleanup, err := abtest.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, "connect:", err)
		return 1
	}
	defer cleanup()
	binary = bin
	return m.Run()
}

// box is agent-box connect over an exec transport to a box on this machine
// (its own state dir), with a way to drop the transport as a dead link
// would: every dial's transport writes its pid to a file first.
type box struct {
	t        *testing.T
	stateDir string
	pids     string
	*abtest.Server
}

func newBox(t *testing.T) *box {
	b := &box{t: t, stateDir: t.TempDir()}
	b.pids = filepath.Join(t.TempDir(), "pids")
	transport := fmt.Sprintf("sh -c 'echo $$ >>%s; exec %s --state-dir %s'", b.pids, binary, b.stateDir)
	cmd := exec.Command(binary, "connect", "--exec", transport)
	b.Server = abtest.ConnectCmd(t, cmd)
	t.Cleanup(b.Close)
	return b
}

// transports are the pids of every transport started so far, in order.
func (b *box) transports() []int {
	data, _ := os.ReadFile(b.pids)
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// drop kills the live transport (the n-th) and waits for connect to have
// started the next.
func (b *box) drop(n int) {
	b.t.Helper()
	abtest.WaitFor(b.t, fmt.Sprintf("transport %d", n), time.Minute, func() bool { return len(b.transports()) >= n })
	require.NoError(b.t, syscall.Kill(b.transports()[n-1], syscall.SIGKILL))
	abtest.WaitFor(b.t, fmt.Sprintf("transport %d after the drop", n+1), time.Minute, func() bool { return len(b.transports()) > n })
}

// TestFollowThroughDrops is the north star: a client follows a growing
// log through connect while the transport is killed again and again; it
// reads every byte once, in order, and sees no error.
func TestFollowThroughDrops(t *testing.T) {
	b := newBox(t)
	stop := filepath.Join(t.TempDir(), "stop")
	// The run writes until every drop is done, so that each falls in the
	// middle of the follow.
	b.OK("process_start", map[string]any{"name": "grow",
		"command": fmt.Sprintf("i=0; while [ ! -e %s ]; do i=$((i+1)); echo \"line $i of the growing log\"; [ $((i %% 20)) -eq 0 ] && sleep 0.01; done", stop)})
	const drops = 24
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer os.WriteFile(stop, nil, 0o600)
		for n := 1; n <= drops; n++ {
			b.drop(n)
		}
	}()
	all, _, _ := b.ReadAll("grow", 4096, false)
	wg.Wait()
	lines := strings.SplitAfter(string(all), "\n")
	require.Equal(t, "", lines[len(lines)-1], "the log ends in a whole line")
	lines = lines[:len(lines)-1]
	require.Greater(t, len(lines), drops)
	var want bytes.Buffer
	for i := 1; i <= len(lines); i++ {
		fmt.Fprintf(&want, "line %d of the growing log\n", i)
	}
	abtest.SameBytes(t, want.Bytes(), all, "the log read through %d drops", drops)
	require.GreaterOrEqual(t, len(b.transports()), drops+1)
}
