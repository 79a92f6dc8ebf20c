package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agent-box/agent-box/internal/rawmcp"
)

// obj decodes a JSON object as rawmcp decodes structuredContent.
func obj(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("bad fixture %s: %v", s, err)
	}
	return m
}

// wantErr fails unless err is non-nil and mentions every one of parts.
func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one mentioning %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not mention %q", err, p)
		}
	}
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

func TestCheckOK(t *testing.T) {
	var ok rawmcp.ToolResult
	noErr(t, checkOK(&ok))
	var bad rawmcp.ToolResult
	if err := json.Unmarshal([]byte(`{"isError":true,"content":[{"type":"text","text":"run \"demo\" not found"}]}`), &bad); err != nil {
		t.Fatal(err)
	}
	wantErr(t, checkOK(&bad), "isError: want false, got true", `run "demo" not found`)
}

func TestCheckWait(t *testing.T) {
	const id = "20261203T071252.373253094Z-5717c0"
	good := `{"wait_timed_out":false,"duration_ms":3026,"run":{"name":"demo","run_id":"` + id + `","state":"exited","exit_code":3}}`
	noErr(t, checkWait(obj(t, good), id, 3))

	for _, tc := range []struct {
		name, res string
		parts     []string
	}{
		{"wrong exit code", `{"wait_timed_out":false,"run":{"run_id":"` + id + `","state":"exited","exit_code":1}}`,
			[]string{"exit_code: want 3", "got 1"}},
		{"no exit code", `{"wait_timed_out":false,"run":{"run_id":"` + id + `","state":"exited","exit_code":null}}`,
			[]string{"exit_code: want 3", "got <nil>"}},
		{"signalled", `{"wait_timed_out":false,"run":{"run_id":"` + id + `","state":"exited","exit_code":3,"signal":"TERM"}}`,
			[]string{"signal: want none, got TERM"}},
		{"still running", `{"wait_timed_out":true,"run":{"run_id":"` + id + `","state":"running","exit_code":null}}`,
			[]string{"wait_timed_out: want false, got true"}},
		{"unknown", `{"wait_timed_out":false,"run":{"run_id":"` + id + `","state":"unknown","reason":"supervisor gone","exit_code":null}}`,
			[]string{`state: want "exited", got "unknown"`, "supervisor gone"}},
		{"another run", `{"wait_timed_out":false,"run":{"run_id":"other","state":"exited","exit_code":3}}`,
			[]string{"run_id: want " + id, `got "other"`}},
	} {
		t.Run(tc.name, func(t *testing.T) { wantErr(t, checkWait(obj(t, tc.res), id, 3), tc.parts...) })
	}
}

func TestCheckListedState(t *testing.T) {
	const id = "20261203T071252.373253094Z-5717c0"
	list := obj(t, `{"total":2,"runs":[{"name":"other","run_id":"x","state":"exited"},{"name":"demo","run_id":"`+id+`","state":"running","log_bytes":102}]}`)
	run, err := findRun(list, "demo")
	noErr(t, err)
	noErr(t, checkRun(run, id, "running"))
	wantErr(t, checkRun(run, id, "exited"), `state: want "exited", got "running"`)
	wantErr(t, checkRun(run, "another-id", "running"), "run_id: want another-id", `got "`+id+`"`)

	exited := obj(t, `{"name":"demo","run_id":"`+id+`","state":"exited","exit_code":3}`)
	wantErr(t, checkRun(exited, id, "running"), `state: want "running", got "exited"`)
	wantErr(t, checkRun(nil, id, "running"), "want a run, got none")
	wantErr(t, checkRun(obj(t, `{"state":"running"}`), "", "running"), "run_id: want one, got none")

	_, err = findRun(obj(t, `{"total":1,"runs":[{"name":"other"}]}`), "demo")
	wantErr(t, err, `want one named "demo"`, `got ["other"]`)
}

// windows are tail_log results of one framed run read from offset 0 in
// three calls.
var windows = []string{
	`{"offset":0,"end_offset":19,"chunks":[{"stream":"stderr","text":"warning 1\n"}],"eof":false}`,
	`{"offset":19,"end_offset":102,"chunks":[{"stream":"stdout","text":"step 1\nstep 2\n"},{"stream":"stderr","text":"warning 2\nwarning 3\n"},{"stream":"stdout","text":"step 3\n"}],"eof":false}`,
	`{"offset":102,"end_offset":204,"chunks":[{"stream":"stdout","text":"step 4\nstep 5\nstep 6\n"},{"stream":"stderr","text":"warning 4\nwarning 5\nwarning 6\n"}],"eof":true}`,
}

func TestLogReassembled(t *testing.T) {
	var a logAssembler
	for _, w := range windows {
		noErr(t, a.add(obj(t, w)))
	}
	if !a.eof || a.next != 204 {
		t.Errorf("eof %v at %d, want true at 204", a.eof, a.next)
	}
	noErr(t, checkOutput("stdout", wantStdout, a.stdout))
	noErr(t, checkOutput("stderr", wantStderr, a.stderr))
}

func TestLogWrongReassembly(t *testing.T) {
	t.Run("a window missing", func(t *testing.T) {
		var a logAssembler
		noErr(t, a.add(obj(t, windows[0])))
		wantErr(t, a.add(obj(t, windows[2])), "offset: want 19", "got 102")
	})
	t.Run("a window twice", func(t *testing.T) {
		var a logAssembler
		noErr(t, a.add(obj(t, windows[0])))
		noErr(t, a.add(obj(t, windows[1])))
		wantErr(t, a.add(obj(t, windows[1])), "offset: want 102", "got 19")
	})
	t.Run("not framed", func(t *testing.T) {
		var a logAssembler
		wantErr(t, a.add(obj(t, `{"offset":0,"end_offset":5,"content":"step\n"}`)), "want chunks by stream (a framed run)")
	})
	t.Run("lossy", func(t *testing.T) {
		var a logAssembler
		wantErr(t, a.add(obj(t, `{"offset":0,"end_offset":5,"chunks":[{"stream":"stdout","text":"\ufffd"}],"lossy":true}`)), "lossy: want false")
	})
	t.Run("stopped early", func(t *testing.T) {
		var a logAssembler
		noErr(t, a.add(obj(t, windows[0])))
		noErr(t, a.add(obj(t, windows[1])))
		wantErr(t, checkOutput("stdout", wantStdout, a.stdout), "stdout: want the 42 bytes the command prints, got 21", "first difference at byte 21", `want "step 4\n`)
	})
	t.Run("wrong bytes", func(t *testing.T) {
		got := []byte(strings.Replace(string(wantStderr), "warning 4", "warning 9", 1))
		wantErr(t, checkOutput("stderr", wantStderr, got), "first difference at byte 38", `want "4\nwarning 5`, `got "9\nwarning 5`)
	})
}

func TestCheckAfterDrop(t *testing.T) {
	before := []byte("step 1\n")
	noErr(t, checkAfterDrop(before, 34, 102, wantStdout))
	noErr(t, checkAfterDrop(nil, 19, 102, wantStdout))

	wantErr(t, checkAfterDrop(before, 34, 34, wantStdout), "want more than the 34 bytes on disk before the drop, got 34")
	wantErr(t, checkAfterDrop(before, 34, 102, before), "steps after the drop: want at least one", "got none")
	wantErr(t, checkAfterDrop([]byte("step 2\n"), 34, 102, wantStdout), `want it to start with the "step 2\n" seen before the drop`)
}
