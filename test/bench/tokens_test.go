package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/agent-box/agent-box/internal/rawmcp"
)

// TestTokenReply: the bytes counted are the text contents' and the
// structured content's compact JSON, and the run's fields are found at the
// top level or under "run", as builds put them.
func TestTokenReply(t *testing.T) {
	content := []rawmcp.Content{{Type: "text", Text: "héllo"}, {Type: "image"}, {Type: "text", Text: "!"}}
	r := newTokenReply(content, json.RawMessage(`{ "run": {"state": "exited", "exit_code": 3} }`), false)
	if r.textBytes != len("héllo!") || r.text != "héllo!" {
		t.Errorf("text %q, %d bytes; want héllo!, %d", r.text, r.textBytes, len("héllo!"))
	}
	if want := len(`{"run":{"state":"exited","exit_code":3}}`); r.structuredBytes != want {
		t.Errorf("structured bytes %d, want %d (compact)", r.structuredBytes, want)
	}
	if !r.ended() || r.exitCode() != 3 {
		t.Errorf("under run: ended %v, exit code %d; want true, 3", r.ended(), r.exitCode())
	}
	top := newTokenReply(nil, json.RawMessage(`{"state":"running"}`), false)
	if top.ended() || top.exitCode() != -1 {
		t.Errorf("top level: ended %v, exit code %d; want false, -1", top.ended(), top.exitCode())
	}
	none := newTokenReply(nil, json.RawMessage(`null`), true)
	if none.structuredBytes != 0 || none.ended() {
		t.Errorf("no structured content: %d bytes, ended %v", none.structuredBytes, none.ended())
	}
}

// TestWaitArg: the one-call path is taken only where process_start's
// schema has wait_ms, within its maximum.
func TestWaitArg(t *testing.T) {
	for _, tc := range []struct {
		schema string
		ok     bool
		ms     int
	}{
		{`{"properties":{"name":{}}}`, false, 30000},
		{`{"properties":{"wait_ms":{"type":"integer"}}}`, true, 30000},
		{`{"properties":{"wait_ms":{"maximum":10000}}}`, true, 10000},
		{`{"properties":{"wait_ms":{"maximum":600000}}}`, true, 30000},
		{`not json`, false, 30000},
	} {
		if ok, ms := waitArg(json.RawMessage(tc.schema), 30000); ok != tc.ok || ms != tc.ms {
			t.Errorf("%s: %v, %d; want %v, %d", tc.schema, ok, ms, tc.ok, tc.ms)
		}
	}
}

// TestPipOutput: about the size asked for, with progress bars redrawn by
// \r and whole lines, ending in a newline.
func TestPipOutput(t *testing.T) {
	const size = 64 << 10
	out := pipOutput(size)
	if len(out) < size-8<<10 || len(out) > size+8<<10 {
		t.Errorf("%d bytes, want about %d", len(out), size)
	}
	if bytes.Count(out, []byte("\r")) < 100 || !bytes.Contains(out, []byte("\nSuccessfully installed ")) || !bytes.HasSuffix(out, []byte("\n")) {
		t.Errorf("not a pip log: %.300q", out)
	}
}
