package session

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTimeLeft: a wait re-sent after a drop asks for what is left of its
// bound, reckoned as the box reckons it, never below zero.
func TestTimeLeft(t *testing.T) {
	for _, c := range []struct {
		tool, args string
		elapsed    time.Duration
		watched    bool
		want       string
	}{
		{"process_wait", `{"name":"a","timeout_ms":120000}`, 20 * time.Second, true, `{"name":"a","timeout_ms":100000}`},
		{"process_wait", `{"name":"a","timeout_ms":120000}`, 20 * time.Second, false, `{"name":"a","timeout_ms":30000}`},
		{"process_wait", `{"name":"a"}`, 12 * time.Second, false, `{"name":"a","timeout_ms":18000}`},
		{"process_wait", `{"name":"a"}`, 12 * time.Second, true, `{"name":"a","timeout_ms":588000}`}, // a token alone: the most
		{"process_wait", `{"name":"a","timeout_ms":1000}`, 5 * time.Second, true, `{"name":"a","timeout_ms":0}`},
		{"tail_log", `{"name":"a","wait_ms":5000}`, 2 * time.Second, false, `{"name":"a","wait_ms":3000}`},
		{"tail_log", `{"name":"a","offset":7}`, 2 * time.Second, false, `{"name":"a","offset":7}`},
		{"process_wait", `{"name":"a","timeout_ms":null}`, 12 * time.Second, false, `{"name":"a","timeout_ms":18000}`},
		{"tail_log", `{"name":"a","wait_ms":1000,"until":"x"}`, 2 * time.Second, false, `{"name":"a","wait_ms":1,"until":"x"}`},
		{"tail_log", `{"name":"a","wait_ms":1000,"idle_ms":5}`, 2 * time.Second, false, `{"name":"a","wait_ms":1,"idle_ms":5}`},
		{"tail_log", `{"name":"a","wait_ms":1000}`, 2 * time.Second, false, `{"name":"a","wait_ms":0}`},
	} {
		p := map[string]json.RawMessage{"name": json.RawMessage(`"` + c.tool + `"`), "arguments": json.RawMessage(c.args)}
		timeLeft(p, c.tool, c.elapsed, c.watched)
		require.JSONEq(t, c.want, string(p["arguments"]), "%s %s after %s", c.tool, c.args, c.elapsed)
	}
}

// TestTokenKey: a progress token is found again as the box echoes it,
// re-encoded.
func TestTokenKey(t *testing.T) {
	for client, box := range map[string]string{
		`"a<b&c"`:              `"a\u003cb\u0026c"`,
		`1.0`:                  `1`,
		`12345678901234567890`: `12345678901234567000`,
		`"tok"`:                `"tok"`,
	} {
		require.Equal(t, tokenKey(json.RawMessage(client)), tokenKey(json.RawMessage(box)), "%s echoed as %s", client, box)
	}
}
