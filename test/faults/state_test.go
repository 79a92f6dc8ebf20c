package faults

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
)

// TestRecordPointingAtAnUnrelatedProcess: records whose pids name a live
// process that is not the run's (a sleep of this test, in a group of its
// own) are never signalled, whatever signal and grace are asked for.
func TestRecordPointingAtAnUnrelatedProcess(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	v, st, gone := victim(t)
	pid := v.Process.Pid
	cases := map[string]func(r *runrecord.Record){
		// The right boot, the victim's pid, a start time that is not its.
		"reused": func(r *runrecord.Record) {
			r.PID, r.PIDStartTime = pid, st.StartTime+1
			r.SupervisorPID, r.SupervisorStartTime = pid, st.StartTime+1
		},
		// No start time recorded at all (a hand-made or truncated record).
		"nostart": func(r *runrecord.Record) { r.PID = pid },
		// The exit is recorded; a live group of that number is someone
		// else's.
		"exited": func(r *runrecord.Record) {
			r.PID, r.PIDStartTime = pid, st.StartTime+7
			code := 0
			now := time.Now().UTC()
			r.Exit, r.FinishedAt = &runrecord.Exit{Code: &code, At: now}, &now
			r.OutputClosed = true
		},
		// The right start time, but recorded on another boot.
		"otherboot": func(r *runrecord.Record) {
			r.BootID = "00000000-0000-4000-8000-000000000000"
			r.PID, r.PIDStartTime = pid, st.StartTime
			r.SupervisorPID, r.SupervisorStartTime = pid, st.StartTime
		},
		// A live process with the supervisor's pid and start time (this
		// test process) that is not a supervisor of the run: it vouches
		// for none of its descendants (among them the server and the
		// victim), and the reused child pid is not signalled.
		"imposter": func(r *runrecord.Record) {
			self, err := proc.ReadStat(os.Getpid())
			require.NoError(t, err)
			r.SupervisorPID, r.SupervisorStartTime = self.PID, self.StartTime
			r.PID, r.PIDStartTime = pid, st.StartTime+1
		},
	}
	for name, mut := range cases {
		plant(t, state, name, mut)
	}
	s := connect(t, state)
	l := s.OK("process_list", nil)
	for name := range cases {
		run := abtest.RunOf(t, l, name)
		switch name {
		case "exited":
			assert.Equal(t, "exited", run["state"])
			assert.Empty(t, run["survivors"], "the victim is not a survivor of this run")
		default:
			assert.Equal(t, "unknown", run["state"], "%s: %v", name, run["reason"])
		}
		for _, args := range []map[string]any{
			{"name": name, "signal": "KILL"},
			{"name": name, "signal": "TERM", "grace_ms": 100},
			{"name": name, "signal": "STOP"},
		} {
			bad("foreign pid")
			r := s.Call("process_kill", args)
			if name == "exited" {
				require.False(t, r.IsError, r.Text)
				assert.Equal(t, true, r.Data["already_exited"], "%s: %s", name, r.Text)
			} else {
				assert.True(t, r.IsError, "%s: kill must be refused: %s", name, r.Text)
				assert.Contains(t, r.Text, "nothing was signalled")
			}
			assert.Empty(t, r.Data["signalled_groups"])
			assert.True(t, alive(gone), "%s: the unrelated process was killed", name)
		}
		// Nor does any of them block its name.
		s.OK("process_start", map[string]any{"name": name, "command": "true"})
	}
	st2, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	require.NoError(t, err)
	assert.NotContains(t, string(st2), ") T ", "the unrelated process was stopped")
}

// TestRecordOfAnotherRun: a live run's record copied verbatim into another
// run's directory is refused (its name and run id are not the directory's),
// so process_kill of the copy never reaches the live run. A copy edited to
// match its new place is refused too: its supervisor is alive and says it
// supervises run a.
func TestRecordOfAnotherRun(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	s := connect(t, state)
	s.OK("process_start", map[string]any{"name": "a", "argv": []any{"sleep", "300"}})
	t.Cleanup(func() { s.Call("process_kill", map[string]any{"name": "a", "signal": "KILL"}) })
	aDir := runDirOf(t, state, "a")
	rec, err := os.ReadFile(filepath.Join(aDir, "record.json"))
	require.NoError(t, err)

	place := func(name string, data []byte) {
		store := &runrecord.Store{Root: state}
		id := runrecord.NewRunID(time.Now())
		dir := store.RunDir(name, id)
		require.NoError(t, os.MkdirAll(dir, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "record.json"), data, 0o600))
	}
	bad("foreign record")
	place("b", rec)
	run := abtest.RunOf(t, s.OK("process_list", nil), "b")
	assert.Equal(t, "unknown", run["state"])
	assert.Contains(t, run["reason"], "the record is of run a/")
	for _, sig := range []string{"KILL", "TERM"} {
		r := s.Call("process_kill", map[string]any{"name": "b", "signal": sig})
		assert.True(t, r.IsError, "kill of a copied record must be refused: %s", r.Text)
	}
	assert.Equal(t, "running", abtest.RunOf(t, s.OK("process_list", nil), "a")["state"], "a was signalled through b")

	// The edited copy: name and run id rewritten to the new place.
	bad("foreign record")
	var m map[string]any
	require.NoError(t, json.Unmarshal(rec, &m))
	store := &runrecord.Store{Root: state}
	id := runrecord.NewRunID(time.Now())
	m["name"], m["run_id"], m["log_path"] = "c", id, store.LogPath("c", id)
	edited, err := json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(store.RunDir("c", id), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(store.RunDir("c", id), "record.json"), edited, 0o600))
	// Its supervisor pid and start time are a's live supervisor's, whose
	// command line names run a: the copy is foreign, and nothing it names
	// is signalled, whatever signal is asked for.
	run = abtest.RunOf(t, s.OK("process_list", map[string]any{"name": "c"}), "c")
	assert.Equal(t, "unknown", run["state"])
	assert.Contains(t, run["reason"], "the record is not this run's")
	for _, sig := range []string{"KILL", "TERM", "STOP"} {
		r := s.Call("process_kill", map[string]any{"name": "c", "signal": sig, "grace_ms": 100})
		assert.True(t, r.IsError, "kill of an edited copy must be refused: %s", r.Text)
		assert.Contains(t, r.Text, "nothing was signalled")
	}
	assert.Equal(t, "running", abtest.RunOf(t, s.OK("process_list", nil), "a")["state"], "a was signalled through c")
}

// TestStateDirPermissions: a state dir open to others is tightened to
// 0700 with a warning on stderr; one owned by another user, a symlink, or a
// file is refused with a clear error, and nothing is created in it.
func TestStateDirPermissions(t *testing.T) {
	t.Parallel()
	t.Run("0777 is tightened", func(t *testing.T) {
		bad("state dir")
		state := t.TempDir()
		require.NoError(t, os.Chmod(state, 0o777))
		require.NoError(t, os.MkdirAll(filepath.Join(state, "runs"), 0o777))
		require.NoError(t, os.Chmod(filepath.Join(state, "runs"), 0o777))
		s, stderr := connectCapturing(t, exec.Command(binary, "--state-dir", state))
		s.OK("process_list", nil)
		for _, d := range []string{state, filepath.Join(state, "runs")} {
			fi, err := os.Stat(d)
			require.NoError(t, err)
			assert.Equal(t, fs.FileMode(0o700), fi.Mode().Perm(), d)
			assert.Contains(t, stderr.String(), d+" had mode 0777, open to group or others; tightened to 0700")
		}
	})
	refusedDir := func(t *testing.T, state, want string) {
		t.Helper()
		cmd := exec.Command(binary, "--state-dir", state)
		cmd.Stdin = strings.NewReader("")
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "agent-box must refuse %s: %s", state, out)
		assert.Equal(t, 1, ee.ExitCode())
		assert.Contains(t, string(out), want)
		assert.Less(t, len(out), 1024)
		// The CLI refuses the same way.
		out, err = exec.Command(binary, "--state-dir", state, "ps").CombinedOutput()
		assert.Error(t, err)
		assert.Contains(t, string(out), want)
	}
	asRoot := func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("chown to another user needs root")
		}
	}
	t.Run("owned by nobody", func(t *testing.T) {
		asRoot(t)
		bad("state dir")
		state := filepath.Join(t.TempDir(), "state")
		require.NoError(t, os.Mkdir(state, 0o700))
		require.NoError(t, os.Chown(state, 65534, 65534))
		before := snapshot(t, state)
		refusedDir(t, state, fmt.Sprintf("is owned by uid 65534, not by this user (uid %d)", os.Geteuid()))
		sameTree(t, before, snapshot(t, state), "a foreign state dir")
	})
	t.Run("runs owned by nobody", func(t *testing.T) {
		asRoot(t)
		bad("state dir")
		state := t.TempDir()
		require.NoError(t, os.Mkdir(filepath.Join(state, "runs"), 0o700))
		require.NoError(t, os.Chown(filepath.Join(state, "runs"), 65534, 65534))
		refusedDir(t, state, "runs is owned by uid 65534")
	})
	t.Run("a symlink", func(t *testing.T) {
		bad("state dir")
		target := t.TempDir()
		state := filepath.Join(t.TempDir(), "state")
		require.NoError(t, os.Symlink(target, state))
		before := snapshot(t, target)
		refusedDir(t, state, "is a symlink")
		sameTree(t, before, snapshot(t, target), "the symlink's target")
	})
	t.Run("a file", func(t *testing.T) {
		bad("state dir")
		state := filepath.Join(t.TempDir(), "state")
		require.NoError(t, os.WriteFile(state, []byte("not a dir"), 0o600))
		refusedDir(t, state, "is not a directory")
	})
}

// TestModesUnderTheStateDir: after runs of every kind, with the server
// started under umask 000 so that no mode comes from the umask, every
// directory is 0700 and every file 0600, all owned by us. The sockets (a
// piped run's stdin, every run's control socket) are the exception: bind(2) gives it 0777 &^ umask, so here 0777; what
// protects it is that connect(2) needs search permission on the run dir,
// which is 0700 like every directory above it.
func TestModesUnderTheStateDir(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	cmd := exec.Command("/bin/sh", "-c", `umask 000; exec "$0" --state-dir "$1"`, binary, state)
	s := abtest.ConnectCmd(t, cmd)
	s.OK("process_start", map[string]any{"name": "comb", "command": "echo out; echo err >&2"})
	s.OK("process_start", map[string]any{"name": "fram", "command": "echo out; echo err >&2", "capture_mode": "framed"})
	s.OK("process_start", map[string]any{"name": "pipe", "command": "cat", "stdin": "pipe"})
	t.Cleanup(func() { s.Call("process_kill", map[string]any{"name": "pipe", "signal": "KILL"}) })
	waitSocket(t, state, "pipe")
	s.OK("process_write", map[string]any{"name": "pipe", "data": "hello\n"})
	s.OK("process_start", map[string]any{"name": "capped", "command": "seq 1 10000", "max_log_bytes": 100})
	for _, n := range []string{"comb", "fram", "capped"} {
		s.OK("process_wait", map[string]any{"name": n, "timeout_ms": 30000})
	}
	s.OK("process_start", map[string]any{"name": "comb", "command": "echo again"}) // a second run of a name
	s.OK("process_wait", map[string]any{"name": "comb", "timeout_ms": 30000})

	uid := uint32(os.Geteuid())
	seen := map[string]int{}
	sockets := map[string]int{}
	for p, e := range snapshot(t, state) {
		full := filepath.Join(state, p)
		assert.Equal(t, uid, e.UID, "%s is not ours", p)
		switch {
		case e.Mode.IsDir():
			seen["dir"]++
			assert.Equal(t, fs.FileMode(0o700), e.Mode.Perm(), "dir %s", p)
		case e.Mode.IsRegular():
			seen[filepath.Base(p)]++
			assert.Equal(t, fs.FileMode(0o600), e.Mode.Perm(), "file %s", p)
		case e.Mode&fs.ModeSocket != 0:
			sockets[filepath.Base(p)]++
			assert.Contains(t, []string{"stdin.sock", "control.sock"}, filepath.Base(p))
			t.Logf("socket %s has mode %v (umask 000); its run dir is the barrier", p, e.Mode.Perm())
			for d := filepath.Dir(full); ; d = filepath.Dir(d) {
				fi, err := os.Stat(d)
				require.NoError(t, err)
				assert.Equal(t, fs.FileMode(0o700), fi.Mode().Perm(), "%s, above a socket", d)
				if d == state {
					break
				}
			}
		default:
			t.Errorf("%s: unexpected file type %v", p, e.Mode.Type())
		}
	}
	assert.Equal(t, map[string]int{"stdin.sock": 1, "control.sock": 5}, sockets, "the piped run has its stdin socket, each of the 5 runs its control socket")
	for _, want := range []string{"record.json", "log", "supervisor.log", ".lock"} {
		assert.GreaterOrEqual(t, seen[want], 4, "%s files checked (%v)", want, seen)
	}
	assert.GreaterOrEqual(t, seen["dir"], 10)
}

// TestRecordWithUnknownFieldsStillReads: fields a later build may add
// (objects, arrays, numbers of every shape, escaped keys) are ignored by
// readers of this version.
func TestRecordWithUnknownFieldsStillReads(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	s := connect(t, state)
	s.OK("process_start", map[string]any{"name": "x", "command": "echo kept; exit 3"})
	s.OK("process_wait", map[string]any{"name": "x", "timeout_ms": 30000})
	settled(t, state, "x")
	dir := runDirOf(t, state, "x")
	var rec, extra map[string]json.RawMessage
	b, err := os.ReadFile(filepath.Join(dir, "record.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &rec))
	require.NoError(t, json.Unmarshal(fixture(t, "record-extra-fields.json"), &extra))
	for k, v := range extra {
		require.NotContains(t, rec, k)
		rec[k] = v
	}
	out, err := json.MarshalIndent(rec, "", "  ")
	require.NoError(t, err)
	bad("record extra fields")
	// Replaced the way the store does it, so no reader sees half a file.
	tmp := filepath.Join(dir, ".record.json.faults")
	require.NoError(t, os.WriteFile(tmp, out, 0o600))
	require.NoError(t, os.Rename(tmp, filepath.Join(dir, "record.json")))

	run := abtest.RunOf(t, s.OK("process_list", nil), "x")
	assert.Equal(t, "exited", run["state"], "%v", run["reason"])
	assert.Equal(t, int64(3), abtest.Num(run["exit_code"]))
	tl := s.OK("tail_log", map[string]any{"name": "x"})
	assert.Equal(t, "kept\n", tl.Data["content"])
	// A newer record with the same extras is refused for its version, not
	// for the extras.
	bad("record extra fields")
	rec["version"] = json.RawMessage("2")
	out, err = json.Marshal(rec)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(tmp, out, 0o600))
	require.NoError(t, os.Rename(tmp, filepath.Join(dir, "record.json")))
	run = abtest.RunOf(t, s.OK("process_list", nil), "x")
	assert.Equal(t, "unknown", run["state"])
	assert.Contains(t, run["reason"], "version 2")
}

// TestRemoveKeepsRunsItCannotRead: process_remove all_finished deletes
// finished runs only; a run whose record cannot be read (from a newer
// agent-box, or corrupt) is not provably finished — a newer agent-box's
// run may be running right now — so its log and record stay.
func TestRemoveKeepsRunsItCannotRead(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	s := connect(t, state)
	s.OK("process_start", map[string]any{"name": "done", "command": "true"})
	s.OK("process_wait", map[string]any{"name": "done", "timeout_ms": 30000})
	for name, body := range map[string]string{
		"newer":   `{"version": 2, "name": "newer", "pid": 1, "what": "a run of a newer agent-box, maybe alive"}`,
		"corrupt": `{"version": 1, "name": "corr`,
	} {
		bad("unreadable record")
		r := plant(t, state, name, nil)
		dir := (&runrecord.Store{Root: state}).RunDir(name, r.RunID)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "record.json"), []byte(body), 0o600))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "log"), []byte("precious output\n"), 0o600))
	}
	rm := s.OK("process_remove", map[string]any{"all_finished": true})
	t.Logf("%s", rm.Text)
	assert.Contains(t, rm.Text, "done")
	for _, name := range []string{"newer", "corrupt"} {
		_, err := os.Stat(filepath.Join(state, "runs", name))
		ids, _ := runIDs(state, name)
		assert.True(t, err == nil && len(ids) == 1, "process_remove all_finished deleted run %q, whose record it cannot read", name)
	}

	// Nor does such a run free its name: starting another run under it
	// could put two live runs under one name. Removing it by name alone is
	// refused too; by its run id, the caller vouches that it is over.
	for _, name := range []string{"newer", "corrupt"} {
		ids, err := runIDs(state, name)
		require.NoError(t, err)
		require.Len(t, ids, 1)
		st := s.Call("process_start", map[string]any{"name": name, "command": "true"})
		assert.True(t, st.IsError, "process_start reused the name of unreadable run %q: %s", name, cut(st.Text, 200))
		assert.Contains(t, st.Text, "cannot read")
		assert.Contains(t, st.Text, ids[0], "the refusal names the run id to remove")
		r := s.Call("process_remove", map[string]any{"name": name})
		assert.True(t, r.IsError, "process_remove by name removed unreadable run %q", name)
		s.OK("process_remove", map[string]any{"name": name, "run_id": ids[0]})
		after, _ := runIDs(state, name)
		assert.Empty(t, after)
		s.OK("process_start", map[string]any{"name": name, "command": "true"})
	}
}

// TestWriteRightAfterStart: process_start answers once the child runs, so
// an agent may write to a piped run's stdin at once. The supervisor must be
// listening on stdin.sock by then.
//
// The window is short (the supervisor reports, then starts its copiers and
// its listener), so the test opens it often: 8 clients at once, each
// starting and writing in a loop, keep both CPUs busy with supervisors.
func TestWriteRightAfterStart(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	const clients, tries = 8, 3
	var mu sync.Mutex
	failures := 0
	var wg sync.WaitGroup
	servers := make([]*abtest.Server, clients)
	for c := range clients {
		s := connect(t, state)
		servers[c] = s
		wg.Go(func() {
			for i := range tries {
				name := fmt.Sprintf("w%d-%d", c, i)
				r := s.Call("process_start", map[string]any{"name": name, "command": "cat", "stdin": "pipe"})
				if r.IsError {
					t.Errorf("start %s: %s", name, cut(r.Text, 200))
					continue
				}
				r = s.Call("process_write", map[string]any{"name": name, "data": "x\n", "close": true})
				if r.IsError {
					mu.Lock()
					failures++
					mu.Unlock()
					t.Logf("%s: %s", name, cut(r.Text, 300))
					// End the run once its supervisor listens (the
					// socket file exists from bind(2), a moment before
					// listen(2), hence the retries).
					waitSocket(t, state, name)
					abtest.WaitFor(t, "stdin of "+name+" to close", 10*time.Second, func() bool {
						return !s.Call("process_write", map[string]any{"name": name, "close": true}).IsError
					})
				}
			}
		})
	}
	wg.Wait()
	// Each server takes a while to exit after stdin EOF; not one by one.
	for _, s := range servers {
		wg.Go(s.Close)
	}
	wg.Wait()
	assert.Zero(t, failures, "%d of %d writes right after process_start failed", failures, clients*tries)
}

// waitSocket waits until a piped run's supervisor listens on stdin.sock
// (see TestWriteRightAfterStart for why a test has to).
func waitSocket(t *testing.T, state, name string) {
	t.Helper()
	sock := filepath.Join(runDirOf(t, state, name), "stdin.sock")
	abtest.WaitFor(t, "stdin.sock of "+name, 10*time.Second, func() bool { _, err := os.Lstat(sock); return err == nil })
}
