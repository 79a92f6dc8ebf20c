package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/internal/abtest"
	"github.com/agent-box/agent-box/runrecord"
)

// server is one agent-box process with its MCP session. Unlike
// abtest.Server.Call, call returns transport errors instead of failing the
// test: the chaos tests kill servers while calls are in flight, from other
// goroutines.
type server struct {
	ab     *abtest.Server
	cs     *mcp.ClientSession
	pid    int
	stderr *tailBuffer
}

func connect(t testing.TB, bin, stateDir string) *server {
	t.Helper()
	cmd := exec.Command(bin, "--state-dir", stateDir)
	buf := &tailBuffer{max: 64 << 10}
	cmd.Stderr = buf
	ab := abtest.ConnectCmd(t, cmd)
	return &server{ab: ab, cs: ab.Session(), pid: cmd.Process.Pid, stderr: buf}
}

// call calls tool with a deadline; err is a transport or protocol error
// (the server died, say), a tool failure is res.IsError.
func (s *server) call(tool string, args map[string]any, timeout time.Duration) (abtest.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return abtest.Result{}, err
	}
	var r abtest.Result
	r.IsError = res.IsError
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			r.Text += tc.Text
		}
	}
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return r, err
		}
		if err := json.Unmarshal(b, &r.Data); err != nil {
			return r, err
		}
	}
	return r, nil
}

// kill SIGKILLs the server, as a dropped SSH connection ends the remote
// agent-box, and closes the session, which reaps it.
//
// Not abtest.Server.Kill: that calls Cmd.Wait itself, while the go-sdk
// transport, seeing the connection drop, calls Cmd.Wait from its own
// goroutine (mcp.pipeRWC.Close); of two concurrent Waits one can block
// forever in exec.Cmd.awaitGoroutines, which hung this suite. Here only the
// transport waits. Process.Signal is safe next to that Wait (a pidfd, or
// os.ErrProcessDone once reaped), so no reused pid is ever signalled.
func (s *server) kill() {
	_ = s.ab.Cmd.Process.Signal(os.Kill)
	_ = s.cs.Close()
}

// close ends the session politely (stdin EOF) and waits for the server.
func (s *server) close() { s.ab.Close() }

// badStderr returns the first line of the server's stderr that says it
// crashed or raced, or "".
func (s *server) badStderr() string { return crashLine(s.stderr.String()) }

func crashLine(text string) string {
	for _, line := range strings.Split(text, "\n") {
		for _, bad := range []string{"panic:", "DATA RACE", "fatal error:", "SIGSEGV"} {
			if strings.Contains(line, bad) {
				return line
			}
		}
	}
	return ""
}

// tailBuffer keeps the first max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   bytes.Buffer
}

func (w *tailBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := w.max - w.b.Len(); room > 0 {
		w.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (w *tailBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// liveness is what this test's own probe found: the oracle does not use
// package proc, whose answers are what is being checked.
type liveness int

const (
	gone   liveness = iota // no such pid, or a zombie
	same                   // alive, and its start time is the recorded one
	reused                 // alive, but another process
)

func (l liveness) String() string { return [...]string{"gone", "same", "reused"}[l] }

// stat reads state (field 3) and start time (field 22) of /proc/PID/stat.
func stat(pid int) (state byte, start uint64, err error) {
	state, start, _, err = statSID(pid)
	return state, start, err
}

// statSID is stat, and the session id (field 6).
func statSID(pid int) (state byte, start uint64, sid int, err error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, 0, err
	}
	// The command name (field 2) may hold spaces and parentheses; the
	// fields after it start after the last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, 0, 0, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 20 {
		return 0, 0, 0, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(f))
	}
	if sid, err = strconv.Atoi(f[3]); err != nil {
		return 0, 0, 0, err
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	return f[0][0], start, sid, err
}

// probe tells whether pid is alive (kill(pid, 0) succeeds and it is not a
// zombie) and is the process that started at start.
func probe(pid int, start uint64) liveness {
	if pid <= 0 {
		return gone
	}
	if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
		return gone
	}
	st, got, err := stat(pid)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return gone
		}
		return reused // something holds the pid that cannot be shown to be ours
	}
	if st == 'Z' || st == 'X' {
		return gone
	}
	if got != start {
		return reused
	}
	return same
}

// signalIfSame sends sig to pid (or to the group -pid when group is set)
// only after re-identifying it by its start time (STYLE 9).
func signalIfSame(pid int, start uint64, group bool, sig unix.Signal) bool {
	if probe(pid, start) != same {
		return false
	}
	target := pid
	if group {
		target = -pid
	}
	return unix.Kill(target, sig) == nil
}

// disk is one run as found in the store, with its processes probed.
type disk struct {
	Name, RunID string
	Dir         string
	Raw         []byte // record.json, nil when there is none
	Rec         *runrecord.Record
	Err         error // why Raw does not decode; nil when there is no record.json at all
	Child, Sup  liveness
	ChildSID    int // the child's session id, when Child is same
	Temps       int // leftover temp files of interrupted record writes
}

func (d *disk) key() string { return d.Name + "/" + d.RunID }

// snapshot reads every run dir of the store at root, decodes every
// record.json with runrecord.Decode and probes the recorded processes.
func snapshot(root string) (map[string]*disk, error) {
	out := map[string]*disk{}
	names, err := os.ReadDir(filepath.Join(root, "runs"))
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if !n.IsDir() {
			continue
		}
		ids, err := os.ReadDir(filepath.Join(root, "runs", n.Name()))
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			if !id.IsDir() || runrecord.ValidRunID(id.Name()) != nil {
				continue
			}
			d := &disk{Name: n.Name(), RunID: id.Name(), Dir: filepath.Join(root, "runs", n.Name(), id.Name())}
			ents, _ := os.ReadDir(d.Dir)
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), ".record.json") {
					d.Temps++
				}
			}
			raw, err := os.ReadFile(filepath.Join(d.Dir, "record.json"))
			switch {
			case errors.Is(err, os.ErrNotExist):
			case err != nil:
				d.Err = err
			default:
				d.Raw = raw
				d.Rec, d.Err = runrecord.Decode(raw)
			}
			if d.Rec != nil {
				d.Child = probe(d.Rec.PID, d.Rec.PIDStartTime)
				if d.Child == same {
					_, _, d.ChildSID, _ = statSID(d.Rec.PID)
				}
				d.Sup = probe(d.Rec.SupervisorPID, d.Rec.SupervisorStartTime)
			}
			out[d.key()] = d
		}
	}
	return out, nil
}

func bootID() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
}

// reap kills what is left of every run under the state dirs: each
// recorded child's group, then each supervisor, both re-identified first,
// and waits until the supervisors are gone so that the dirs can be removed.
func reap(t testing.TB, roots ...string) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		alive := 0
		for _, root := range roots {
			snap, err := snapshot(root)
			if err != nil {
				continue
			}
			for _, d := range snap {
				if d.Rec == nil {
					continue
				}
				if d.Child == same {
					signalIfSame(d.Rec.PID, d.Rec.PIDStartTime, true, unix.SIGKILL)
					alive++
				}
				if d.Sup == same {
					alive++
					if time.Until(deadline) < 5*time.Second {
						// Its child is gone and it still has not finished.
						signalIfSame(d.Rec.SupervisorPID, d.Rec.SupervisorStartTime, false, unix.SIGKILL)
					}
				}
			}
		}
		if alive == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("reap: %d processes of runs still alive after 10s", alive)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sweepChildren kills every live process whose tag (argv[2]) begins with
// prefix, which begins with this test process's token: children whose pid
// no record holds (a supervisor killed between starting its child and
// recording it) are found only this way. A test sweeps its own prefix, so
// that it never kills the children of a test running beside it.
func sweepChildren(prefix string) int {
	n := 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if len(args) > 2 && args[1] == childMarker && strings.HasPrefix(args[2], prefix) {
			if unix.Kill(pid, unix.SIGKILL) == nil {
				n++
			}
		}
	}
	return n
}
