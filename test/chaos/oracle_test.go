package chaos

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agent-box/agent-box/internal/abtest"
	"github.com/agent-box/agent-box/logframe"
	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/runrecord"
)

// listed is one run of a process_list answer.
type listed struct {
	Name, RunID string
	State       string
	Reason      string         // the sentence the agent reads
	Code        outcome.Reason // the matrix row it names; "" when unrecognised
	ExitCode    *int
	Signal      string
}

func parseList(r abtest.Result) []listed {
	var out []listed
	list, _ := r.Data["runs"].([]any)
	for _, x := range list {
		m, _ := x.(map[string]any)
		l := listed{Name: abtest.Str(m["name"]), RunID: abtest.Str(m["run_id"]), State: abtest.Str(m["state"]),
			Reason: abtest.Str(m["reason"]), Signal: abtest.Str(m["signal"])}
		if v, ok := m["exit_code"].(float64); ok {
			c := int(v)
			l.ExitCode = &c
		}
		l.Code = reasonCode(l.State, l.Reason)
		out = append(out, l)
	}
	return out
}

// reasonCode maps the reason sentence of runs.describe back to its row of
// the outcome matrix (docs/architecture/outcome.md).
func reasonCode(state, reason string) outcome.Reason {
	switch outcome.State(state) {
	case outcome.Exited:
		if strings.Contains(reason, "still running") {
			return outcome.ReasonExitedSurvivors
		}
		return outcome.ReasonExited
	case outcome.Running:
		switch {
		case reason == "running":
			return outcome.ReasonRunning
		case reason == "starting":
			return outcome.ReasonStarting
		case strings.HasPrefix(reason, "running, but its supervisor is gone"):
			return outcome.ReasonUnsupervised
		case strings.HasPrefix(reason, "process gone; its supervisor is about to record"):
			return outcome.ReasonExiting
		}
	case outcome.Unknown:
		switch {
		case strings.HasPrefix(reason, "process and supervisor are gone") && strings.Contains(reason, "of its group still running"):
			return outcome.ReasonLostSurvivors
		case strings.HasPrefix(reason, "process and supervisor are gone"):
			return outcome.ReasonSupervisorLost
		case strings.HasPrefix(reason, "the record is not this run's: its supervisor"):
			return outcome.ReasonForeignRecord
		case strings.HasPrefix(reason, "the record is not this run's: its pid"):
			return outcome.ReasonForeignProcess
		case strings.HasPrefix(reason, "start was interrupted"):
			return outcome.ReasonStartInterrupted
		case strings.HasPrefix(reason, "could not start"):
			return outcome.ReasonStartFailed
		case strings.HasPrefix(reason, "recorded on another boot"):
			return outcome.ReasonRebooted
		case strings.HasPrefix(reason, string(outcome.ReasonCorrupt)):
			return outcome.ReasonCorrupt
		}
	}
	return ""
}

// toOutcome is the part of a record and of this test's probes that
// outcome.Decide takes.
func toOutcome(d *disk, boot string) (outcome.Run, outcome.Facts) {
	r := d.Rec
	run := outcome.Run{BootID: r.BootID, PID: r.PID, SupervisorPID: r.SupervisorPID,
		ExitRecorded: r.Exit != nil, StartFailed: r.StartError != ""}
	lv := func(l liveness) outcome.Liveness {
		return map[liveness]outcome.Liveness{gone: outcome.Gone, same: outcome.Same, reused: outcome.Reused}[l]
	}
	// The children of these tests never fork, so an exited run has no
	// survivors.
	// Self is left zero: the server that listed is gone by now, and the
	// store's pids are never its own.
	return run, outcome.Facts{BootID: boot, Child: lv(d.Child), ChildSID: d.ChildSID, Supervisor: lv(d.Sup)}
}

// checkListed checks one listed run against the store and the processes as
// they were before (b, nil if its dir did not exist yet) and after (a) the
// process_list call. A dead process stays dead and a record only gains
// facts, so a fact seen before the call held during it, and a process alive
// after it was alive during it: every check below is free of timing races.
func checkListed(l listed, b, a *disk, boot string) []string {
	var v []string
	bad := func(format string, args ...any) {
		v = append(v, fmt.Sprintf("%s/%s listed %s (%s): %s", l.Name, l.RunID, l.State, l.Reason, fmt.Sprintf(format, args...)))
	}
	if a == nil {
		bad("listed, but its run dir is not in the store")
		return v
	}
	if l.Code == "" {
		bad("unrecognised state/reason (runs.describe changed? update reasonCode)")
		return v
	}
	if a.Rec == nil {
		// No record.json (a start killed between mkdir and the first
		// write) or an undecodable one (reported by checkRecords).
		if l.State != string(outcome.Unknown) || l.Code != outcome.ReasonCorrupt {
			bad("a run without a readable record must be unknown/corrupt_record")
		}
		return v
	}
	rec := a.Rec
	if l.Code == outcome.ReasonCorrupt && b != nil && b.Rec != nil {
		bad("its record decodes fine (it did before the call)")
	}
	if l.Code == outcome.ReasonRebooted {
		bad("the machine did not reboot (record boot id %q, now %q)", rec.BootID, boot)
	}
	if l.Code == outcome.ReasonForeignRecord || l.Code == outcome.ReasonForeignProcess {
		bad("every record here is a genuine run's, whatever was killed")
	}
	if l.State == string(outcome.Exited) {
		if rec.Exit == nil {
			bad("exited, but the record has no exit")
		} else {
			if (l.ExitCode == nil) != (rec.Exit.Code == nil) || l.ExitCode != nil && *l.ExitCode != *rec.Exit.Code || l.Signal != rec.Exit.Signal {
				bad("exit_code=%v signal=%q, but the record says code=%v signal=%q", ptr(l.ExitCode), l.Signal, ptr(rec.Exit.Code), rec.Exit.Signal)
			}
		}
	}
	if b != nil && b.Rec != nil && b.Rec.Exit != nil && l.State != string(outcome.Exited) {
		bad("the exit was recorded before the call: a recorded exit is final")
	}
	switch l.Code {
	case outcome.ReasonRunning, outcome.ReasonUnsupervised:
		if rec.PID == 0 {
			bad("running with no child pid recorded")
		}
		if b != nil && b.Rec != nil && b.Rec.PID > 0 && b.Child != same {
			bad("running for a dead child: pid %d was %s before the call", b.Rec.PID, b.Child)
		}
	}
	switch l.Code {
	case outcome.ReasonRunning, outcome.ReasonExiting, outcome.ReasonStarting:
		if b != nil && b.Rec != nil && b.Rec.SupervisorPID > 0 && b.Sup != same {
			bad("says the supervisor is alive, but pid %d was %s before the call", b.Rec.SupervisorPID, b.Sup)
		}
	}
	switch l.Code {
	case outcome.ReasonSupervisorLost:
		if rec.PID > 0 && a.Child == same {
			bad("child pid %d is alive (after the call too): a false death", rec.PID)
		}
		if rec.SupervisorPID > 0 && a.Sup == same {
			bad("supervisor pid %d is alive (after the call too)", rec.SupervisorPID)
		}
	case outcome.ReasonStartInterrupted:
		if b != nil && b.Rec != nil && b.Rec.PID > 0 {
			bad("the child pid %d was recorded before the call", b.Rec.PID)
		}
		if b != nil && b.Rec != nil && b.Rec.SupervisorPID > 0 && a.Sup == same {
			bad("its supervisor pid %d is alive: the start is not interrupted", rec.SupervisorPID)
		}
	case outcome.ReasonStartFailed:
		if rec.StartError == "" {
			bad("no start_error in the record")
		}
	}
	// When nothing changed across the call, the answer is exactly the
	// matrix's for the facts this test probed.
	if b != nil && b.Rec != nil && bytes.Equal(b.Raw, a.Raw) && b.Child == a.Child && b.Sup == a.Sup {
		run, facts := toOutcome(a, boot)
		want := outcome.Decide(run, facts)
		if string(want.State) != l.State || want.Reason != l.Code {
			bad("the facts did not change during the call, and for them the matrix says %s/%s (child %s, supervisor %s)",
				want.State, want.Reason, a.Child, a.Sup)
		}
	}
	return v
}

func ptr(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// checkStore checks that every run dir was listed, that every record
// decodes, and that every log is prefix-consistent.
func checkStore(list []listed, before, after map[string]*disk, boot string) (v []string) {
	seen := map[string]bool{}
	for _, l := range list {
		k := l.Name + "/" + l.RunID
		seen[k] = true
		v = append(v, checkListed(l, before[k], after[k], boot)...)
	}
	for k := range before {
		if !seen[k] {
			v = append(v, fmt.Sprintf("%s: in the store before the call but not listed by a fresh server", k))
		}
	}
	for _, d := range after {
		if d.Err != nil {
			v = append(v, fmt.Sprintf("%s: torn or unreadable record.json: %v", d.key(), d.Err))
		}
		v = append(v, checkLog(d).problems...)
	}
	return v
}

// logCheck is what checkLog found out about one run's log.
type logCheck struct {
	ours     bool // the run is one of this test's children
	complete bool // the log holds the child's whole output
	problems []string
}

// checkLog checks d's log against the child's deterministic output: a
// combined log must be a prefix of it; in a framed log every complete line
// must be a valid frame, only the last line may be partial, and each
// stream decoded must be a prefix of what the child wrote to it. Once the
// supervisor recorded a normal exit and the closing of the output, the log
// must be complete, the code exact and the record's byte count the file's.
func checkLog(d *disk) (c logCheck) {
	if d.Rec == nil {
		return c
	}
	p, ok := parseChild(d.Rec.Argv)
	if !ok || p.Check != "" {
		return c
	}
	c.ours = true
	bad := func(format string, args ...any) {
		c.problems = append(c.problems, fmt.Sprintf("%s log (%s): %s", d.key(), d.Rec.LogFormat, fmt.Sprintf(format, args...)))
	}
	path := filepath.Join(d.Dir, "log")
	if d.Rec.LogPath != path {
		bad("record log_path %q, want %q", d.Rec.LogPath, path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		if os.IsNotExist(err) && d.Rec.PID == 0 {
			return c // the supervisor never got as far as creating it
		}
		bad("%v", err)
		return c
	}
	want := expectedOf(p)
	switch d.Rec.LogFormat {
	case "raw":
		if !bytes.HasPrefix(want.combined, data) {
			bad("not a prefix of the child's output: %s", firstDiff(want.combined, data))
		}
		c.complete = bytes.Equal(want.combined, data)
	case logframe.FormatName:
		var out, errs []byte
		lines := bytes.SplitAfter(data, []byte("\n"))
		partial := 0
		for i, line := range lines {
			if len(line) == 0 {
				continue
			}
			if line[len(line)-1] != '\n' {
				if i != len(lines)-1 {
					bad("line %d is partial but not the last", i)
				}
				partial = len(line)
				continue
			}
			s, payload, err := logframe.ParseLine(nil, line)
			if err != nil {
				bad("line %d: %v", i, err)
				return c
			}
			if s == logframe.Stdout {
				out = append(out, payload...)
			} else {
				errs = append(errs, payload...)
			}
		}
		if !bytes.HasPrefix(want.stdout, out) {
			bad("stdout is not a prefix of the child's: %s", firstDiff(want.stdout, out))
		}
		if !bytes.HasPrefix(want.stderr, errs) {
			bad("stderr is not a prefix of the child's: %s", firstDiff(want.stderr, errs))
		}
		c.complete = partial == 0 && bytes.Equal(want.stdout, out) && bytes.Equal(want.stderr, errs)
	default:
		bad("unknown log_format %q", d.Rec.LogFormat)
		return c
	}
	if r := d.Rec; r.OutputClosed && r.Exit != nil {
		if r.LogBytes != int64(len(data)) || r.LogDropped != 0 || r.LogError != "" {
			bad("final record says log_bytes=%d dropped=%d error=%q, the file has %d bytes", r.LogBytes, r.LogDropped, r.LogError, len(data))
		}
		if r.Exit.Code != nil {
			if !c.complete {
				bad("exit and output_closed recorded, but the log is incomplete (%d bytes)", len(data))
			}
			if *r.Exit.Code != p.Code {
				bad("exit code %d recorded, the child exits with %d", *r.Exit.Code, p.Code)
			}
		}
	}
	return c
}

func firstDiff(want, got []byte) string {
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	return fmt.Sprintf("%d bytes, want at most %d; first difference at byte %d: got %q, want %q",
		len(got), len(want), i, got[i:min(len(got), i+30)], want[i:min(len(want), i+30)])
}

// recordsOf lists the store with runrecord itself, as the brief's
// "store lists exactly one run" asks.
func recordsOf(root, name string) ([]runrecord.Entry, error) {
	return (&runrecord.Store{Root: root}).List(name, nil)
}
