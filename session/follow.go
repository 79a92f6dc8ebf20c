package session

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/agent-box/agent-box/logframe"
)

// Follow is what to follow of a run's log.
type Follow struct {
	Name   string
	RunID  string // "" for the newest run of Name
	Offset int64  // where to start reading
	// MaxBytes bounds one window (default 256 KiB).
	MaxBytes int
	// Wait is how long one tail_log waits for output once the reader has
	// caught up (default 30 s; the box bounds it at a minute).
	Wait time.Duration
	// Now: copy the log as far as it was written when Follow began, and
	// return then, whether or not the run has ended.
	Now bool
}

// End is how a followed run ended, from its last window.
type End struct {
	Offset   int64  // the log's end: every byte before it was written out
	State    string // exited, unknown...
	Reason   string
	ExitCode *int
	Signal   string
}

// ErrTruncated: the box reported that the log lost bytes before the
// reader's offset (a capped or rotated log), so the copy is not whole.
var ErrTruncated = errors.New("the log lost bytes the reader had not read")

// Follow copies a run's log through s (see Tools.Follow).
func (s *Session) Follow(ctx context.Context, f Follow, stdout, stderr io.Writer) (End, error) {
	return s.Tools().Follow(ctx, f, stdout, stderr)
}

// Follow copies a run's log from f.Offset until the run has ended and the
// log is read to its end (with f.Now, to the end it had when Follow began). A combined log goes to stdout as it is; a framed
// log's frames go to stdout and stderr, in the order they were written.
//
// It is resumable by construction: every window is asked for at the offset
// where the last one ended, and a window cut by a drop is asked again at
// that same offset (CallTool re-sends reads as they were), so no byte is
// skipped or written twice. After a full window it asks again at once;
// caught up, it lets the box wait for output (tail_log's wait_ms) instead
// of polling. It returns the offset reached with any error, so a caller
// can go on from there.
func (t Tools) Follow(ctx context.Context, f Follow, stdout, stderr io.Writer) (End, error) {
	if f.MaxBytes <= 0 {
		f.MaxBytes = 256 << 10
	}
	if f.Wait <= 0 {
		f.Wait = 30 * time.Second
	}
	framed, size, runID, err := t.framed(ctx, f)
	if err != nil {
		return End{Offset: f.Offset}, err
	}
	// The run found, not the name: a restart under the follow makes
	// another run the name's newest, whose log is not this one.
	f.RunID = runID
	var demux *logframe.Demuxer
	if framed {
		demux = logframe.NewDemuxer(f.Offset)
	}
	off := f.Offset
	for {
		w, err := t.window(ctx, f, off, framed)
		if err != nil {
			return End{Offset: off}, err
		}
		if w.Offset != off {
			return End{Offset: off}, fmt.Errorf("%w: asked for offset %d, the box answered from %d", ErrTruncated, off, w.Offset)
		}
		data, err := base64.StdEncoding.DecodeString(w.Content)
		if err != nil {
			return End{Offset: off}, fmt.Errorf("tail_log of %s: content is not base64: %w", f.Name, err)
		}
		if framed {
			err = demux.Feed(data, func(fr logframe.Frame) error {
				out := stdout
				if fr.Stream == logframe.Stderr {
					out = stderr
				}
				_, err := out.Write(fr.Payload)
				return err
			})
		} else {
			_, err = stdout.Write(data)
		}
		if err != nil {
			return End{Offset: off}, err
		}
		off = w.EndOffset
		if w.EOF || f.Now && off >= size {
			return End{Offset: off, State: w.State, Reason: w.Reason, ExitCode: w.ExitCode, Signal: w.Signal}, nil
		}
	}
}

// window is the part of a tail_log answer Follow reads.
type window struct {
	Content   string `json:"content"`
	Offset    int64  `json:"offset"`
	EndOffset int64  `json:"end_offset"`
	EOF       bool   `json:"eof"`
	State     string `json:"state"`
	Reason    string `json:"reason"`
	ExitCode  *int   `json:"exit_code"`
	Signal    string `json:"signal"`
}

// window reads one window at off (a framed log's frames as stored): at
// once when the log has bytes past off, else after waiting up to f.Wait
// for some.
func (t Tools) window(ctx context.Context, f Follow, off int64, framed bool) (window, error) {
	wait := f.Wait.Milliseconds()
	if f.Now {
		wait = 0
	}
	args := map[string]any{"name": f.Name, "offset": off, "max_bytes": f.MaxBytes,
		"encoding": "base64", "wait_ms": wait}
	if framed {
		args["raw"] = true // the frames, which Follow demuxes in order
	}
	if f.RunID != "" {
		args["run_id"] = f.RunID
	}
	var w window
	err := t.Call(ctx, "tail_log", args, &w)
	return w, err
}

// framed says whether the run's log is framed (its stdout and stderr
// apart), how long the log is now, and the run's id.
func (t Tools) framed(ctx context.Context, f Follow) (framed bool, size int64, runID string, err error) {
	var r struct {
		RunID       string `json:"run_id"`
		CaptureMode string `json:"capture_mode"`
		LogBytes    int64  `json:"log_bytes"`
	}
	if err := t.Find(ctx, f.Name, f.RunID, &r); err != nil {
		return false, 0, "", err
	}
	return r.CaptureMode == "framed", r.LogBytes, r.RunID, nil
}

// Find decodes into out the run of name with runID ("": its newest), as
// process_list shows it. A run there is not fails in the box's words
// (tail_log's, which name the caller's way to list runs).
func (t Tools) Find(ctx context.Context, name, runID string, out any) error {
	var list struct {
		Runs []json.RawMessage `json:"runs"`
	}
	err := t.Call(ctx, "process_list", map[string]any{"name": name, "all": runID != ""}, &list)
	if err == nil && !(runID == "" && onSeveralBoxes(list.Runs)) {
		for _, raw := range list.Runs {
			var r struct {
				RunID string `json:"run_id"`
			}
			if json.Unmarshal(raw, &r) == nil && (runID == "" || r.RunID == runID) {
				return json.Unmarshal(raw, out)
			}
		}
	}
	probe := map[string]any{"name": name, "offset": 0, "max_bytes": 1, "encoding": "base64"}
	if runID != "" {
		probe["run_id"] = runID
	}
	if perr := t.Call(ctx, "tail_log", probe, nil); perr != nil {
		return perr
	}
	if err != nil {
		return err
	}
	if runID != "" {
		return fmt.Errorf("no run %q of %q on %s", runID, name, t.Box)
	}
	return fmt.Errorf("no run named %q on %s", name, t.Box)
}

// onSeveralBoxes says whether runs (a fleet's, which say their box) are
// on more than one box: the newest of a name is then no answer to "which
// run", and the probe below gets the fleet's words for it.
func onSeveralBoxes(runs []json.RawMessage) bool {
	first := ""
	for _, raw := range runs {
		var r struct {
			Box string `json:"box"`
		}
		if json.Unmarshal(raw, &r) != nil || r.Box == "" {
			continue
		}
		if first == "" {
			first = r.Box
		} else if r.Box != first {
			return true
		}
	}
	return false
}

// Caller sends a tools/call (its params as a client gives them) and
// returns the box's answer: a Session, or the box this process runs on,
// called in process.
type Caller interface {
	CallTool(ctx context.Context, params json.RawMessage, progress func(line []byte)) (Answer, error)
}

// Tools calls one box's tools by name.
type Tools struct {
	Caller Caller
	Box    string // the box's name, for messages
}

// Tools calls s's box's tools.
func (s *Session) Tools() Tools { return Tools{Caller: s, Box: s.box.Name} }

// Call calls a tool and decodes its structured content into out (nil: it
// is not read); a tool's failure is a *ToolError.
func (t Tools) Call(ctx context.Context, name string, args any, out any) error {
	params, err := json.Marshal(map[string]any{"name": name, "arguments": args})
	if err != nil {
		return err
	}
	ans, err := t.Caller.CallTool(ctx, params, nil)
	if err != nil {
		return err
	}
	if ans.Error != nil {
		return fmt.Errorf("%s: %s", name, ans.Error)
	}
	res, err := ans.toolResult(name)
	if err != nil {
		return err
	}
	if f := res.failure(name); f != nil {
		return f
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(res.StructuredContent, out)
}
