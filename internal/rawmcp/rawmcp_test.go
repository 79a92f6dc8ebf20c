package rawmcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fake is a Conn whose server's output is script and whose sent lines are
// collected.
func fake(script string) (*Conn, *strings.Builder) {
	var sent strings.Builder
	return newConn(nopCloser{&sent}, strings.NewReader(script)), &sent
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

func TestHasID(t *testing.T) {
	for _, tc := range []struct {
		line string
		id   int
		want bool
	}{
		{`{"jsonrpc":"2.0","id":7,"result":{}}`, 7, true},
		{`{"jsonrpc":"2.0","id":7}`, 7, true},
		{`{"jsonrpc":"2.0","id": 7 ,"result":{}}`, 7, true},
		{`{"jsonrpc":"2.0","id":70,"result":{}}`, 7, false},
		{`{"jsonrpc":"2.0","id":7`, 7, false}, // the line ends in the number
		{`{"jsonrpc":"2.0","id":8,"result":{}}`, 7, false},
		{`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":7}}`, 7, false},
		{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`, 7, false},
		// The key beyond the first 64 bytes: decoded in full.
		{`{"result":{"padding":"` + strings.Repeat("x", 80) + `"},"jsonrpc":"2.0","id":7}`, 7, true},
		{`{"result":{"padding":"` + strings.Repeat("x", 80) + `"},"jsonrpc":"2.0","id":6}`, 7, false},
		{`not json`, 7, false},
	} {
		if got := hasID([]byte(tc.line), tc.id); got != tc.want {
			t.Errorf("hasID(%.60s, %d) = %v, want %v", tc.line, tc.id, got, tc.want)
		}
	}
}

// TestAwaitSkips: Await reads past notifications, replies to other
// requests and a server's own request with the same id, hands the
// notifications to OnNotification, counts every byte, and decodes the
// reply it waits for.
func TestAwaitSkips(t *testing.T) {
	script := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}
{"jsonrpc":"2.0","id":2,"result":{"n":2}}
{"jsonrpc":"2.0","id":1,"method":"ping"}
{"jsonrpc":"2.0","method":"notifications/message","params":{"id":1}}
{"jsonrpc":"2.0","id":1,"result":{"n":1}}
`
	c, _ := fake(script)
	var got []string
	c.OnNotification = func(method string, params json.RawMessage) {
		got = append(got, method+" "+string(params))
	}
	var res struct{ N int }
	if err := c.Await(1, &res); err != nil {
		t.Fatal(err)
	}
	if res.N != 1 {
		t.Errorf("result n = %d, want 1", res.N)
	}
	want := []string{`notifications/progress {"progress":1}`, `notifications/message {"id":1}`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("notifications:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if c.Received() != int64(len(script)) {
		t.Errorf("Received() = %d, want %d", c.Received(), len(script))
	}
}

func TestRequestErrors(t *testing.T) {
	c, _ := fake(`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no such method"}}` + "\n")
	err := c.Request("nope", nil, nil)
	var rpc *RPCError
	if !errors.As(err, &rpc) || rpc.Code != -32601 {
		t.Errorf("error reply: got %v, want an *RPCError with code -32601", err)
	}
	err = c.Request("tools/list", nil, nil)
	if !errors.Is(err, io.EOF) {
		t.Errorf("no reply: got %v, want io.EOF", err)
	}
}

// TestCallInto: the structured content lands in the caller's type; a
// result with isError set is a *ToolError with the text.
func TestCallInto(t *testing.T) {
	c, sent := fake(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"{}"}],"structuredContent":{"state":"running"}}}
{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"no run "},{"type":"text","text":"named x"}],"isError":true}}
{"jsonrpc":"2.0","id":3,"result":{"content":[],"structuredContent":{"state":"exited"}}}
`)
	var run struct{ State string }
	if err := c.CallInto("process_list", map[string]any{}, &run); err != nil || run.State != "running" {
		t.Errorf("CallInto = %v, state %q; want nil, running", err, run.State)
	}
	err := c.CallInto("tail_log", map[string]any{"name": "x"}, nil)
	var te *ToolError
	if !errors.As(err, &te) || te.Tool != "tail_log" || te.Text != "no run named x" {
		t.Errorf("tool error: got %#v", err)
	}
	if err := c.CallInto("process_wait", map[string]any{}, nil); err != nil {
		t.Errorf("discarded result: %v", err)
	}
	wantSent := `{"id":1,"jsonrpc":"2.0","method":"tools/call","params":{"arguments":{},"name":"process_list"}}`
	if first, _, _ := strings.Cut(sent.String(), "\n"); first != wantSent {
		t.Errorf("sent %s\nwant %s", first, wantSent)
	}
}

// TestMeta: Meta joins the params' own _meta, which wins on a clash.
func TestMeta(t *testing.T) {
	c, sent := fake(`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n")
	c.Meta = map[string]any{"a": 1, "b": 1}
	if err := c.Request("tools/list", map[string]any{"_meta": map[string]any{"b": 2}, "x": true}, nil); err != nil {
		t.Fatal(err)
	}
	want := `{"id":1,"jsonrpc":"2.0","method":"tools/list","params":{"_meta":{"a":1,"b":2},"x":true}}` + "\n"
	if sent.String() != want {
		t.Errorf("sent %s\nwant %s", sent.String(), want)
	}
}

// BenchmarkAwaitCall reads a small reply and a tail_log reply of 1 MiB of
// base64 after a progress notification, as the benchmarks' client does.
func BenchmarkAwaitCall(b *testing.B) {
	for _, size := range []int{64, 1 << 20} {
		content := strings.Repeat("A", size*4/3)
		reply, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "result": map[string]any{
			"content":           []any{map[string]any{"type": "text", "text": content}},
			"structuredContent": map[string]any{"content": content, "end_offset": size, "eof": false},
		}})
		script := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}` + "\n" + string(reply) + "\n"
		b.Run(strconv.Itoa(size), func(b *testing.B) {
			b.SetBytes(int64(len(script)))
			r := strings.NewReader(script)
			c := newConn(nopCloser{io.Discard}, r)
			var t struct {
				Content   string `json:"content"`
				EndOffset int64  `json:"end_offset"`
			}
			for b.Loop() {
				r.Reset(script)
				c.out.Reset(r)
				if err := c.AwaitCall("tail_log", 1, &t); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestClose: a server that ends on stdin EOF closes cleanly, one that
// exits non-zero says so, and one that ignores EOF is killed.
func TestClose(t *testing.T) {
	old := closeGrace
	closeGrace = 100 * time.Millisecond
	t.Cleanup(func() { closeGrace = old })
	for _, tc := range []struct {
		argv []string
		want string // "" for no error
	}{
		{[]string{"cat"}, ""},
		{[]string{"sh", "-c", "cat; exit 3"}, "server exited: exit status 3"},
		{[]string{"sleep", "30"}, ErrLingered.Error()},
	} {
		c, err := Start(exec.Command(tc.argv[0], tc.argv[1:]...))
		if err != nil {
			t.Fatal(err)
		}
		err = c.Close()
		if got := fmt.Sprint(err); (tc.want == "" && err != nil) || (tc.want != "" && got != tc.want) {
			t.Errorf("%v: Close() = %v, want %q", tc.argv, err, tc.want)
		}
	}
}
