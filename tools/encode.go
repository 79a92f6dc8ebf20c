package tools

import (
	"encoding/json"

	"github.com/mark3labs/mcp-go/mcp"
)

// encodeMessage returns the JSON of a message for the client: the bytes
// json.Marshal gives, in one pass.
//
// json.Marshal of a tools/call reply goes through mcp.CallToolResult's
// MarshalJSON, which marshals a map of the fields; encoding/json then
// validates and compacts that output again at each level that has a
// MarshalJSON (the result, and the reply around it). For a tail_log reply
// that carries a 1 MiB window twice (text and structured content), those
// re-scans were about three quarters of the server's CPU. A result with
// only the fields agent-box sets is written here, key by key in the order
// the map gives them (sorted); anything else takes json.Marshal.
func encodeMessage(msg any) ([]byte, error) {
	var resp mcp.JSONRPCResponse
	switch m := msg.(type) {
	case mcp.JSONRPCResponse:
		resp = m
	case *mcp.JSONRPCResponse:
		resp = *m
	default:
		return json.Marshal(msg)
	}
	var r *mcp.CallToolResult
	switch v := resp.Result.(type) {
	case *mcp.CallToolResult:
		r = v
	case mcp.CallToolResult:
		r = &v
	}
	// json.Marshal would compact a RawStructuredContent; ours are never
	// raw, so such a result takes json.Marshal like every unusual one.
	if r == nil || r.Meta != nil || len(r.InputRequests) > 0 || r.RequestState != "" || len(r.RawStructuredContent) > 0 {
		return json.Marshal(msg)
	}
	id, err := json.Marshal(resp.ID)
	if err != nil {
		return nil, err
	}
	content, err := json.Marshal(contentSlice(r.Content))
	if err != nil {
		return nil, err
	}
	var structured []byte
	if r.StructuredContent != nil {
		if structured, err = json.Marshal(r.StructuredContent); err != nil {
			return nil, err
		}
	}
	var resultType []byte
	if r.ResultType != "" {
		if resultType, err = json.Marshal(r.ResultType); err != nil {
			return nil, err
		}
	}

	b := make([]byte, 0, len(id)+len(content)+len(structured)+len(resp.JSONRPC)+96)
	b = append(b, `{"jsonrpc":`...)
	b = appendString(b, resp.JSONRPC)
	b = append(b, `,"id":`...)
	b = append(b, id...)
	b = append(b, `,"result":{"content":`...)
	b = append(b, content...)
	if r.IsError {
		b = append(b, `,"isError":true`...)
	}
	if resultType != nil {
		b = append(b, `,"resultType":`...)
		b = append(b, resultType...)
	}
	if structured != nil {
		b = append(b, `,"structuredContent":`...)
		b = append(b, structured...)
	}
	return append(b, "}}"...), nil
}

// contentSlice is the content as CallToolResult.MarshalJSON puts it in its
// map: a non-nil slice, so that no content encodes as [], not null.
func contentSlice(c []mcp.Content) []mcp.Content {
	if c == nil {
		return []mcp.Content{}
	}
	return c
}

func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}
