package tools

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/agent-box/agent-box/runs"
	"github.com/agent-box/agent-box/wire"
)

// requestID is the call's request id (wire.RequestMeta in params._meta):
// given says whether it has one; err, that it is not a string.
func requestID(req mcp.CallToolRequest) (id string, given bool, err error) {
	if req.Params.Meta == nil {
		return "", false, nil
	}
	v, ok := req.Params.Meta.AdditionalFields[wire.RequestMeta]
	if !ok {
		return "", false, nil
	}
	if id, ok = v.(string); !ok {
		return "", true, fmt.Errorf("%w: _meta %s must be a string", runs.ErrInvalid, wire.RequestMeta)
	}
	return id, true, runs.CheckRequestID(id)
}

// once makes the handler fn of a mutation safe to repeat: a call with a
// request id is applied at most once, across agent-box processes, and a
// repeat gets the first answer (runs.Manager.Once), or, when the client's
// going away cut the first try's wait, the answer of that wait done again
// (fn called with a ctx that tells runs so). A call without one is fn's,
// as it always was.
func (h *Handlers) once(tool string, fn server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		id, given, err := requestID(req)
		switch {
		case err != nil:
			return fail(err), nil
		case !given:
			return fn(ctx, req)
		}
		r := runs.Repeatable{ID: id, Tool: tool, Args: req.GetArguments()}
		var made *mcp.CallToolResult // apply's answer, in this call
		apply := func(ctx context.Context) []byte {
			res, err := fn(ctx, req)
			if err != nil || res == nil {
				// Not an answer of a tool: a protocol error, which is
				// not kept (the handlers return none).
				res = fail(fmt.Errorf("%s: %v", tool, err))
			}
			made = res
			b, err := json.Marshal(res)
			if err != nil {
				return nil
			}
			return b
		}
		// The repeat's wait for a first try ends when the client goes
		// away, as every wait of fn does (blockingCall): a wait cut so is
		// what runs marks cut.
		wctx, cancel := h.untilGone(ctx)
		defer cancel()
		answer, ran, err := h.M.Once(wctx, r, apply)
		switch {
		case err != nil:
			return fail(err), nil
		case ran:
			return made, nil
		}
		raw := json.RawMessage(answer)
		res, err := mcp.ParseCallToolResult(&raw)
		if err != nil {
			return fail(fmt.Errorf("%w: the stored answer of %s with request %s cannot be read: %w", runs.ErrUnknownOutcome, tool, id, err)), nil
		}
		return res, nil
	}
}
