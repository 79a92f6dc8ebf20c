package connect

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/agent-box/agent-box/session"
	"github.com/agent-box/agent-box/watch"
)

// Channel makes connect a Claude Code channel, a research preview of
// Claude Code's (docs/hooks.md): it declares the claude/channel capability
// and, when a run on the box ends, sends notifications/claude/channel,
// which Claude Code shows the model even while the session is idle. The
// ends are agent-box watch's, from a cursor file of their own, so an end
// that happened while connect was not running is sent when it starts.
type Channel struct {
	// CursorFile is the watch's cursor file. Only the newest connect of
	// a cursor file sends (watch's rule): give each box its own.
	CursorFile string
	// Poll is how long one look at a quiet box waits (default watch's).
	Poll time.Duration
}

// channelCapability is Claude Code's experimental capability of a server
// that sends channel events.
const channelCapability = "claude/channel"

// channelInstructions tell the model what the events are.
const channelInstructions = ` Runs that end on this box arrive as <channel> events, one line per run: read them as process_wait's answer.`

// withChannel adds the channel capability and its instructions to an
// answer to initialize.
func withChannel(res json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	var caps map[string]json.RawMessage
	if json.Unmarshal(res, &m) != nil || json.Unmarshal(m["capabilities"], &caps) != nil {
		return res
	}
	var experimental map[string]json.RawMessage
	_ = json.Unmarshal(caps["experimental"], &experimental)
	if experimental == nil {
		experimental = map[string]json.RawMessage{}
	}
	experimental[channelCapability] = json.RawMessage(`{}`)
	caps["experimental"], _ = json.Marshal(experimental)
	m["capabilities"], _ = json.Marshal(caps)
	b, err := json.Marshal(m)
	if err != nil {
		return res
	}
	return withInstructions(b, channelInstructions)
}

// startChannel starts the channel's loop, once the client is initialized
// and the sessions are open.
func (r *relay) startChannel(ctx context.Context) {
	if r.srv.Channel == nil {
		return
	}
	r.mu.Lock()
	open, started := r.opened, r.channeled
	r.channeled = r.channeled || open
	var boxes []session.Tools
	for _, mb := range r.members {
		if mb.sess != nil {
			boxes = append(boxes, mb.sess.Tools())
		}
	}
	r.mu.Unlock()
	if !open || started {
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.channel(ctx, boxes)
	}()
}

// channel sends the boxes' ended runs to the client until ctx ends, or
// another connect takes the cursor file over.
func (r *relay) channel(ctx context.Context, boxes []session.Tools) {
	names := make([]string, len(boxes))
	for i, b := range boxes {
		names[i] = b.Box
	}
	box := strings.Join(names, ", ")
	send := writerFunc(func(report []byte) (int, error) {
		msg, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/claude/channel",
			"params": map[string]any{"content": strings.TrimRight(string(report), "\n"), "meta": map[string]string{"box": box}}})
		if err != nil {
			return 0, err
		}
		// A report that did not reach the client leaves the cursor where
		// it was (watch writes it only after the report).
		if err := r.send(msg); err != nil {
			return 0, err
		}
		return len(report), nil
	})
	diag := writerFunc(func(p []byte) (int, error) {
		r.logf("channel: %s", strings.TrimRight(string(p), "\n"))
		return len(p), nil
	})
	for ctx.Err() == nil {
		out, err := watch.Run(ctx, watch.Options{Boxes: boxes, CursorFile: r.srv.Channel.CursorFile,
			Report: send, Diag: diag, Poll: r.srv.Channel.Poll, OwnerPoll: r.srv.Channel.Poll})
		switch {
		case err != nil:
			r.logf("channel: %v; no more channel events", err)
			return
		case out == watch.Superseded:
			r.logf("channel: another agent-box connect sends the ends of %s now (%s)", box, r.srv.Channel.CursorFile)
			return
		}
	}
}

// writerFunc is an io.Writer of a function.
type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
