package tools

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// eofSession starts Serve on pipes, initializes, writes n tools/list
// requests and closes stdin. It returns the server's output, unread (each
// answer waits for the test to read it), and a channel closed when Serve
// returns. drainIdle is set to idle for the test.
func eofSession(t *testing.T, n int, idle time.Duration) (*bufio.Reader, *io.PipeReader, <-chan struct{}) {
	t.Helper()
	old := drainIdle
	drainIdle = idle
	t.Cleanup(func() { drainIdle = old })
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		Serve(context.Background(), &Handlers{M: messagesManager(t, t.TempDir())}, "test", inR, outW, log.New(io.Discard, "", 0))
	}()
	t.Cleanup(func() { outR.Close(); inW.Close(); <-returned })
	r := bufio.NewReader(outR)
	send := func(line string) {
		_, err := io.WriteString(inW, line+"\n")
		require.NoError(t, err)
	}
	send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, line, `"result"`, line)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for i := 1; i <= n; i++ {
		send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, i))
	}
	require.NoError(t, inW.Close())
	return r, outR, returned
}

// Every request read before stdin's EOF is answered, also when the answers
// take longer in all than drainIdle, as long as they keep going out: here
// the reader takes an answer every 150 ms (900 ms for six) against a
// drainIdle of 500 ms. Serve returns only after the last. (It gave up a
// fixed second after EOF: forty requests piped into a loaded server lost
// their answers, the last one cut mid-line.)
//
// Not parallel, nor the other test here: each sets drainIdle.
func TestAnswersAfterEOFWhileTheyKeepGoingOut(t *testing.T) {
	const n = 6
	r, _, returned := eofSession(t, n, 500*time.Millisecond)
	seen := map[float64]bool{}
	for i := range n {
		time.Sleep(150 * time.Millisecond) // a slow client, not a timing assertion
		select {
		case <-returned:
			t.Fatalf("Serve returned with %d of %d answers still to be read", n-i, n)
		default:
		}
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		var m struct {
			ID     float64         `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &m), "a whole line: %.200s", line)
		require.NotEmpty(t, m.Result, line)
		seen[m.ID] = true
	}
	require.Len(t, seen, n)
	select {
	case <-returned:
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return once every request was answered")
	}
}

// A client that closed stdin and no longer reads does not keep the server:
// with no answer getting out, Serve gives up (drainIdle after the last
// one, and as long again for the write that is stuck), instead of waiting
// for ever on answers nobody takes.
func TestServeReturnsWhenTheClientStopsReading(t *testing.T) {
	_, _, returned := eofSession(t, 3, 100*time.Millisecond)
	select {
	case <-returned:
	case <-time.After(30 * time.Second):
		t.Fatal("Serve waits for ever on a client that does not read")
	}
}
