package chaos

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent-box/agent-box/logframe"
	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/runrecord"
)

// TestOracle checks the checker: each broken case must be reported, each
// sound one not, so that "violations=0" from the suites means something.
func TestOracle(t *testing.T) {
	t.Parallel()
	p := childParams{Tag: "oracle", N: 12, Code: 4}
	want := expectedOf(p)
	framed := func(out, errs []byte) []byte {
		b := logframe.AppendFrames(nil, logframe.Stdout, out)
		return logframe.AppendFrames(b, logframe.Stderr, errs)
	}
	code := func(n int) *runrecord.Exit { return &runrecord.Exit{Code: &n, At: time.Now()} }
	logCases := []struct {
		name     string
		format   string
		log      []byte
		exit     *runrecord.Exit
		closed   bool
		complete bool
		problem  string // "" for none
	}{
		{"raw whole", "raw", want.combined, code(4), true, true, ""},
		{"raw prefix", "raw", want.combined[:100], nil, false, false, ""},
		{"raw changed byte", "raw", append(append([]byte{}, want.combined[:50]...), 'X'), nil, false, false, "not a prefix"},
		{"raw cut but closed", "raw", want.combined[:100], code(4), true, false, "incomplete"},
		{"raw wrong code", "raw", want.combined, code(3), true, true, "exit code 3"},
		{"framed whole", logframe.FormatName, framed(want.stdout, want.stderr), code(4), true, true, ""},
		{"framed partial last line", logframe.FormatName, framed(want.stdout, want.stderr[:10])[:len(framed(want.stdout, want.stderr[:10]))-3], nil, false, false, ""},
		{"framed bad line", logframe.FormatName, append([]byte("3 QQ==\n"), framed(want.stdout, nil)...), nil, false, false, "line 0"},
		{"framed torn line inside", logframe.FormatName, append([]byte("1 QQ"), framed(want.stdout, nil)...), nil, false, false, "line 0"},
		{"framed streams swapped", logframe.FormatName, framed(want.stderr, want.stdout), nil, false, false, "not a prefix"},
	}
	for _, c := range logCases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "log"), c.log, 0o600); err != nil {
				t.Fatal(err)
			}
			rec := &runrecord.Record{LogFormat: c.format, LogPath: filepath.Join(dir, "log"), PID: 1,
				Exit: c.exit, OutputClosed: c.closed, LogBytes: int64(len(c.log)),
				Spec: runrecord.Spec{Argv: p.argv("/x")},
			}
			got := checkLog(&disk{Name: "n", RunID: "r", Dir: dir, Rec: rec})
			msg := strings.Join(got.problems, "; ")
			if c.problem == "" && msg != "" || c.problem != "" && !strings.Contains(msg, c.problem) {
				t.Errorf("problems %q, want one with %q", msg, c.problem)
			}
			if got.complete != c.complete {
				t.Errorf("complete = %v, want %v", got.complete, c.complete)
			}
		})
	}

	boot := "boot"
	rec := func(f func(r *runrecord.Record)) *disk {
		r := &runrecord.Record{BootID: boot, PID: 10, SupervisorPID: 9}
		f(r)
		raw, _ := runrecord.Encode(r)
		return &disk{Name: "n", RunID: "r", Rec: r, Raw: raw}
	}
	// A live child is in its supervisor's session, as a real run's is.
	with := func(d *disk, child, sup liveness) *disk {
		c := *d
		c.Child, c.Sup = child, sup
		if child == same {
			c.ChildSID = d.Rec.SupervisorPID
		}
		return &c
	}
	alive := rec(func(*runrecord.Record) {})
	exited := rec(func(r *runrecord.Record) { r.Exit = code(0) })
	listCases := []struct {
		name    string
		l       listed
		b, a    *disk
		problem string
	}{
		{"running, alive", listed{State: "running", Code: outcome.ReasonRunning}, with(alive, same, same), with(alive, same, same), ""},
		{"running for a dead child", listed{State: "running", Code: outcome.ReasonRunning}, with(alive, gone, same), with(alive, gone, same), "dead child"},
		{"unsupervised for a reused pid", listed{State: "running", Code: outcome.ReasonUnsupervised}, with(alive, reused, gone), with(alive, reused, gone), "dead child"},
		{"exiting with the supervisor dead", listed{State: "running", Code: outcome.ReasonExiting}, with(alive, gone, gone), with(alive, gone, gone), "supervisor is alive"},
		{"exited without an exit", listed{State: "exited", Code: outcome.ReasonExited}, with(alive, gone, gone), with(alive, gone, gone), "no exit"},
		{"exit recorded before, not exited", listed{State: "unknown", Code: outcome.ReasonSupervisorLost}, with(exited, gone, gone), with(exited, gone, gone), "final"},
		{"lost while the child lives", listed{State: "unknown", Code: outcome.ReasonSupervisorLost}, with(alive, gone, gone), with(alive, same, gone), "false death"},
		{"exited, facts moved on", listed{State: "exited", Code: outcome.ReasonExited, ExitCode: exited.Rec.Exit.Code}, with(alive, same, same), with(exited, gone, gone), ""},
		{"stable facts, other row", listed{State: "running", Code: outcome.ReasonExiting}, with(alive, same, same), with(alive, same, same), "matrix says running/running"},
		{"a genuine run read as foreign", listed{State: "unknown", Code: outcome.ReasonForeignProcess}, with(alive, same, gone), with(alive, same, gone), "genuine"},
		{"not in the store", listed{State: "running", Code: outcome.ReasonRunning}, nil, nil, "not in the store"},
		{"unrecognised reason", listed{State: "running"}, with(alive, same, same), with(alive, same, same), "unrecognised"},
	}
	for _, c := range listCases {
		t.Run(c.name, func(t *testing.T) {
			c.l.Name, c.l.RunID = "n", "r"
			msg := strings.Join(checkListed(c.l, c.b, c.a, boot), "; ")
			if c.problem == "" && msg != "" || c.problem != "" && !strings.Contains(msg, c.problem) {
				t.Errorf("got %q, want a violation with %q", msg, c.problem)
			}
		})
	}

	for _, c := range []struct{ state, reason, code string }{
		{"running", "running", "running"},
		{"running", "running, but its supervisor is gone: its exit will not be recorded", "unsupervised"},
		{"running", "process gone; its supervisor is about to record the exit", "exiting"},
		{"unknown", "process and supervisor are gone and no exit was recorded", "supervisor_lost"},
		{"unknown", "start was interrupted before the process was recorded", "start_interrupted"},
		{"exited", "exit code 3", "exited"},
		{"exited", "killed by SIGKILL; 1 process(es) of the run still running: 7", "exited_survivors"},
	} {
		if got := reasonCode(c.state, c.reason); string(got) != c.code {
			t.Errorf("reasonCode(%q, %q) = %q, want %q", c.state, c.reason, got, c.code)
		}
	}
}
