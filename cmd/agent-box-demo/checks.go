package main

// The demo's checks: pure functions of the structured results it got, each
// returning an error that says what was expected and what was seen.

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/agent-box/agent-box/internal/rawmcp"
)

// checkOK fails a tool result with isError set.
func checkOK(res *rawmcp.ToolResult) error {
	if !res.IsError {
		return nil
	}
	return fmt.Errorf("isError: want false, got true: %s", strings.TrimSpace(res.Text()))
}

// findRun returns the run named name from a process_list result.
func findRun(list map[string]any, name string) (map[string]any, error) {
	runs, _ := list["runs"].([]any)
	var names []string
	for _, x := range runs {
		r, _ := x.(map[string]any)
		if r["name"] == name {
			return r, nil
		}
		names = append(names, fmt.Sprintf("%q", str(r["name"])))
	}
	return nil, fmt.Errorf("runs: want one named %q, got [%s]", name, strings.Join(names, " "))
}

// checkRun checks a run's id (any non-empty one when wantID is "") and
// state.
func checkRun(run map[string]any, wantID, wantState string) error {
	if run == nil {
		return fmt.Errorf("structured result: want a run, got none")
	}
	id := str(run["run_id"])
	switch {
	case wantID == "" && id == "":
		return fmt.Errorf("run_id: want one, got none")
	case wantID != "" && id != wantID:
		return fmt.Errorf("run_id: want %s (the run started in connection 1), got %q", wantID, id)
	}
	if got := str(run["state"]); got != wantState {
		return fmt.Errorf("state: want %q, got %q (reason %q)", wantState, got, str(run["reason"]))
	}
	return nil
}

// checkWait checks a process_wait result: the run ended by exiting with
// wantExit.
func checkWait(res map[string]any, runID string, wantExit int) error {
	if res["wait_timed_out"] != false {
		return fmt.Errorf("wait_timed_out: want false, got %v", res["wait_timed_out"])
	}
	run, _ := res["run"].(map[string]any)
	if err := checkRun(run, runID, "exited"); err != nil {
		return err
	}
	code, ok := run["exit_code"].(float64)
	if !ok {
		return fmt.Errorf("exit_code: want %d, got %v", wantExit, run["exit_code"])
	}
	if int(code) != wantExit {
		return fmt.Errorf("exit_code: want %d (what the command exits with), got %v", wantExit, code)
	}
	if sig := str(run["signal"]); sig != "" {
		return fmt.Errorf("signal: want none, got %s", sig)
	}
	return nil
}

// logAssembler puts a framed run's log back together from tail_log windows
// in text encoding, each of which must start where the previous one ended.
type logAssembler struct {
	next           int64 // the offset the next window must start at
	stdout, stderr []byte
	eof            bool
}

func (a *logAssembler) add(w map[string]any) error {
	if w == nil {
		return fmt.Errorf("structured result: want a log window, got none")
	}
	if off := num(w["offset"]); off != a.next {
		return fmt.Errorf("offset: want %d (the previous end_offset), got %d", a.next, off)
	}
	end := num(w["end_offset"])
	if end < a.next {
		return fmt.Errorf("end_offset: want at least the offset %d, got %d", a.next, end)
	}
	if w["lossy"] == true {
		return fmt.Errorf("lossy: want false (the output is ASCII), got true")
	}
	if c, ok := w["content"]; ok {
		return fmt.Errorf("content: want chunks by stream (a framed run), got content %v", c)
	}
	if n := num(w["skipped_bytes"]); n > 0 {
		return fmt.Errorf("skipped_bytes: want 0, got %d", n)
	}
	// A framed run's text is its chunks, each of one stream, in the order
	// written (none: an empty window).
	chunks, _ := w["chunks"].([]any)
	for i, c := range chunks {
		m, _ := c.(map[string]any)
		text, ok := m["text"].(string)
		switch {
		case !ok:
			return fmt.Errorf("chunks[%d]: want a text, got %v", i, c)
		case m["stream"] == "stdout":
			a.stdout = append(a.stdout, text...)
		case m["stream"] == "stderr":
			a.stderr = append(a.stderr, text...)
		default:
			return fmt.Errorf("chunks[%d]: want stream stdout or stderr, got %v", i, m["stream"])
		}
	}
	a.next = end
	a.eof = w["eof"] == true
	return nil
}

// checkOutput compares one stream of the reassembled log with what the
// command prints, and says where they part.
func checkOutput(stream string, want, got []byte) error {
	if bytes.Equal(want, got) {
		return nil
	}
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	return fmt.Errorf("%s: want the %d bytes the command prints, got %d; first difference at byte %d: want %q, got %q",
		stream, len(want), len(got), i, want[i:min(len(want), i+40)], got[i:min(len(got), i+40)])
}

// checkAfterDrop checks that output kept landing on disk after the
// connection dropped: the log grew past the bytesBefore seen before the
// drop by the time the new agent-box listed the run (bytesAtReconnect),
// and the final stdout has steps beyond the seenBefore part of it.
func checkAfterDrop(seenBefore []byte, bytesBefore, bytesAtReconnect int64, final []byte) error {
	if bytesAtReconnect <= bytesBefore {
		return fmt.Errorf("log_bytes at the reconnect: want more than the %d bytes on disk before the drop, got %d: nothing landed while no agent-box ran",
			bytesBefore, bytesAtReconnect)
	}
	if !bytes.HasPrefix(final, seenBefore) {
		return fmt.Errorf("stdout: want it to start with the %q seen before the drop, got %q", seenBefore, final)
	}
	if !bytes.Contains(final[len(seenBefore):], []byte("step")) {
		return fmt.Errorf("steps after the drop: want at least one after the %q seen before it, got none (stdout %q)", seenBefore, final)
	}
	return nil
}

// num reads a JSON number as decoded into any (-1 for anything else).
func num(v any) int64 {
	if f, ok := v.(float64); ok {
		return int64(f)
	}
	return -1
}

// str reads a JSON string ("" for anything else).
func str(v any) string { s, _ := v.(string); return s }
