package tools

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/logread"
)

// encodeMessage must write exactly what json.Marshal writes, for every
// message the server sends; only the path differs.
func TestEncodeMessageIsJSONMarshal(t *testing.T) {
	code := 3
	tail := TailOutput{Name: "a", RunID: "r", Content: "line <1> & \"two\"\n\x00\u2028é\xff", Encoding: "text",
		Matches: []logread.Match{{Offset: 7, Stream: "stdout", Line: "x"}}, ExitCode: &code, EndOffset: 12}
	now := time.Date(2026, 12, 3, 6, 44, 22, 123, time.UTC)
	structured := mcp.NewToolResultStructured(map[string]any{"started_at": now, "n": 1.5, "list": []int{}}, "started")
	withType := mcp.NewToolResultStructured(tail, "t")
	withType.ResultType = mcp.ResultTypeComplete
	withMeta := mcp.NewToolResultStructured(tail, "t")
	withMeta.Meta = &mcp.Meta{AdditionalFields: map[string]any{"k": "v"}}
	failed := mcp.NewToolResultError("run \"x\" not found: <nothing>")
	noContent := &mcp.CallToolResult{}
	raw := &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent("x")}, RawStructuredContent: json.RawMessage(`{ "a" : 1 }`)}

	for name, msg := range map[string]any{
		"tail, int id":          mcp.NewJSONRPCResultResponse(mcp.NewRequestId(int64(7)), mcp.NewToolResultStructured(tail, tailText(tail))),
		"tail, string id":       mcp.NewJSONRPCResultResponse(mcp.NewRequestId("abc\"<"), mcp.NewToolResultStructured(tail, "x")),
		"pointer response":      ptr(mcp.NewJSONRPCResultResponse(mcp.NewRequestId(1), structured)),
		"value result":          mcp.NewJSONRPCResultResponse(mcp.NewRequestId(1), *structured),
		"result type":           mcp.NewJSONRPCResultResponse(mcp.NewRequestId(2), withType),
		"meta (fallback)":       mcp.NewJSONRPCResultResponse(mcp.NewRequestId(2), withMeta),
		"tool error":            mcp.NewJSONRPCResultResponse(mcp.NewRequestId(3), failed),
		"no content":            mcp.NewJSONRPCResultResponse(mcp.NewRequestId(4), noContent),
		"raw structured":        mcp.NewJSONRPCResultResponse(mcp.NewRequestId(5), raw),
		"initialize result":     mcp.NewJSONRPCResultResponse(mcp.NewRequestId(0), mcp.InitializeResult{ProtocolVersion: "2025-06-18", ServerInfo: mcp.Implementation{Name: "agent-box"}}),
		"empty result":          mcp.NewJSONRPCResultResponse(mcp.NewRequestId(9), mcp.EmptyResult{}),
		"protocol error":        mcp.JSONRPCError{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(nil), Error: mcp.NewJSONRPCErrorDetails(mcp.PARSE_ERROR, "Parse error", nil)},
		"progress notification": mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{Method: "notifications/progress", Params: mcp.NotificationParams{AdditionalFields: map[string]any{"progress": 1}}}},
	} {
		want, err := json.Marshal(msg)
		require.NoError(t, err, name)
		got, err := encodeMessage(msg)
		require.NoError(t, err, name)
		require.Equal(t, string(want), string(got), name)
	}
}

func ptr[T any](v T) *T { return &v }

func FuzzEncodeMessage(f *testing.F) {
	f.Add("hello\n", "world", int64(1), false)
	f.Add("<script>&</script>\u2028\xff\xfe", "\x00\x1f\"\\", int64(-1), true)
	f.Add(strings.Repeat("é", 100), "", int64(0), false)
	f.Fuzz(func(t *testing.T, text, content string, id int64, isErr bool) {
		out := TailOutput{Name: content, Content: content, Matches: []logread.Match{{Line: text}}}
		r := mcp.NewToolResultStructured(out, text)
		r.IsError = isErr
		msg := mcp.NewJSONRPCResultResponse(mcp.NewRequestId(id), r)
		want, err := json.Marshal(msg)
		if err != nil {
			t.Skip()
		}
		got, err := encodeMessage(msg)
		if err != nil {
			t.Fatal(err)
		}
		if string(want) != string(got) {
			t.Fatalf("encodeMessage differs from json.Marshal:\nwant %s\ngot  %s", want, got)
		}
	})
}

// The point of encodeMessage: a 1 MiB tail_log reply in one pass.
func BenchmarkEncodeTailReply(b *testing.B) {
	out := TailOutput{Name: "a", Content: strings.Repeat("log line of a build, with \"quotes\" <and> tags\n", 1<<20/48), Encoding: "text"}
	msg := mcp.NewJSONRPCResultResponse(mcp.NewRequestId(int64(1)), mcp.NewToolResultStructured(out, tailText(out)))
	b.Run("json.Marshal", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(msg); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encodeMessage", func(b *testing.B) {
		for b.Loop() {
			if _, err := encodeMessage(msg); err != nil {
				b.Fatal(err)
			}
		}
	})
}
