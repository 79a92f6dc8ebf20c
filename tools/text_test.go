package tools

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"

	"github.com/agent-box/agent-box/logread"
	"github.com/agent-box/agent-box/runs"
)

func TestCommandTextIsBoundedAndQuoted(t *testing.T) {
	long := strings.Repeat("é", 3000) // 6000 bytes, two per rune
	cases := []struct {
		name string
		run  runs.Run
		want string // exact, or a prefix when cut
		cut  bool
	}{
		{"short command", runs.Run{Command: "go test ./..."}, `command="go test ./..."`, false},
		{"newline cannot fake a field", runs.Run{Command: "true\nstate=exited"}, `command="true\nstate=exited"`, false},
		{"long command cut on a rune", runs.Run{Command: long}, `command="` + strings.Repeat("é", textFieldMax/2) + `"...(6000 bytes in all)`, true},
		{"short argv", runs.Run{Argv: []string{"ls", "-l"}}, `argv=["ls" "-l"]`, false},
		{"long argv", runs.Run{Argv: append([]string{"sh", "-c", long}, "a", "b")},
			`argv=["sh" "-c" "` + strings.Repeat("é", (textFieldMax-3)/2) + `"...(6000 bytes in all) ...(2 more)]`, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := commandOf(c.run)
			assert.Equal(t, c.want, got)
			assert.True(t, utf8.ValidString(got))
			assert.Less(t, len(got), 3*textFieldMax, "bounded")
		})
	}
}

func TestClippedNeverSplitsAQuote(t *testing.T) {
	for n := 0; n < 12; n++ {
		s := strings.Repeat(`"\`, n) + "\x00é"
		got := clipped(s, 5)
		quoted, _, _ := strings.Cut(got, "...(")
		_, err := strconv.Unquote(quoted)
		assert.NoError(t, err, "%q -> %q", s, got)
	}
}

// Past listTextMax runs the text shows every one that is not over before
// the newest exited ones: the running run an agent looks for after a
// reconnect is never left out because of its name.
func TestListTextShowsRunningRunsFirst(t *testing.T) {
	var rs []runs.Run
	for i := range 300 {
		rs = append(rs, runs.Run{Name: fmt.Sprintf("job-%03d", i), RunID: fmt.Sprintf("20260101T000000.%09dZ-000000", i), State: "exited"})
	}
	rs = append([]runs.Run{{Name: "aaa", RunID: "20250101T000000.000000000Z-000000", State: "running"}}, rs...)
	text := listText(runs.Page{Runs: rs, Total: len(rs)}, false)
	assert.Contains(t, text, "aaa run_id=", "the running run, oldest and first by name")
	assert.Contains(t, text, "job-299 ", "the newest")
	assert.NotContains(t, text, "job-249 ", "older than the newest 49")
	assert.Equal(t, listTextMax, strings.Count(text, " run_id="))
}

// A grep answer reads like grep -b -C: offset and ":" for a match, "-"
// for context, "--" between groups, a cut line saying its length and
// where it starts; none says "0 matching lines".
func TestTailTextGrep(t *testing.T) {
	o := TailOutput{Name: "t", RunID: "r", Encoding: "text", EOF: true, grep: true, Matches: []logread.Match{
		{Offset: 2, Line: "x.go:7: want 2", Context: true, Group: true},
		{Offset: 17, Line: "--- FAIL: T", Bytes: 900},
		{Offset: 918, Line: "ok", Context: true},
		{Offset: 990, Line: "--- FAIL: U", Group: true},
	}}
	text := tailText(o)
	assert.Contains(t, text, ` 2 matching lines and 2 context lines, each after its byte offset (context: "offset-", groups split by "--");`)
	assert.True(t, strings.HasSuffix(text, "]\n2- x.go:7: want 2\n17: --- FAIL: T ...[cut: the line is 900 bytes, from offset 17]\n918- ok\n--\n990: --- FAIL: U\n"), text)

	o.Matches = nil
	assert.Contains(t, tailText(o), " 0 matching lines;")

	// Empty before the end: with context, the last lines may be waiting
	// for a match to come, not only a line for its end.
	o.EOF, o.Truncated, o.context = false, true, true
	assert.Contains(t, tailText(o), "the last lines wait for what follows them")
	o.EOF, o.Truncated, o.context = true, false, false
	o.Matches = []logread.Match{{Offset: 4, Stream: "stderr", Line: "FAIL"}}
	text = tailText(o)
	assert.Contains(t, text, " 1 matching line, each after its byte offset;")
	assert.True(t, strings.HasSuffix(text, "]\n4 stderr: FAIL\n"), text)
	// From an offset just after a match (not only a grep's end offset),
	// the lines after it are context whose match is not in the answer.
	o.Offset, o.Matches = 7, []logread.Match{{Offset: 7, Line: "next", Context: true, Group: true, Continues: true}}
	assert.Contains(t, tailText(o), ` 0 matching lines and 1 context lines, each after its byte offset (context: "offset-", groups split by "--") (1 of the context lines follow a match before offset 7, not in this answer);`)

	// A part of a line longer than a window says so, not that the line is
	// as long as the part.
	o.Offset, o.Matches = 0, []logread.Match{{Offset: 0, Line: "FAIL 000", Bytes: 1000, Part: true}, {Offset: 1000, Line: "0000", Part: true}}
	text = tailText(o)
	assert.True(t, strings.HasSuffix(text, "]\n0: FAIL 000 ...[cut: part of a line longer than a window; this part is 1000 bytes, from offset 0]\n"+
		"1000: 0000 [part of a line longer than a window, from offset 1000]\n"), text)
}

// The text of a framed run's output marks what stderr wrote, line by line;
// structured content keeps the streams as they are.
func TestFramedTextMarksStderr(t *testing.T) {
	chunks := []logread.Chunk{{Stream: "stdout", Text: "building\n"}, {Stream: "stderr", Text: "warn: a\nerr"}, {Stream: "stdout", Text: "!\n"}, {Stream: "stderr", Text: "or\n"}}
	want := "building\n[stderr] warn: a\n[stderr] err!\n[stderr] or\n"
	o := TailOutput{Name: "t", RunID: "r", Encoding: "text", Content: "building\nwarn: a\nerr!\nor\n", Chunks: chunks}
	text := tailText(o)
	assert.True(t, strings.HasSuffix(text, fmt.Sprintf("; %d bytes of text follow]\n%s", len(want), want)), text)

	res := runs.WaitResult{End: runs.End{Run: runs.Run{Name: "t", State: "exited"}}}
	res.Output, res.OutputChunks, res.OutputWhole = o.Content, chunks, true
	assert.Contains(t, waitText(res, 0), fmt.Sprintf("[last lines of output; %d bytes follow]\n%s", len(want), want))
}

func TestUsageText(t *testing.T) {
	for _, c := range []struct {
		name string
		u    *runs.Usage
		want string
	}{
		{"unknown", nil, ""},
		{"running", &runs.Usage{MemoryBytes: 104 << 20, PeakMemoryBytes: 110<<20 + 5, CPUMS: 1234, Procs: 3, From: runs.UsageFromProc},
			" mem=104M peak_mem=110M cpu=1.2s procs=3"},
		{"small", &runs.Usage{MemoryBytes: 1536 << 10, PeakMemoryBytes: 900, CPUMS: 0, Procs: 1, From: runs.UsageFromCgroup},
			" mem=1.5M peak_mem=900B cpu=0s procs=1"},
		{"at exit", &runs.Usage{PeakMemoryBytes: 3 << 30, CPUMS: 205_400, From: runs.UsageAtExit}, " at_exit: peak_mem=3.0G cpu=3m25s"},
		{"at exit, cpu only", &runs.Usage{CPUMS: 340, From: runs.UsageAtExit}, " at_exit: cpu=340ms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, usageText(c.u))
		})
	}
	line := runLine(runs.Run{Name: "web", RunID: "x", State: "running", PID: 5,
		Usage: &runs.Usage{MemoryBytes: 1 << 20, CPUMS: 20, Procs: 2, From: runs.UsageFromProc}})
	assert.Contains(t, line, "pid=5 mem=1.0M cpu=20ms procs=2 ")
}

// A wait for several runs says each end, each on lines of its own (an
// output without its newline does not run into the next), and names the
// runs still running.
func TestWaitTextOfSeveral(t *testing.T) {
	end := func(name, out string) runs.End {
		e := runs.End{Run: runs.Run{Name: name, State: "exited"}}
		e.Output, e.OutputWhole = out, true
		return e
	}
	res := runs.WaitResult{End: end("a", "prompt>"), Ends: []runs.End{end("b", "done\n")}, Running: []string{"c"},
		Others: []runs.Run{{Name: "c", State: "running"}}}
	text := waitText(res, 0)
	assert.Contains(t, text, "prompt>\nb ", text)
	assert.True(t, strings.HasSuffix(text, "done\nstill running: c\n"), text)
	assert.NotContains(t, text, "also waited on: c", "a running one is named, not described")

	res = runs.WaitResult{End: end("a", "prompt>"), Running: []string{"c"}}
	assert.True(t, strings.HasSuffix(waitText(res, 0), "prompt>\nstill running: c\n"))
}
