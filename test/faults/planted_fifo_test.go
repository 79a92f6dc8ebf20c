package faults

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
	"github.com/agent-box/agent-box/runrecord"
)

// replaceWithFIFO puts a FIFO where path was.
func replaceWithFIFO(t *testing.T, path string) {
	t.Helper()
	require.NoError(t, os.Remove(path))
	require.NoError(t, syscall.Mkfifo(path, 0o600))
}

// TestFIFOInPlaceOfALogOrRecord: a run that replaces its own log with a
// FIFO (it can: it knows its state dir, AGENT_BOX_NAME and
// AGENT_BOX_RUN_ID), or a FIFO planted as a record, hangs nothing. Before
// (issue 9), process_wait, tail_log and agent-box logs blocked forever in
// open(2), which neither a cancel, SIGTERM nor stdin EOF ended, and after
// about 70 of them not even ping answered. Now each says what is wrong at
// once, and the server answers everything else.
func TestFIFOInPlaceOfALogOrRecord(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	s := connect(t, state)
	s.CallTimeout = 20 * time.Second // a hang fails the test instead of stalling it
	s.OK("process_start", map[string]any{"name": "fifo",
		"command": `d='` + state + `'"/runs/$AGENT_BOX_NAME/$AGENT_BOX_RUN_ID"; echo before; rm "$d/log" && mkfifo "$d/log" && echo made > "$d/made"; sleep 300`})
	t.Cleanup(func() { s.Call("process_kill", map[string]any{"name": "fifo", "signal": "KILL"}) })
	dir := runDirOf(t, state, "fifo")
	abtest.WaitFor(t, "the run's FIFO", 10*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(dir, "made"))
		return err == nil
	})

	bad("FIFO log")
	for _, args := range []map[string]any{
		{"name": "fifo"},
		{"name": "fifo", "wait_ms": 200},
		{"name": "fifo", "tail_lines": 5},
		{"name": "fifo", "grep": "x"},
		{"name": "fifo", "offset": -10},
		{"name": "fifo", "encoding": "base64"},
	} {
		r := s.Call("tail_log", args)
		assert.True(t, r.IsError, "%v: %s", args, r.Text)
		assert.Contains(t, r.Text, "is a FIFO", "%v", args)
	}
	w := s.Call("process_wait", map[string]any{"name": "fifo", "timeout_ms": 200})
	assert.False(t, w.IsError, w.Text)
	assert.Equal(t, true, w.Data["wait_timed_out"], w.Text)
	l := abtest.RunOf(t, s.OK("process_list", nil), "fifo")
	assert.Equal(t, "running", l["state"])

	// Enough calls to have used up every worker, had any of them hung.
	for range 80 {
		s.Call("tail_log", map[string]any{"name": "fifo"})
	}
	s.OK("process_list", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, s.Session().Ping(ctx, nil), "ping after 80 reads of a FIFO log")

	// The CLI reads the same way.
	cli := exec.Command(binary, "--state-dir", state, "logs", "fifo")
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cli.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cli.Process.Kill()
		t.Fatal("agent-box logs hung on a FIFO log")
	}
	assert.Error(t, err, "agent-box logs of a FIFO log must fail")
	assert.Contains(t, string(out), "is a FIFO")

	// A FIFO planted as a record: the run is unknown, with a reason.
	bad("FIFO record")
	planted := plant(t, state, "fiforec", nil)
	replaceWithFIFO(t, filepath.Join((&runrecord.Store{Root: state}).RunDir("fiforec", planted.RunID), "record.json"))
	run := abtest.RunOf(t, s.OK("process_list", nil), "fiforec")
	assert.Equal(t, "unknown", run["state"])
	assert.Contains(t, run["reason"], "FIFO")
	r := s.Call("tail_log", map[string]any{"name": "fiforec"})
	assert.True(t, r.IsError, r.Text)
	r = s.Call("process_wait", map[string]any{"name": "fiforec", "timeout_ms": 200})
	assert.Contains(t, r.Text, "unknown")
}

// TestServerExitsSoonAfterStdinEOF: a process_wait in flight (on a run
// that goes on for minutes) does not hold the server after its client has
// gone: it exits within about a second of stdin EOF, and so on SIGTERM;
// the run lives on.
func TestServerExitsSoonAfterTheClientGoes(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"eof", "sigterm"} {
		t.Run(how, func(t *testing.T) {
			state := t.TempDir()
			cmd := exec.Command(binary, "--state-dir", state)
			in, err := cmd.StdinPipe()
			require.NoError(t, err)
			cmd.Stdout = nil
			require.NoError(t, cmd.Start())
			exited := make(chan struct{})
			go func() { cmd.Wait(); close(exited) }()
			t.Cleanup(func() { cmd.Process.Kill(); <-exited })
			send := func(line string) {
				_, err := in.Write([]byte(line + "\n"))
				require.NoError(t, err)
			}
			send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
			send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"process_start","arguments":{"name":"long","argv":["sleep","300"],"stdin":"pipe"}}}`)
			abtest.WaitFor(t, "the run", 10*time.Second, func() bool {
				ids, _ := runIDs(state, "long")
				return len(ids) == 1
			})
			send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"process_wait","arguments":{"name":"long","timeout_ms":600000}}}`)
			send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"tail_log","arguments":{"name":"long","wait_ms":60000}}}`)
			send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"tail_log","arguments":{"name":"long","wait_ms":60000,"until":"never","idle_ms":100}}}`)
			send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"process_write","arguments":{"name":"long","data":"x\n","wait_ms":60000,"until":"never"}}}`)
			time.Sleep(200 * time.Millisecond) // let the calls block: what is measured is the exit with them in flight
			start := time.Now()
			if how == "eof" {
				require.NoError(t, in.Close())
			} else {
				require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
			}
			select {
			case <-exited:
				t.Logf("%s: the server exited %v after", how, time.Since(start).Round(time.Millisecond))
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: the server still runs 5 s later, with a wait in flight", how)
			}
			s := connect(t, state)
			assert.Equal(t, "running", abtest.RunOf(t, s.OK("process_list", nil), "long")["state"])
			s.OK("process_kill", map[string]any{"name": "long", "signal": "KILL"})
		})
	}
}
