package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/mark3labs/mcp-go/mcp"
)

// strictJSON refuses a message that encoding/json (and so mcp-go) would
// read one way while another reader reads it another: a member named
// twice in one object (encoding/json keeps the last, so an approval layer
// that reads the first approves another command than the one that runs:
// RFC 8259 §4 leaves it to the reader, RFC 7493 §2.3 forbids it), and a
// string that is not UTF-8, raw or as a lone surrogate escape ("\ud800"),
// which encoding/json silently turns into U+FFFD (RFC 8259 §8.1: JSON text
// is UTF-8). jsontext, the tokenizer of encoding/json/v2, checks both in
// one pass (its cost: performance.md, "Figures behind
// code comments").
func strictJSON(line []byte) error {
	err := jsontext.NewDecoder(bytes.NewReader(line)).SkipValue()
	if err == nil {
		return nil
	}
	why := strings.TrimPrefix(err.Error(), "jsontext: ")
	var se *jsontext.SyntacticError
	if errors.As(err, &se) && strings.Contains(why, "duplicate") {
		return fmt.Errorf("%s: a JSON object must name each member once (RFC 7493 §2.3)", why)
	}
	return fmt.Errorf("%s: every JSON string must be valid UTF-8, with no lone surrogate escape (RFC 8259 §8.1)", why)
}

// refusal is the JSON-RPC error for a request that is not run: the id is
// echoed as its raw bytes (withID), so a client always learns why.
func refusal(id json.RawMessage, code int, format string, a ...any) mcp.JSONRPCMessage {
	return withID(mcp.JSONRPCError{JSONRPC: mcp.JSONRPC_VERSION,
		Error: mcp.NewJSONRPCErrorDetails(code, "request refused, nothing was run: "+fmt.Sprintf(format, a...), nil)}, id)
}

// withID sets a reply's id to the request's id exactly as the client wrote
// it. mcp-go decodes a number id into a float64, so 2^70 came back as
// 1.1805916207174113e+21, which no client matches to its request
// (JSON-RPC 2.0 §5: the id of the response MUST be the same as the
// request's).
func withID(resp mcp.JSONRPCMessage, id json.RawMessage) mcp.JSONRPCMessage {
	if !hasID(id) {
		return resp
	}
	// mcp-go's HandleMessage answers with these two, as values
	// (TestIDsAreEchoedByteExactly pins it for replies and errors alike).
	raw := mcp.NewRequestId(id)
	switch r := resp.(type) {
	case mcp.JSONRPCResponse:
		r.ID = raw
		return r
	case mcp.JSONRPCError:
		r.ID = raw
		return r
	}
	return resp
}

// needsInitialize reports whether a request may only come after
// initialize: in a 2025-11-25 session everything but ping does (MCP
// lifecycle: "the client SHOULD NOT send requests other than pings before
// the server has responded to the initialize request"); a 2026-07-28
// request carries its protocol version in _meta and needs no handshake,
// nor does server/discover, which is how such a client starts.
func needsInitialize(e *envelope) bool {
	switch e.Method {
	case string(mcp.MethodInitialize), string(mcp.MethodPing), string(mcp.MethodServerDiscover):
		return false
	}
	return !mcp.IsModernProtocol(e.Params.Meta.ProtocolVersion())
}
