package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCannedBox: a canned box answers initialize, tools/list and ping with
// what it was given, process_list with the given list, every run id in it
// suffixed with the box's index, another tool with an error result and
// another method with a JSON-RPC error, one line a request, in order;
// notifications get no answer.
func TestCannedBox(t *testing.T) {
	const id1, id2 = "20261206T093202.082358046Z-6c9e15", "20261206T093201.000000001Z-0a0b0c"
	list := `{"content":[{"type":"text","text":"2 run(s):\njob-1 run_id=` + id1 + ` state=exited\njob-0 run_id=` + id2 + ` state=exited"}],` +
		`"structuredContent":{"runs":[{"name":"job-1","run_id":"` + id1 + `"},{"name":"job-0","run_id":"` + id2 + `"}],"total":2,"cursor":"c1.x"}}`
	answers := cannedAnswers{
		Initialize: json.RawMessage(`{"protocolVersion":"2025-06-18","serverInfo":{"name":"agent-box"}}`),
		Tools:      json.RawMessage(`{"tools":[{"name":"process_list"}]}`),
		List:       json.RawMessage(list),
	}
	data, err := json.Marshal(answers)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "canned.json")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"two","method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"process_list","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"process_kill","arguments":{"name":"job-0"}}}`,
		`{"jsonrpc":"2.0","id":6,"method":"resources/list"}`,
	}, "\n") // the last line without its newline: stdin may end so
	var out bytes.Buffer
	if err := cannedBox(file, []string{"7"}, strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	ownList := strings.NewReplacer(id1, id1+"-b7", id2, id2+"-b7").Replace(list)
	want := []string{
		`{"jsonrpc":"2.0","id":1,"result":` + string(answers.Initialize) + `}`,
		`{"jsonrpc":"2.0","id":"two","result":` + string(answers.Tools) + `}`,
		`{"jsonrpc":"2.0","id":3,"result":{}}`,
		`{"jsonrpc":"2.0","id":4,"result":` + ownList + `}`,
		`{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"a canned box answers process_list only"}],"isError":true}}`,
		`{"jsonrpc":"2.0","id":6,"error":{"code":-32601,"message":"method not found"}}`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d answers, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("answer %d:\n got %s\nwant %s", i+1, lines[i], want[i])
		}
		if !json.Valid([]byte(lines[i])) {
			t.Errorf("answer %d is not JSON: %s", i+1, lines[i])
		}
	}
}

// TestCannedBoxRefuses: no index, or a list without runs, is an error
// before anything is answered.
func TestCannedBoxRefuses(t *testing.T) {
	file := filepath.Join(t.TempDir(), "canned.json")
	if err := os.WriteFile(file, []byte(`{"process_list":{"structuredContent":{"runs":[]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "the box's index"},
		{[]string{"1"}, "lists no run"},
	} {
		var out bytes.Buffer
		err := cannedBox(file, tc.args, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n"), &out)
		if err == nil || !strings.Contains(err.Error(), tc.want) || out.Len() > 0 {
			t.Errorf("args %q: err %v, output %q; want an error containing %q and no output", tc.args, err, out.String(), tc.want)
		}
	}
}
