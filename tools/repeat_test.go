package tools

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/journal"
	"github.com/agent-box/agent-box/wire"
)

// toolError is the structured error of a tools/call reply line.
func toolError(t *testing.T, line string) wire.Error {
	t.Helper()
	var reply struct {
		Result struct {
			IsError           bool
			StructuredContent map[string]wire.Error
		}
	}
	require.NoError(t, json.Unmarshal([]byte(line), &reply), line)
	require.True(t, reply.Result.IsError, line)
	return reply.Result.StructuredContent[wire.ErrorKey]
}

// TestSafeRepeatIsAnnounced: initialize says the box honours request ids.
func TestSafeRepeatIsAnnounced(t *testing.T) {
	c := servePipe(t)
	r := c.call(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	var reply struct {
		Result struct {
			Capabilities struct{ Experimental map[string]any }
		}
	}
	require.NoError(t, json.Unmarshal([]byte(r), &reply), r)
	assert.Equal(t, map[string]any{}, reply.Result.Capabilities.Experimental[wire.SafeRepeat], r)
}

// TestBadRequestIDsAreRefused: a request id that is not 1..64 bytes of
// [A-Za-z0-9._-], or not a string, is invalid_argument, and nothing is
// made; a call of a tool that changes nothing ignores it.
func TestBadRequestIDsAreRefused(t *testing.T) {
	c := servePipe(t)
	c.initialize()
	for i, id := range []string{`""`, `"../x"`, `"a/b"`, `"a b"`, `"\u00e9"`, `"` + strings.Repeat("a", 65) + `"`, `7`, `null`, `{"id":"x"}`} {
		line := c.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"process_start","arguments":{"name":"a","command":"true"},"_meta":{%q:%s}}}`, i+1, wire.RequestMeta, id))
		e := toolError(t, line)
		assert.Equal(t, wire.InvalidArgument, e.Code, "%s: %s", id, line)
		assert.Contains(t, e.Message, wire.RequestMeta, line)
	}
	noRuns(t, c.state)
	line := c.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"process_list","arguments":{},"_meta":{%q:"../x"}}}`, wire.RequestMeta))
	assert.NotContains(t, line, `"isError"`, line)
	_, err := os.Lstat(filepath.Join(c.state, journal.Dir))
	assert.True(t, os.IsNotExist(err), "a journal was made: %v", err)
}

// TestRepeatAcrossServersGetsTheFirstAnswer: two servers on one state
// dir (two agent-box processes after a drop): the repeat of a call with a
// request id gets the first answer, here an error that names the run the
// first call saw missing; a repeat of the id with other arguments is
// refused.
func TestRepeatAcrossServersGetsTheFirstAnswer(t *testing.T) {
	c := servePipe(t)
	c.initialize()
	call := func(c *pipeConn, name string) string {
		return c.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"process_remove","arguments":{"name":%q},"_meta":{%q:"req-1"}}}`, name, wire.RequestMeta))
	}
	first := call(c, "gone")
	assert.Equal(t, wire.NoSuchRun, toolError(t, first).Code)

	d := servePipeAt(t, c.state)
	d.initialize()
	assert.JSONEq(t, first, call(d, "gone"))
	other := call(d, "another")
	assert.Equal(t, wire.InvalidArgument, toolError(t, other).Code, other)
	assert.Contains(t, toolError(t, other).Message, "other arguments", other)
}
