//go:build linux

package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/internal/abtest"
	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
)

// ptyOutput follows run name's log from offset from (tail_log wait_ms)
// until the text read matches want, and returns the text and where it
// ends.
func ptyOutput(t *testing.T, s *abtest.Server, name string, from int64, want string) (string, int64) {
	t.Helper()
	re := regexp.MustCompile(want)
	var got strings.Builder
	deadline := time.Now().Add(30 * time.Second)
	for !re.MatchString(got.String()) {
		require.True(t, time.Now().Before(deadline), "no %q in run %s's output: %q", want, name, got.String())
		r := s.OK("tail_log", map[string]any{"name": name, "offset": from, "encoding": "base64", "wait_ms": 2000})
		got.Write(abtest.B64(t, abtest.Str(r.Data["content"])))
		from = abtest.Num(r.Data["end_offset"])
	}
	return got.String(), from
}

// A pty run's program is on a terminal of the asked size (TERM says which
// kind), and process_resize, from another connection, changes its size.
func TestPtyRunIsOnATerminalThatResizes(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	s := connect(t, state)
	r := s.OK("process_start", map[string]any{"name": "term", "pty": true,
		"command": `tty; stty size; echo "term=$TERM"; while read x; do stty size; done`})
	assert.Equal(t, true, r.Run()["pty"], r.Text)
	assert.Contains(t, r.Text, "pty=120x40")
	out, off := ptyOutput(t, s, "term", 0, `term=xterm-256color`)
	assert.Regexp(t, `^/dev/pts/\d+\r\n40 120\r\n`, out)

	other := connect(t, state) // any connection: the supervisor holds the terminal
	r = other.OK("process_resize", map[string]any{"name": "term", "cols": 100, "rows": 30})
	assert.Equal(t, float64(100), r.Data["run"].(map[string]any)["cols"], r.Text)
	other.OK("process_write", map[string]any{"name": "term", "data": "\n"})
	_, _ = ptyOutput(t, other, "term", off, `30 100\r\n`)

	run := abtest.RunOf(t, s.OK("process_list", nil), "term")
	assert.Equal(t, true, run["pty"])
	assert.Equal(t, float64(100), run["cols"])
	assert.Equal(t, float64(30), run["rows"])
	s.OK("process_kill", map[string]any{"name": "term", "signal": "KILL"})
}

// "\u0003" written to a pty run is ^C through the line discipline: it
// interrupts the foreground job (sleep) of an interactive bash, not bash.
func TestPtyCtrlCInterruptsTheForegroundJob(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	r := s.OK("process_start", map[string]any{"name": "sh", "pty": true, "argv": []any{"bash", "--norc", "--noprofile", "-i"}})
	bash := int(abtest.Num(r.Run()["pid"]))
	s.OK("process_write", map[string]any{"name": "sh", "data": "sleep 100\n"})
	sleeps := func() []int {
		procs, err := proc.Processes()
		require.NoError(t, err)
		var pids []int
		for _, p := range procs {
			if p.SID != bash || p.PID == bash {
				continue
			}
			if argv, _ := proc.Cmdline(p.PID); len(argv) == 2 && argv[0] == "sleep" {
				pids = append(pids, p.PID)
			}
		}
		return pids
	}
	abtest.WaitFor(t, "sleep 100 to run in bash's session", 30*time.Second, func() bool { return len(sleeps()) == 1 })
	s.OK("process_write", map[string]any{"name": "sh", "data": "\u0003"})
	abtest.WaitFor(t, "^C to end the sleep", 30*time.Second, func() bool { return len(sleeps()) == 0 })
	s.OK("process_write", map[string]any{"name": "sh", "data": "echo alive-$((40+2))\n"})
	ptyOutput(t, s, "sh", 0, `alive-42`)
	assert.Equal(t, "running", abtest.RunOf(t, s.OK("process_list", nil), "sh")["state"], "bash itself was interrupted")
	s.OK("process_kill", map[string]any{"name": "sh", "signal": "KILL"})
}

// process_kill reaches a pty run's processes: its leader leads a session
// of its own (the terminal's), not the supervisor's, and is still proven
// the run's; the whole group is signalled.
func TestPtyKillReachesItsGroup(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	// The background sleep ignores the hangup the leader's death sends:
	// only the kill of the group ends it.
	s.OK("process_start", map[string]any{"name": "grp", "pty": true, "command": `trap '' HUP; sleep 300 & echo "bg=$!"; exec sleep 301`})
	out, _ := ptyOutput(t, s, "grp", 0, `bg=\d+\r\n`)
	bg := regexp.MustCompile(`bg=(\d+)`).FindStringSubmatch(out)[1]
	run := abtest.RunOf(t, s.OK("process_list", nil), "grp")
	require.Equal(t, "running", run["state"], "a pty run's leader must read as the run's: %v", run)
	s.OK("process_kill", map[string]any{"name": "grp", "signal": "TERM"})
	w := s.OK("process_wait", map[string]any{"name": "grp", "survivors": true, "timeout_ms": 20000})
	assert.Equal(t, "exited", w.Data["run"].(map[string]any)["state"], w.Text)
	assert.Equal(t, "SIGTERM", w.Data["run"].(map[string]any)["signal"], w.Text)
	_, err := os.Stat("/proc/" + bg)
	assert.True(t, os.IsNotExist(err), "the background sleep %s outlived the kill", bg)
}

// close:true on a pty run sends the terminal's EOF (^D): cat, at a line's
// start, reads end of file and exits 0.
func TestPtyCloseSendsEOF(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	s.OK("process_start", map[string]any{"name": "cat", "pty": true, "argv": []any{"cat"}})
	r := s.OK("process_write", map[string]any{"name": "cat", "data": "hi\n", "close": true})
	assert.Equal(t, true, r.Data["closed"], r.Text)
	w := s.OK("process_wait", map[string]any{"name": "cat", "timeout_ms": 20000})
	assert.Equal(t, float64(0), w.Data["run"].(map[string]any)["exit_code"], w.Text)
}

// What a pty run cannot be, and what only a pty run can do.
func TestPtyRefusals(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"name": "f", "pty": true, "capture_mode": "framed", "argv": []any{"true"}}, "framed cannot be used with pty"},
		{map[string]any{"name": "c", "cols": 80, "argv": []any{"true"}}, "with pty: true"},
		{map[string]any{"name": "w", "pty": true, "cols": 5, "argv": []any{"true"}}, "cols 5 is out of range 10..1000"},
		{map[string]any{"name": "h", "pty": true, "rows": 501, "argv": []any{"true"}}, "rows 501 is out of range 5..500"},
	} {
		r := s.Call("process_start", tc.args)
		assert.True(t, r.IsError, "%v: %s", tc.args, r.Text)
		assert.Contains(t, r.Text, tc.want)
	}
	s.OK("process_start", map[string]any{"name": "pipes", "argv": []any{"sleep", "30"}})
	r := s.Call("process_resize", map[string]any{"name": "pipes", "cols": 80, "rows": 24})
	assert.True(t, r.IsError, r.Text)
	assert.Contains(t, r.Text, "not started with pty: true")
	s.OK("process_kill", map[string]any{"name": "pipes", "signal": "KILL"})

	s.OK("process_start", map[string]any{"name": "done", "pty": true, "argv": []any{"true"}})
	s.OK("process_wait", map[string]any{"name": "done", "timeout_ms": 20000})
	r = s.Call("process_resize", map[string]any{"name": "done", "cols": 80, "rows": 24})
	assert.True(t, r.IsError, r.Text)
	assert.Contains(t, r.Text, "its terminal is gone")
}

// timeout_s reaches a pty run's processes: the supervisor signals the
// group of a leader that leads a session of its own.
func TestPtyTimeoutReachesItsGroup(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir(), "AGENT_BOX_TIMEOUT_GRACE_MS=300")
	s.OK("process_start", map[string]any{"name": "slow", "pty": true, "timeout_s": 1,
		"command": `trap '' HUP TERM; sleep 300 & echo "bg=$!"; exec sleep 301`})
	out, _ := ptyOutput(t, s, "slow", 0, `bg=\d+\r\n`)
	bg := regexp.MustCompile(`bg=(\d+)`).FindStringSubmatch(out)[1]
	w := s.OK("process_wait", map[string]any{"name": "slow", "survivors": true, "timeout_ms": 20000})
	run := w.Data["run"].(map[string]any)
	assert.Equal(t, true, run["timed_out"], w.Text)
	assert.Nil(t, run["survivors"], w.Text)
	_, err := os.Stat("/proc/" + bg)
	assert.True(t, os.IsNotExist(err), "the background sleep %s outlived the timeout", bg)
}

// The supervisor holds the terminal: when it dies the master closes, the
// kernel hangs the terminal up, and the session's leader gets SIGHUP.
func TestPtySupervisorDeathHangsUp(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	s := connect(t, state)
	r := s.OK("process_start", map[string]any{"name": "hup", "pty": true, "argv": []any{"sleep", "300"}})
	pid := int(abtest.Num(r.Run()["pid"]))
	rec, err := (&runrecord.Store{Root: state}).Read("hup", abtest.Str(r.Run()["run_id"]))
	require.NoError(t, err)
	require.NoError(t, unix.Kill(rec.SupervisorPID, unix.SIGKILL))
	abtest.WaitFor(t, "the hangup to end the sleep", 30*time.Second, func() bool {
		st, err := proc.ReadStat(pid)
		return err != nil || st.Dead()
	})
	run := abtest.RunOf(t, s.OK("process_list", nil), "hup")
	assert.Equal(t, "unknown", run["state"], "nobody recorded the exit: %v", run)
}

// A pty run's output is captured whole, up to the leader's last write
// before it exits (the master reads EIO only once the buffer is read), as
// the terminal wrote it: each "\n" as "\r\n".
func TestPtyOutputIsWholeAfterAFastExit(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	s.OK("process_start", map[string]any{"name": "burst", "pty": true, "command": `seq 1 20000`})
	w := s.OK("process_wait", map[string]any{"name": "burst", "timeout_ms": 20000})
	require.Equal(t, float64(0), w.Data["run"].(map[string]any)["exit_code"], w.Text)
	var want strings.Builder
	for i := 1; i <= 20000; i++ {
		fmt.Fprintf(&want, "%d\r\n", i)
	}
	all, _, _ := s.ReadAll("burst", 1<<20, false)
	abtest.SameBytes(t, []byte(want.String()), all, "the terminal's output")
}

// process_restart runs a pty run's spec again on a terminal of the size it
// had last; if_running reuse tells a pty run from one on pipes.
func TestPtyRestartKeepsTheTerminal(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	s.OK("process_start", map[string]any{"name": "r", "pty": true, "cols": 80, "rows": 24, "command": `stty size; exec sleep 300`})
	s.OK("process_resize", map[string]any{"name": "r", "cols": 90, "rows": 25})
	r := s.Call("process_start", map[string]any{"name": "r", "command": `stty size; exec sleep 300`, "if_running": "reuse"})
	assert.True(t, r.IsError, r.Text)
	assert.Contains(t, r.Text, "pty true (asked: false)")
	r = s.OK("process_restart", map[string]any{"name": "r", "grace_ms": 0})
	run := r.Data
	if inner, ok := r.Data["run"].(map[string]any); ok {
		run = inner
	}
	assert.Equal(t, true, run["pty"], r.Text)
	ptyOutput(t, s, "r", 0, `^25 90\r\n`)
	s.OK("process_kill", map[string]any{"name": "r", "signal": "KILL"})
}

// agent-box ps marks a pty run with its terminal's size.
func TestPsShowsAPtyRun(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	s := connect(t, state)
	s.OK("process_start", map[string]any{"name": "tty", "pty": true, "cols": 81, "rows": 22, "argv": []any{"sleep", "300"}})
	out, _, code := agentBox(t, state, "ps")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "[pty 81x22] sleep 300")
	s.OK("process_kill", map[string]any{"name": "tty", "signal": "KILL"})
}

// A secret printed on a terminal reaches the log as the line discipline
// wrote it, translated by the output flags the program has set at that
// moment (termios(3): ONLCR, OCRNL, OLCUC, TAB3, ONOCR/ONLRET); it is
// masked in every form, whatever stty did before the print.
func TestPtyMasksASecretTheTerminalTranslated(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	key := "-----BEGIN TEST KEY-----\r\nMIIEvQ\tIBADANbgkqhkiG9w0\nBAQEFAASCBKcw\n-----END TEST KEY-----"
	settings := []string{"", "olcuc", "-olcuc -onlcr ocrnl", "onlcr -ocrnl tab3", "tab0 onocr onlret", "olcuc tab3 ocrnl", "-opost"}
	var script strings.Builder
	for _, set := range settings {
		if set != "" {
			fmt.Fprintf(&script, "stty %s; ", set)
		}
		script.WriteString(`printf '<%s>\n' "$KEY"; `)
	}
	s.OK("process_start", map[string]any{"name": "pem", "pty": true, "command": script.String(),
		"secret_env": map[string]any{"KEY": key}})
	w := s.OK("process_wait", map[string]any{"name": "pem", "timeout_ms": 20000})
	require.Equal(t, float64(0), w.Data["run"].(map[string]any)["exit_code"], w.Text)
	all, _, _ := s.ReadAll("pem", 1<<20, false)
	out := strings.ToUpper(string(all))
	for _, part := range []string{"BEGIN TEST KEY", "MIIEVQ", "IBADANBGKQHKIG9W0", "BAQEFAASCBKCW", "END TEST KEY"} {
		assert.NotContains(t, out, part, "a part of the secret in the log: %q", all)
	}
	assert.Equal(t, len(settings), strings.Count(string(all), "<[redacted]>"), "one mask per print: %q", all)
}

// A program may close its descriptors of the terminal and open /dev/tty
// again (a daemon's stdio reset, script(1) -like wrappers): for a moment no
// descriptor of the slave is open, which a read of the master reports as
// EIO. The run's output goes on after that, and the program never blocks
// on a terminal nobody reads.
func TestPtyOutputGoesOnAfterTheTerminalIsReopened(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	// The sleep keeps the slave closed long enough for the supervisor's
	// read to see it closed; nothing the test can wait for shows that.
	s.OK("process_start", map[string]any{"name": "reopen", "pty": true,
		"command": `echo before; exec 0<&- 1>&- 2>&-; sleep 0.3; exec </dev/tty >/dev/tty 2>&1; seq 1 20000; echo after`})
	w := s.OK("process_wait", map[string]any{"name": "reopen", "timeout_ms": 20000})
	run := w.Data["run"].(map[string]any)
	require.Equal(t, "exited", run["state"], "the program blocked on its terminal: %s", w.Text)
	assert.Equal(t, float64(0), run["exit_code"], w.Text)
	var want strings.Builder
	want.WriteString("before\r\n")
	for i := 1; i <= 20000; i++ {
		fmt.Fprintf(&want, "%d\r\n", i)
	}
	want.WriteString("after\r\n")
	all, _, _ := s.ReadAll("reopen", 1<<20, false)
	abtest.SameBytes(t, []byte(want.String()), all, "the terminal's output")
}
