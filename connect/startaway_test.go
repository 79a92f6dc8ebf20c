package connect

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/session"
)

// TestStartAwayFromACacheWithoutTools: a box away as the client starts is
// answered from its cache also when the cache holds its answer to
// initialize alone (kept before any tools/list, or after an upgrade
// cleared its tools): tools/list then asks the box when it is back.
func TestStartAwayFromACacheWithoutTools(t *testing.T) {
	dir := t.TempDir()
	box := session.Box{Name: "away", Argv: []string{"false"}}
	init := json.RawMessage(`{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"agent-box","version":"1"}}`)
	require.NoError(t, cacheFor(dir, box).save(cached{Asked: "2025-06-18", Initialize: init, At: time.Now()}))

	srv := &Server{Boxes: []session.Box{box}, CacheDir: dir, InitWait: 5 * time.Second, Options: session.Options{GiveUp: time.Second}}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), inR, outW) }()
	_, err := io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n")
	require.NoError(t, err)
	line, err := bufio.NewReader(outR).ReadBytes('\n')
	require.NoError(t, err)
	var ans struct {
		Result *struct {
			ServerInfo struct{ Version string } `json:"serverInfo"`
		} `json:"result"`
		Error json.RawMessage `json:"error"`
	}
	require.NoError(t, json.Unmarshal(line, &ans), "%s", line)
	require.NotNil(t, ans.Result, "initialize failed: %s", line)
	assert.Equal(t, "1", ans.Result.ServerInfo.Version)
	inW.Close()
	go io.Copy(io.Discard, outR)
	require.NoError(t, <-done)
}
