package tools

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/runrecord"
	"github.com/agent-box/agent-box/runs"
	"github.com/agent-box/agent-box/supervisor"
)

// pipeConn is Serve in this process over pipes: raw lines in and out, so
// that a test sees the bytes a client would.
type pipeConn struct {
	t     *testing.T
	in    *io.PipeWriter
	lines chan string
	state string
}

func servePipe(t *testing.T) *pipeConn {
	t.Helper()
	return servePipeAt(t, t.TempDir())
}

// servePipeAt is servePipe on the state dir state.
func servePipeAt(t *testing.T, state string) *pipeConn {
	t.Helper()
	m := messagesManager(t, state)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &pipeConn{t: t, in: inW, lines: make(chan string, 64), state: state}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Serve(context.Background(), &Handlers{M: m}, "test", inR, outW, log.New(io.Discard, "", 0))
		outW.Close()
	}()
	go func() {
		defer close(c.lines)
		r := bufio.NewReader(outR)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				c.lines <- strings.TrimSuffix(line, "\n")
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { inW.Close(); <-done })
	return c
}

// messagesManager is a Manager on the state dir state under which no
// supervisor can start: the tests that use it are about messages, and a
// process_start that got as far as launching one fails visibly.
func messagesManager(t *testing.T, state string) *runs.Manager {
	t.Helper()
	store, _, err := runrecord.Open(state)
	require.NoError(t, err)
	sys, err := runs.NewLiveSystem(supervisor.NewExecutables())
	require.NoError(t, err)
	return &runs.Manager{Store: store, Sys: sys, Supervisor: []string{filepath.Join(t.TempDir(), "no-supervisor")}}
}

// call sends one line and returns the next line the server writes.
func (c *pipeConn) call(line string) string {
	c.t.Helper()
	_, err := io.WriteString(c.in, line+"\n")
	require.NoError(c.t, err)
	select {
	case l, ok := <-c.lines:
		require.True(c.t, ok, "the server stopped")
		return l
	case <-time.After(30 * time.Second):
		c.t.Fatal("no answer for 30 s")
		return ""
	}
}

func (c *pipeConn) initialize() {
	c.t.Helper()
	r := c.call(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	require.Contains(c.t, r, `"result"`, r)
	_, err := io.WriteString(c.in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	require.NoError(c.t, err)
}

// errorOf returns the message of a JSON-RPC error reply ("" for none).
func errorOf(t *testing.T, line string) string {
	t.Helper()
	var m struct {
		Error *struct{ Message string } `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(line), &m), line)
	if m.Error == nil {
		return ""
	}
	return m.Error.Message
}

func noRuns(t *testing.T, state string) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(state, "runs"))
	require.NoError(t, err)
	assert.Empty(t, ents, "the request was refused, yet something was made")
}

// TestDuplicateMembersAreRefused: a request naming one member twice is
// refused, whatever the depth; before (issue 9) encoding/json kept the
// last, so {"command":"echo A","command":"echo B"} ran B while a reader
// of the first (an approval layer) saw A.
func TestDuplicateMembersAreRefused(t *testing.T) {
	c := servePipe(t)
	c.initialize()
	for _, tc := range []struct{ line, name string }{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"process_start","arguments":{"name":"a","command":"echo A","command":"echo B"}}}`, `"command"`},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"process_start","arguments":{"name":"a","argv":["true"],"env":{"X":"1","X":"2"}}}}`, `"X"`},
		{`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"process_list","name":"process_start","arguments":{"name":"a","command":"true"}}}`, `"name"`},
		{`{"jsonrpc":"2.0","id":4,"method":"tools/list","method":"tools/call","params":{"name":"process_start","arguments":{"name":"a","command":"true"}}}`, `"method"`},
	} {
		r := c.call(tc.line)
		msg := errorOf(t, r)
		assert.Contains(t, msg, "duplicate object member name "+tc.name, r)
		assert.Contains(t, msg, "nothing was run", r)
	}
	noRuns(t, c.state)
}

// TestStringsMustBeUTF8: a string with invalid UTF-8, raw or as a lone
// surrogate escape, is refused; before (issue 9) it became U+FFFD and the
// command ran. A surrogate pair is a character like any other.
func TestStringsMustBeUTF8(t *testing.T) {
	c := servePipe(t)
	c.initialize()
	for _, line := range []string{
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"process_start\",\"arguments\":{\"name\":\"a\",\"command\":\"echo \xff\"}}}",
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"process_start","arguments":{"name":"a","command":"echo \ud800"}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"process_start","arguments":{"name":"a","command":"echo \udc00\ud800"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"process_start","arguments":{"name":"a","command":"true","env":{"\ud800":"x"}}}}`,
	} {
		r := c.call(line)
		msg := errorOf(t, r)
		assert.Contains(t, msg, "UTF-8", r)
		assert.Contains(t, msg, "nothing was run", r)
	}
	noRuns(t, c.state)
	r := c.call(`{"jsonrpc":"2.0","id":5,"method":"ping","params":{"_meta":{"note":"\ud83d\ude00"}}}`)
	assert.Empty(t, errorOf(t, r), r)
}

// TestIDsAreEchoedByteExactly: a reply's id is the request's as written;
// before (issue 9) 2^70 came back as 1.1805916207174113e+21.
func TestIDsAreEchoedByteExactly(t *testing.T) {
	c := servePipe(t)
	c.initialize()
	for _, id := range []string{`1180591620717411303424`, `-0`, `1e2`, `12.50`, `"a\u0041"`, `"x"`, `9007199254740993`} {
		for _, req := range []string{
			`{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}`,
			`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"process_list","arguments":{}}}`,
			`{"jsonrpc":"2.0","id":` + id + `,"method":"no/such/method"}`,
		} {
			r := c.call(req)
			assert.Contains(t, r, `"id":`+id+`,`, r)
		}
	}
}

// TestRequestsBeforeInitialize: a 2025-11-25 session must initialize
// before anything but ping; before (issue 9) a tools/call ran without it.
// A 2026-07-28 request, which names its protocol version in _meta, needs
// no handshake.
func TestRequestsBeforeInitialize(t *testing.T) {
	c := servePipe(t)
	r := c.call(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"process_start","arguments":{"name":"a","command":"true"}}}`)
	assert.Contains(t, errorOf(t, r), "before initialize", r)
	noRuns(t, c.state)
	r = c.call(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	assert.Contains(t, errorOf(t, r), "before initialize", r)
	r = c.call(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	assert.Empty(t, errorOf(t, r), r)

	modern := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}`
	r = c.call(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"process_list","arguments":{},` + modern + `}}`)
	assert.Empty(t, errorOf(t, r), r)
	assert.Contains(t, r, `"result"`, r)

	c.initialize()
	r = c.call(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"process_list","arguments":{}}}`)
	assert.Empty(t, errorOf(t, r), r)
}

// BenchmarkStrictJSON is the cost of the duplicate-member and UTF-8 check
// on a 1 MiB process_write line, next to the decode mcp-go does anyway.
func BenchmarkStrictJSON(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"process_write","arguments":{"name":"x","data":"` +
		strings.Repeat(`abc\n\u00e9 `, 1<<20/12) + `"}}}`)
	b.Run("strict", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		for b.Loop() {
			if err := strictJSON(line); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json-decode", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		for b.Loop() {
			var v map[string]any
			if err := json.Unmarshal(line, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A 2026-07-28 client starts with server/discover, before any handshake.
func TestDiscoverNeedsNoInitialize(t *testing.T) {
	c := servePipe(t)
	r := c.call(`{"jsonrpc":"2.0","id":1,"method":"server/discover"}`)
	assert.NotContains(t, errorOf(t, r), "before initialize", r)
}
