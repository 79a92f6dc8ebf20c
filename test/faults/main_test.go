// Package faults holds fault-injection and security tests of agent-box: a
// full disk and RLIMIT_FSIZE under the supervisor, hostile tool arguments
// and planted state (symlinks, reused pids, foreign owners, wrong modes), and
// secret redaction end to end. Every test drives the real binary over MCP
// (internal/abtest); nothing here reaches into agent-box's internals except
// to plant or inspect state on disk the way a hostile or broken neighbour
// would.
//
// The guarantees these tests pin are written up in
// docs/architecture/guarantees.md, section "Full disk, hostile input,
// secrets".
package faults

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
)

// binary is agent-box built once (with -race) for the whole package.
var binary string

// badInputs counts the hostile inputs sent, by category; TestMain prints
// the totals (visible with -v, and in the summary of any failing run).
var (
	badMu     sync.Mutex
	badCounts = map[string]int{}
	badTotal  atomic.Int64
)

// bad counts one hostile input of category what.
func bad(what string) {
	badMu.Lock()
	badCounts[what]++
	badMu.Unlock()
	badTotal.Add(1)
}

func TestMain(m *testing.M) {
	abtest.WaitBoundParallel()
	bin, cleanup, err := abtest.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = bin
	code := m.Run()
	cleanup()
	badMu.Lock()
	cats := make([]string, 0, len(badCounts))
	for k := range badCounts {
		cats = append(cats, k)
	}
	sort.Strings(cats)
	var parts []string
	for _, k := range cats {
		parts = append(parts, fmt.Sprintf("%s=%d", k, badCounts[k]))
	}
	badMu.Unlock()
	fmt.Fprintf(os.Stderr, "faults: %d hostile inputs tried (%s)\n", badTotal.Load(), strings.Join(parts, " "))
	os.Exit(code)
}

func connect(t *testing.T, state string) *abtest.Server {
	t.Helper()
	return abtest.Connect(t, binary, state)
}

// fixture reads testdata/fixtures/faults/name.
func fixture(t *testing.T, name string) []byte {
	t.Helper()
	root, err := abtest.RepoRoot()
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(root, "testdata", "fixtures", "faults", name))
	require.NoError(t, err)
	return b
}

// syncBuf is a goroutine-safe buffer for a server's stderr, which the
// process's copier goroutine writes while the test reads.
type syncBuf struct {
	mu  sync.Mutex
	b   bytes.Buffer
	t   testing.TB
	tag string
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.t.Logf("%s stderr: %s", b.tag, strings.TrimRight(string(p), "\n"))
	return b.b.Write(p)
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// connectCapturing starts cmd as an MCP server and returns the session and
// its stderr.
func connectCapturing(t *testing.T, cmd *exec.Cmd) (*abtest.Server, *syncBuf) {
	t.Helper()
	buf := &syncBuf{t: t, tag: filepath.Base(cmd.Path)}
	cmd.Stderr = buf
	return abtest.ConnectCmd(t, cmd), buf
}

// entry is one path under a tree, as snapshot sees it.
type entry struct {
	Mode  fs.FileMode
	Size  int64
	MTime time.Time
	Sum   string // sha256 of a regular file's content; a symlink's target
	UID   uint32
}

// snapshot records every path under root (root itself as "."), never
// following symlinks.
func snapshot(t *testing.T, root string) map[string]entry {
	t.Helper()
	out := map[string]entry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // a record's temp file, renamed away meanwhile
		}
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		e := entry{Mode: fi.Mode(), Size: fi.Size(), MTime: fi.ModTime()}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			e.UID = st.Uid
		}
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			h := sha256.Sum256(b)
			e.Sum = hex.EncodeToString(h[:])
		case fi.Mode()&fs.ModeSymlink != 0:
			e.Sum, _ = os.Readlink(p)
		}
		out[rel] = e
		return nil
	})
	require.NoError(t, err)
	return out
}

// sameTree fails unless two snapshots list the same paths with the same
// type, content and mtime.
func sameTree(t *testing.T, before, after map[string]entry, what string) {
	t.Helper()
	for p, a := range after {
		b, ok := before[p]
		if !ok {
			t.Errorf("%s: %s appeared (mode %v, %d bytes)", what, p, a.Mode, a.Size)
			continue
		}
		if b.Mode != a.Mode || b.Sum != a.Sum || !b.MTime.Equal(a.MTime) || b.Size != a.Size {
			t.Errorf("%s: %s changed: %+v -> %+v", what, p, b, a)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			t.Errorf("%s: %s disappeared", what, p)
		}
	}
}

// plant writes a record as an earlier agent-box would have, through the
// store itself (so its directory and modes are the real ones).
func plant(t *testing.T, state, name string, mut func(r *runrecord.Record)) *runrecord.Record {
	t.Helper()
	store, _, err := runrecord.Open(state)
	require.NoError(t, err)
	boot, err := proc.BootID()
	require.NoError(t, err)
	now := time.Now().UTC().Add(-time.Minute)
	r := &runrecord.Record{
		Version: runrecord.Version, Name: name, RunID: runrecord.NewRunID(now), LogFormat: "raw",
		BootID: boot, StartedAt: now,
		Spec: runrecord.Spec{Command: "sleep 1000", Cwd: "/", CaptureMode: "combined", Stdin: "null"},
	}
	r.LogPath = store.LogPath(r.Name, r.RunID)
	if mut != nil {
		mut(r)
	}
	require.NoError(t, store.Create(r))
	return r
}

// victim starts an unrelated long-lived process in a process group of its
// own (so that a wrongly aimed group signal would reach it and only it),
// and returns it with a channel closed when it exits.
func victim(t *testing.T) (*exec.Cmd, proc.Stat, <-chan struct{}) {
	t.Helper()
	return victimWith(t, &syscall.SysProcAttr{Setpgid: true})
}

// victimWith is victim, started with attr (Setsid: a session of its own).
func victimWith(t *testing.T, attr *syscall.SysProcAttr) (*exec.Cmd, proc.Stat, <-chan struct{}) {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	cmd.SysProcAttr = attr
	require.NoError(t, cmd.Start())
	gone := make(chan struct{})
	go func() { cmd.Wait(); close(gone) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-gone
	})
	var st proc.Stat
	abtest.WaitFor(t, "victim's /proc entry", 5*time.Second, func() bool {
		var err error
		st, err = proc.ReadStat(cmd.Process.Pid)
		return err == nil
	})
	return cmd, st, gone
}

func alive(gone <-chan struct{}) bool {
	select {
	case <-gone:
		return false
	default:
		return true
	}
}

// runDirOf returns the run directory of the newest run of name.
func runDirOf(t *testing.T, state, name string) string {
	t.Helper()
	ids, err := runIDs(state, name)
	require.NoError(t, err)
	return (&runrecord.Store{Root: state}).RunDir(name, ids[len(ids)-1])
}

// runIDs returns the run ids of name, oldest first, from the listing of
// its directory (no record is read).
func runIDs(state, name string) ([]string, error) {
	idx, err := (&runrecord.Store{Root: state}).Index(name)
	if err != nil {
		return nil, err
	}
	return idx[0].IDs, idx[0].Err
}

func readRecord(t *testing.T, runDir string) *runrecord.Record {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(runDir, "record.json"))
	require.NoError(t, err)
	r, err := runrecord.Decode(b)
	require.NoError(t, err)
	return r
}

// runMap is the "run" object of a kill or wait answer.
func runMap(r abtest.Result) map[string]any {
	m, _ := r.Data["run"].(map[string]any)
	return m
}

// settled waits until the newest run of name has its final record
// (output_closed): after that its supervisor writes nothing more, so a test
// may snapshot or plant things in its run dir without racing it.
func settled(t *testing.T, state, name string) {
	t.Helper()
	abtest.WaitFor(t, "final record of "+name, 30*time.Second, func() bool {
		dir := runDirOf(t, state, name)
		b, err := os.ReadFile(filepath.Join(dir, "record.json"))
		if err != nil {
			return false
		}
		r, err := runrecord.Decode(b)
		return err == nil && r.OutputClosed
	})
}
