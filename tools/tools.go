// Package tools holds the MCP tool handlers of agent-box. They are thin:
// they decode and check arguments, call package runs, and render the
// result twice — structured content (canonical) and a short text for the
// model to read. Tool failures are results with isError set and a message
// that says what to do next, with the same as a structured error whose code
// a program branches on (errcode.go); protocol errors are left to mcp-go.
// The mutations apply a request id at most once (repeat.go).
package tools

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/agent-box/agent-box/logread"
	"github.com/agent-box/agent-box/runs"
)

// MaxArgumentBytes bounds a tool call's arguments once encoded.
const MaxArgumentBytes = 2 << 20

// Handlers serves the tools over one Manager.
type Handlers struct {
	M *runs.Manager
	// Gone is closed when the client has gone (stdin EOF): blocking calls
	// then answer at once instead of holding the process up.
	Gone <-chan struct{}
	// blocking holds a token per call that waits (process_wait, tail_log
	// with wait_ms); nil means no bound.
	blocking chan struct{}
}

// MaxBlockingCalls bounds the calls of one connection that may wait at
// once. Each holds one of the server's Workers until it returns (up to ten
// minutes), so the bound keeps Workers-MaxBlockingCalls free for the calls
// that answer at once: a process_kill must never queue behind waits.
const MaxBlockingCalls = 48

// Workers is the number of tool calls one connection serves at once.
const Workers = 64

// errTooManyWaits refuses a blocking call over MaxBlockingCalls.
var errTooManyWaits = fmt.Errorf("%w: %d calls that wait are in progress on this connection already, the most it serves at once; "+
	"wait for one of them to return, or call without waiting (timeout_ms 0 or wait_ms 0)", runs.ErrBusy, MaxBlockingCalls)

// waitSlot takes a slot for a call that may block; release gives it back.
func (h *Handlers) waitSlot() (release func(), err error) {
	if h.blocking == nil {
		return func() {}, nil
	}
	select {
	case h.blocking <- struct{}{}:
		return func() { <-h.blocking }, nil
	default:
		return nil, errTooManyWaits
	}
}

// blockingCall takes a wait slot for a call that may block (blocks), and
// ends ctx when the client goes away; done gives both back.
func (h *Handlers) blockingCall(ctx context.Context, blocks bool) (_ context.Context, done func(), err error) {
	release := func() {}
	if blocks {
		if release, err = h.waitSlot(); err != nil {
			return ctx, nil, err
		}
	}
	ctx, cancel := h.untilGone(ctx)
	return ctx, func() { cancel(); release() }, nil
}

func hint(v bool) *bool { return &v }

// Register adds every tool to s.
func (h *Handlers) Register(s *server.MCPServer) {
	add := func(name, title, desc string, ann mcp.ToolAnnotation, fn server.ToolHandlerFunc) {
		ann.Title = title
		in, out := schemasOf(name)
		// Built as a struct, not with mcp.NewTool: NewTool presets an
		// InputSchema, and a tool with both it and RawInputSchema fails to
		// marshal, so tools/list would get no reply at all.
		t := mcp.NewToolWithRawSchema(name, desc, in)
		t.RawOutputSchema = out
		t.Annotations = ann
		s.AddTool(t, fn)
	}
	add("process_start", "Start a process",
		"Start a process (build, tests, server) that keeps running and logging when the connection drops; later connections see it in process_list. Returns its pid at once, or with wait_ms its end as process_wait.",
		mcp.ToolAnnotation{ReadOnlyHint: hint(false), DestructiveHint: hint(false), IdempotentHint: hint(false), OpenWorldHint: hint(true)},
		h.once("process_start", h.start))
	add("process_restart", "Restart a run",
		"Stop the newest run of name if running (TERM, grace_ms, KILL) and start its spec again as a new run, waiting for its ready probe as process_start; the old run's record and log stay.",
		mcp.ToolAnnotation{ReadOnlyHint: hint(false), DestructiveHint: hint(true), IdempotentHint: hint(false), OpenWorldHint: hint(true)},
		h.once("process_restart", h.restart))
	add("process_list", "List processes",
		"List runs, newest first, with their true state (running, exited with code or signal, or unknown and why) and usage, also runs of earlier connections; the newest of each name unless all. Keep the cursor: changed_since=cursor lists only the runs that started or ended since, also after a reconnect.",
		mcp.ToolAnnotation{ReadOnlyHint: hint(true), DestructiveHint: hint(false), IdempotentHint: hint(true), OpenWorldHint: hint(false)},
		h.list)
	add("process_kill", "Signal a run's processes",
		"Signal (default TERM) every process of a run: its process group and any that left it (setsid); with grace_ms, SIGKILL follows for those still alive. Refuses when they cannot be proven the run's.",
		mcp.ToolAnnotation{ReadOnlyHint: hint(false), DestructiveHint: hint(true), IdempotentHint: hint(false), OpenWorldHint: hint(false)},
		h.once("process_kill", h.kill))
	add("tail_log", "Read a run's log",
		"Read a run's output: its last lines (16 KB), or from a byte offset (continue from end_offset). grep filters lines. wait_ms waits for new output instead of you polling; to wait for the end use process_wait. Framed runs' text starts stderr lines with [stderr].",
		mcp.ToolAnnotation{ReadOnlyHint: hint(true), DestructiveHint: hint(false), IdempotentHint: hint(true), OpenWorldHint: hint(false)},
		h.tail)
	add("process_wait", "Wait for a process to end",
		"Block until a run ends; return its exit code or signal, duration, usage and last lines of output. A progress token lets it wait up to 10 min; without one, 50 s at most. On wait_timed_out call again.",
		mcp.ToolAnnotation{ReadOnlyHint: hint(true), DestructiveHint: hint(false), IdempotentHint: hint(true), OpenWorldHint: hint(false)},
		h.wait)
	add("process_write", "Write to a process's stdin",
		"Write data to the stdin of a run started with stdin \"pipe\" or pty (e.g. an answer to a prompt, with its newline; on a pty \"\\u0003\" is Ctrl-C); close=true sends EOF (a pty's ^D). Works from any connection.",
		mcp.ToolAnnotation{ReadOnlyHint: hint(false), DestructiveHint: hint(false), IdempotentHint: hint(false), OpenWorldHint: hint(false)},
		h.once("process_write", h.write))
	add("process_resize", "Resize a pty run's terminal",
		"Resize a pty run's terminal (sends SIGWINCH), from any connection.",
		mcp.ToolAnnotation{ReadOnlyHint: hint(false), DestructiveHint: hint(false), IdempotentHint: hint(true), OpenWorldHint: hint(false)},
		h.once("process_resize", h.resize))
	add("process_remove", "Remove finished runs",
		"Delete finished runs' records and logs: one (name, run_id), or with all_finished every finished one. Refuses running ones, and a run whose record cannot be read unless named by run_id.",
		mcp.ToolAnnotation{ReadOnlyHint: hint(false), DestructiveHint: hint(true), IdempotentHint: hint(true), OpenWorldHint: hint(false)},
		h.once("process_remove", h.remove))
}

// decode binds the call's arguments strictly: unknown names are errors, so
// a misspelt argument is never silently ignored. Its errors wrap
// runs.ErrInvalid.
func decode(req mcp.CallToolRequest, dst any) error {
	if err := decodeArgs(req, dst); err != nil {
		return badArgs{err}
	}
	return nil
}

func decodeArgs(req mcp.CallToolRequest, dst any) error {
	args := req.GetRawArguments()
	if args == nil {
		args = map[string]any{}
	}
	b, err := json.Marshal(args)
	if err != nil {
		return fmt.Errorf("arguments: %w", err)
	}
	if len(b) > MaxArgumentBytes {
		return fmt.Errorf("arguments are %d bytes, at most %d", len(b), MaxArgumentBytes)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return fmt.Errorf("arguments must be an object: %w", err)
	}
	if err := exactKeys(keys, reflect.TypeOf(dst).Elem(), ""); err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(dst); err != nil {
		return argError(err, dst)
	}
	return nil
}

// exactKeys checks that every key of obj, an object of arguments for
// the struct t (at path), names one of t's arguments exactly, and so on
// inside the objects that are structs too: encoding/json matches names
// case-insensitively ("Command" would set command, "Log" ready's log),
// and arguments are matched exactly, as the schema does.
func exactKeys(obj map[string]json.RawMessage, t reflect.Type, path string) error {
	fields := argFields(t)
	for k, v := range obj {
		i := slices.IndexFunc(fields, func(f argField) bool { return f.name == k })
		if i < 0 {
			var names []string
			for _, f := range fields {
				names = append(names, f.name)
			}
			if len(k) > 64 {
				k = k[:64] + "..."
			}
			return fmt.Errorf("unknown field %q in the arguments (they are: %s)", path+k, strings.Join(names, ", "))
		}
		ft := fields[i].Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		var inner map[string]json.RawMessage
		if ft.Kind() == reflect.Struct && json.Unmarshal(v, &inner) == nil {
			if err := exactKeys(inner, ft, path+k+"."); err != nil {
				return err
			}
		}
	}
	return nil
}

func result(structured any, text string) *mcp.CallToolResult {
	return mcp.NewToolResultStructured(structured, text)
}

// progress says whether the call carries a progress token, and sends the
// progress of a wait to the client.
func progress(ctx context.Context, req mcp.CallToolRequest) (watched bool, send func(time.Duration, []string)) {
	if req.Params.Meta == nil || req.Params.Meta.ProgressToken == nil {
		return false, nil
	}
	tok := req.Params.Meta.ProgressToken
	srv := server.ServerFromContext(ctx)
	if srv == nil {
		return true, nil
	}
	return true, func(elapsed time.Duration, running []string) {
		srv.SendNotificationToClient(ctx, "notifications/progress", map[string]any{
			"progressToken": tok,
			"progress":      elapsed.Seconds(),
			"message":       fmt.Sprintf("%s still running after %s", strings.Join(running, ", "), elapsed.Round(time.Second)),
		})
	}
}

// optDuration is runs.Duration of an optional argument: nil when not
// given.
func optDuration(v *int64, unit time.Duration) *time.Duration {
	if v == nil {
		return nil
	}
	return new(runs.Duration(*v, unit))
}

func (h *Handlers) start(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var sr runs.StartRequest
	if err := decode(req, &sr); err != nil {
		return fail(err), nil
	}
	if sr.Ready != nil || sr.WaitMS > 0 {
		var done func()
		var err error
		if ctx, done, err = h.blockingCall(ctx, true); err != nil {
			return fail(err), nil
		}
		defer done()
		sr.Watched, sr.Progress = progress(ctx, req)
	}
	sr.RequestID, _, _ = requestID(req) // checked by once
	began := time.Now()
	res, err := h.M.Start(ctx, sr)
	if err != nil {
		return fail(err), nil
	}
	// What was waited, not what was asked, as process_wait says it.
	out, text := startAnswer(res, time.Since(began).Round(time.Millisecond))
	return result(out, text), nil
}

// startReply is process_start's structured result: with wait_ms, or when
// the run had ended by the answer, its end as process_wait answers it.
type startReply struct {
	runs.StartResult
	*Waited
	*RunEnd
	Hint string `json:"hint,omitempty"`
}

// startAnswer is the answer to a start of res (of process_start, or of
// process_restart), which waited for its end for waited.
func startAnswer(res runs.StartResult, waited time.Duration) (startReply, string) {
	out, text := startReply{StartResult: res}, startText(res)
	if w := res.Waited; w != nil {
		r := waitResult(*w, waited)
		out.Waited, out.RunEnd, out.Hint = &r.Waited, &r.RunEnd, r.Hint
		text += startWaitText(*w, waited)
	}
	return out, text
}

// restartReply is process_restart's structured result: the new run as
// process_start answers it, and the run it replaced.
type restartReply struct {
	startReply
	Previous runs.Run `json:"previous"`
	Stopped  bool     `json:"stopped,omitempty" jsonschema:"the previous run was running and was stopped"`
}

type restartArgs struct {
	Name      string            `json:"name"`
	GraceMS   *int64            `json:"grace_ms" jsonschema:"SIGKILL after this long past SIGTERM."`
	SecretEnv map[string]string `json:"secret_env" jsonschema:"The run's secret_env values again (never stored)."`
}

func (h *Handlers) restart(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a restartArgs
	if err := decode(req, &a); err != nil {
		return fail(err), nil
	}
	rr := runs.RestartRequest{Name: a.Name, Grace: optDuration(a.GraceMS, time.Millisecond), SecretEnv: a.SecretEnv}
	// A restart waits: for the old run to stop (up to grace_ms), and for
	// the new one's ready probe when it has one, which is the record's
	// to say, read once the restart runs.
	ctx, done, err := h.blockingCall(ctx, true)
	if err != nil {
		return fail(err), nil
	}
	defer done()
	rr.Watched, rr.Progress = progress(ctx, req)
	rr.RequestID, _, _ = requestID(req) // checked by once
	res, err := h.M.Restart(ctx, rr)
	if err != nil {
		return fail(err), nil
	}
	started, text := startAnswer(res.StartResult, 0) // no wait_ms: a run that ended at once
	out := restartReply{startReply: started, Previous: res.Previous, Stopped: res.Stopped}
	return result(out, "previous: "+runBrief(res.Previous)+"\n"+text), nil
}

type listArgs struct {
	Name         string `json:"name" jsonschema:"Only runs of this name."`
	All          bool   `json:"all" jsonschema:"Also older runs of each name."`
	Limit        *int   `json:"limit" jsonschema:"At most this many runs, the newest."`
	Before       string `json:"before" jsonschema:"Only runs older than this run id (an answer's next_before)."`
	State        string `json:"state"`
	ChangedSince string `json:"changed_since" jsonschema:"A cursor from an earlier answer. Give it alone."`
}

// listReply is process_list's structured result.
type listReply struct {
	Runs       []runs.Run `json:"runs"`
	Total      int        `json:"total" jsonschema:"Runs matching, in this answer or not."`
	NextBefore string     `json:"next_before,omitempty" jsonschema:"More, older runs exist: pass this as before."`
	Cursor     string     `json:"cursor" jsonschema:"pass as changed_since to list the runs that started or ended after this answer"`
}

func (h *Handlers) list(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a listArgs
	if err := decode(req, &a); err != nil {
		return fail(err), nil
	}
	page, err := h.M.ListPage(runs.ListQuery{Name: a.Name, All: a.All, Limit: a.Limit, Before: a.Before, State: a.State, ChangedSince: a.ChangedSince})
	if err != nil {
		return fail(err), nil
	}
	out := listReply{Runs: page.Runs, Total: page.Total, NextBefore: page.NextBefore, Cursor: page.Cursor}
	return result(out, listText(page, a.ChangedSince != "")), nil
}

type killArgs struct {
	Name    string `json:"name"`
	RunID   string `json:"run_id" jsonschema:"Default: the newest run of name."`
	Signal  string `json:"signal"`
	GraceMS int64  `json:"grace_ms" jsonschema:"SIGKILL after this long."`
}

func (h *Handlers) kill(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a killArgs
	if err := decode(req, &a); err != nil {
		return fail(err), nil
	}
	sig, err := runs.ParseSignal(a.Signal)
	if err != nil {
		return fail(err), nil
	}
	res, err := h.M.Kill(a.Name, a.RunID, sig, runs.Duration(a.GraceMS, time.Millisecond))
	if err != nil {
		return fail(err), nil
	}
	text := res.Run.Name + ": " + res.Message
	if !res.AlreadyEnd {
		text += "; now " + stateOf(res.Run)
	}
	if len(res.Run.Survivors) > 0 {
		// Processes of the run still alive (after a USR1, a STOP, or
		// before they handled the signal) must not read as gone.
		text += fmt.Sprintf("; still running: pids %s", joinPids(res.Run.Survivors))
	}
	return result(res, text), nil
}

type tailArgs struct {
	Name      string `json:"name"`
	RunID     string `json:"run_id" jsonschema:"Default: the newest run of name."`
	Offset    *int64 `json:"offset" jsonschema:"Log byte offset; negative: from the end; default: the last lines (grep, until: 0). Continue from end_offset."`
	MaxBytes  *int   `json:"max_bytes" jsonschema:"Most log bytes to read (default 16384; framed: whole frames)."`
	Encoding  string `json:"encoding" jsonschema:"base64: exact bytes, for binary output."`
	Raw       bool   `json:"raw" jsonschema:"Framed runs: return the frames as stored."`
	WaitMS    int64  `json:"wait_ms" jsonschema:"If nothing complete is past offset and the log can grow, wait this long for output."`
	TailLines *int   `json:"tail_lines" jsonschema:"Return the last N lines instead of reading from offset."`
	Grep      string `json:"grep"` // described by grepDescription
	Context   int    `json:"context" jsonschema:"With grep: lines before and after each match."`
	Until     string `json:"until" jsonschema:"RE2, with wait_ms: return once a new line (or an unfinished one: a prompt) matches."`
	IdleMS    int64  `json:"idle_ms" jsonschema:"With wait_ms: return once output was quiet this long after new bytes."`
	Clean     *bool  `json:"clean" jsonschema:"Text without escapes, \\r redraws collapsed (not base64/raw; default on)."`
	Screen    bool   `json:"screen" jsonschema:"Pty runs: the screen now."`
}

// TailOutput is tail_log's structured result.
type TailOutput struct {
	Name         string          `json:"name"`
	RunID        string          `json:"run_id"`
	Content      string          `json:"content,omitempty" jsonschema:"Text of the window; base64 when encoding is base64. Framed runs: chunks (text), stdout and stderr (base64)."`
	Encoding     string          `json:"encoding"`
	Lossy        bool            `json:"lossy,omitempty" jsonschema:"Invalid UTF-8 was replaced; use encoding base64 for exact bytes."`
	Stdout       *string         `json:"stdout,omitempty" jsonschema:"framed, base64"`
	Stderr       *string         `json:"stderr,omitempty" jsonschema:"framed, base64"`
	Chunks       []logread.Chunk `json:"chunks,omitempty" jsonschema:"framed text: the output by stream, in the order written"`
	Screen       *ScreenOutput   `json:"screen,omitempty"`
	Matches      []logread.Match `json:"matches,omitempty"`
	Skipped      []logread.Gap   `json:"skipped,omitempty" jsonschema:"Log bytes left out of this answer, and the offset to fetch each range from."`
	SkippedBytes int64           `json:"skipped_bytes,omitempty"`
	Offset       int64           `json:"offset"`
	EndOffset    int64           `json:"end_offset"`
	Truncated    bool            `json:"truncated" jsonschema:"More bytes exist past end_offset now."`
	EOF          bool            `json:"eof" jsonschema:"No byte will ever be written past end_offset: the output is closed (the run finished) or nothing is left to write the log (its supervisor is gone); stop following."`
	State        string          `json:"state"`
	Reason       string          `json:"reason,omitempty"`
	ExitCode     *int            `json:"exit_code,omitempty" jsonschema:"absent unless the run exited normally"` // not null: see runs.Run
	Signal       string          `json:"signal,omitempty"`
	LogBytes     int64           `json:"log_bytes"`
	LogDropped   int64           `json:"log_dropped,omitempty"`
	LogCapped    bool            `json:"log_capped,omitempty"`
	LogError     string          `json:"log_error,omitempty"`
	CleanedBytes int             `json:"cleaned_bytes,omitempty" jsonschema:"clean: bytes of escapes and redrawn text left out"`
	Matched      *bool           `json:"matched,omitempty" jsonschema:"given until: whether a line matched it"`

	grep    bool // the answer is of a grep: what waits is a line, not a character
	context bool // a grep with context: what waits may be the lines before a match
}

// ScreenOutput is tail_log's screen: a pty run's terminal as it shows now,
// replayed from the log bytes offset..end_offset.
type ScreenOutput struct {
	Lines   []string `json:"lines" jsonschema:"rows from the top; trailing spaces and empty rows left out"`
	Cols    int      `json:"cols"`
	Rows    int      `json:"rows"`
	Cursor  Cursor   `json:"cursor"`
	Partial bool     `json:"partial,omitempty" jsonschema:"rows drawn before offset may be missing"`
}

// Cursor is where a terminal's cursor is, from 1.
type Cursor struct {
	Row int `json:"row"`
	Col int `json:"col"`
}

func (h *Handlers) tail(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a tailArgs
	if err := decode(req, &a); err != nil {
		return fail(err), nil
	}
	tr := runs.TailRequest{Name: a.Name, RunID: a.RunID, Offset: a.Offset, MaxBytes: a.MaxBytes, TailLines: a.TailLines,
		Grep: a.Grep, Context: a.Context, Clean: a.Clean, Raw: a.Raw, Wait: runs.Duration(a.WaitMS, time.Millisecond),
		Await: runs.Await{Until: a.Until, Idle: runs.Duration(a.IdleMS, time.Millisecond)}, Screen: a.Screen}
	switch a.Encoding {
	case "", encText:
		a.Encoding = encText
	case encBase64:
		tr.Exact = true
	default:
		return fail(fmt.Errorf("%w: encoding %q is not one of text, base64", runs.ErrInvalid, a.Encoding)), nil
	}
	// A screen's render takes long enough on a large terminal to count
	// among the calls that wait.
	ctx, done, err := h.blockingCall(ctx, a.WaitMS > 0 || a.Screen)
	if err != nil {
		return fail(err), nil
	}
	defer done()
	res, err := h.M.Tail(ctx, tr)
	if err != nil {
		return fail(err), nil
	}
	out := tailOutput(res, a.Encoding, a.Raw)
	out.grep, out.context = a.Grep != "", a.Context > 0
	if a.Until != "" {
		out.Matched = &res.Matched
	}
	return result(out, tailText(out)), nil
}

func tailOutput(res runs.TailResult, encoding string, raw bool) TailOutput {
	w, run := res.Window, res.Run
	out := TailOutput{
		Name: run.Name, RunID: run.RunID, Encoding: encoding, Lossy: w.Lossy,
		Offset: w.Offset, EndOffset: w.EndOffset, Truncated: w.Truncated, EOF: res.EOF,
		State: string(run.State), Reason: run.Reason, ExitCode: run.ExitCode, Signal: run.Signal,
		LogBytes: run.LogBytes, LogDropped: run.LogDropped, LogCapped: run.LogCapped, LogError: run.LogError,
		Matches: w.Matches, Skipped: w.Skipped, CleanedBytes: res.CleanedBytes,
	}
	for _, g := range w.Skipped {
		out.SkippedBytes += g.Bytes
	}
	decoded := run.CaptureMode == "framed" && !raw
	// Each byte of output once: a framed run's text is its chunks (the
	// streams in the order written, which a program joins as it needs),
	// not also their concatenations.
	switch {
	case res.Screen != nil:
		sc := res.Screen
		out.Screen = &ScreenOutput{Lines: sc.Lines, Cols: sc.Cols, Rows: sc.Rows,
			Cursor: Cursor{Row: sc.CursorRow, Col: sc.CursorCol}, Partial: sc.Partial}
		if out.Screen.Lines == nil {
			out.Screen.Lines = []string{}
		}
	case encoding == "base64" && decoded:
		so, se := base64.StdEncoding.EncodeToString(w.StdoutBytes), base64.StdEncoding.EncodeToString(w.StderrBytes)
		out.Stdout, out.Stderr = &so, &se
	case encoding == "base64":
		out.Content = base64.StdEncoding.EncodeToString(w.Bytes)
	case decoded && w.Chunks != nil:
		out.Chunks = w.Chunks
	default:
		out.Content = w.Content
	}
	return out
}

type waitArgs struct {
	Name        string   `json:"name"`
	Names       []string `json:"names" jsonschema:"Instead of name: the first of these to end."`
	All         bool     `json:"all" jsonschema:"With names: wait for each."`
	RunID       string   `json:"run_id"`
	TimeoutMS   *int64   `json:"timeout_ms"` // bounded as the description says
	SinceOffset int64    `json:"since_offset" jsonschema:"Log offset read to: the tail starts no earlier."`
	Survivors   bool     `json:"survivors" jsonschema:"Also wait for the leader's survivors."`
	Clean       *bool    `json:"clean" jsonschema:"As tail_log's."`
}

// untilGone returns ctx, cancelled also when the client goes away.
func (h *Handlers) untilGone(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	if h.Gone != nil {
		go func() {
			select {
			case <-h.Gone:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	return ctx, cancel
}

func (h *Handlers) wait(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a waitArgs
	if err := decode(req, &a); err != nil {
		return fail(err), nil
	}
	wr := runs.WaitRequest{Name: a.Name, Names: a.Names, All: a.All, RunID: a.RunID, SinceOffset: a.SinceOffset, Survivors: a.Survivors, Clean: a.Clean}
	wr.Timeout = optDuration(a.TimeoutMS, time.Millisecond)
	wr.Watched, wr.Progress = progress(ctx, req)
	ctx, done, err := h.blockingCall(ctx, a.TimeoutMS == nil || *a.TimeoutMS > 0)
	if err != nil {
		return fail(err), nil
	}
	defer done()
	began := time.Now()
	res, err := h.M.Wait(ctx, wr)
	if err != nil {
		return fail(err), nil
	}
	// What was waited, not what was asked: a cancelled call ends early.
	waited := time.Since(began).Round(time.Millisecond)
	return result(waitResult(res, waited), waitText(res, waited)), nil
}

// waitReply is process_wait's structured result.
type waitReply struct {
	Run     runs.Run   `json:"run"`
	Others  []runs.Run `json:"others,omitempty" jsonschema:"with names: the other runs, still going"`
	Running []string   `json:"running,omitempty" jsonschema:"with names: those still running"`
	Waited
	RunEnd
	Ends []EndedRun `json:"ends,omitempty" jsonschema:"with all: the other runs that ended"`
	Hint string     `json:"hint,omitempty"`
}

// Waited is what a wait for a run's end says of itself (process_wait,
// process_start's wait_ms).
type Waited struct {
	WaitTimedOut  bool `json:"wait_timed_out" jsonschema:"this wait's bound passed with the run still going (the run's own timeout is run.timed_out)"`
	WaitShortened bool `json:"wait_shortened,omitempty" jsonschema:"timeout_ms was cut to the bound for calls without a progress token"`
}

// RunEnd is a run's end beside the run, as a wait answers it.
type RunEnd struct {
	DurationMS       *int64 `json:"duration_ms,omitempty" jsonschema:"Run time so far, or until the exit; absent when the run's end is unknown."`
	OutputTail       string `json:"output_tail" jsonschema:"The last lines of output (framed runs: stdout and stderr interleaved), at most 20 lines and 8 KiB, none before since_offset."`
	StderrTail       string `json:"stderr_tail,omitempty" jsonschema:"Framed runs: the last lines of stderr alone."`
	OutputTailOffset *int64 `json:"output_tail_offset,omitempty" jsonschema:"Where output_tail begins in the log (framed: the frame holding its first byte)."`
	StderrTailOffset *int64 `json:"stderr_tail_offset,omitempty" jsonschema:"Framed runs: the frame holding stderr_tail's first byte."`
	OutputTailWhole  *bool  `json:"output_tail_whole,omitempty" jsonschema:"output_tail is all of the output past since_offset: nothing was left out."`
	OutputTailCut    bool   `json:"output_tail_cut,omitempty" jsonschema:"The tail's first line is longer than the bound: only its end is shown."`
	CleanedBytes     int    `json:"cleaned_bytes,omitempty" jsonschema:"clean: bytes of escapes and redrawn text left out"`
}

// EndedRun is a run and its end (process_wait's ends).
type EndedRun struct {
	Run runs.Run `json:"run"`
	RunEnd
}

// waitResult is process_wait's structured result for res.
func waitResult(res runs.WaitResult, waited time.Duration) waitReply {
	out := waitReply{
		Run: res.Run, Others: res.Others, Running: res.Running,
		Waited: Waited{WaitTimedOut: res.WaitTimedOut, WaitShortened: res.Shortened},
		RunEnd: runEnd(res.End), Hint: waitHint(res, waited),
	}
	for _, e := range res.Ends {
		out.Ends = append(out.Ends, EndedRun{Run: e.Run, RunEnd: runEnd(e)})
	}
	return out
}

// runEnd is e past its run.
func runEnd(e runs.End) RunEnd {
	out := RunEnd{OutputTail: e.Output, OutputTailCut: e.OutputCut || e.StderrCut, CleanedBytes: e.CleanedBytes}
	if e.DurationKnown {
		out.DurationMS = new(e.Duration.Milliseconds())
	}
	if e.Output != "" || e.Stderr != "" {
		out.OutputTailOffset, out.OutputTailWhole = new(e.OutputFrom), new(e.OutputWhole)
	}
	if e.Stderr != "" {
		out.StderrTail, out.StderrTailOffset = e.Stderr, new(e.StderrFrom)
	}
	return out
}

type writeArgs struct {
	Name     string `json:"name"`
	RunID    string `json:"run_id"`
	Data     string `json:"data" jsonschema:"Bytes for the run's stdin."`
	Encoding string `json:"encoding"`
	Close    bool   `json:"close" jsonschema:"Close stdin after writing (EOF for the child)."`
	WaitMS   int64  `json:"wait_ms" jsonschema:"Then wait up to this long, and return the output that followed."`
	Until    string `json:"until" jsonschema:"RE2: return once a new line (or a prompt) matches."`
	IdleMS   int64  `json:"idle_ms" jsonschema:"Return once output was quiet this long."`
}

// writeReply is process_write's structured result: with wait_ms, the
// output that followed the write, from offset to end_offset of the log.
type writeReply struct {
	runs.WriteResult
	Output    *string `json:"output,omitempty" jsonschema:"with wait_ms: the output that followed the write, as tail_log's text"`
	Offset    *int64  `json:"offset,omitempty"`
	EndOffset *int64  `json:"end_offset,omitempty"`
	Matched   *bool   `json:"matched,omitempty"`
	Truncated bool    `json:"truncated,omitempty" jsonschema:"more output is past end_offset"`
}

func (h *Handlers) write(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a writeArgs
	if err := decode(req, &a); err != nil {
		return fail(err), nil
	}
	data := []byte(a.Data)
	switch a.Encoding {
	case "", encText:
	case encBase64:
		b, err := base64.StdEncoding.DecodeString(a.Data)
		if err != nil {
			return fail(fmt.Errorf("%w: data is not valid base64: %w", runs.ErrInvalid, err)), nil
		}
		data = b
	default:
		return fail(fmt.Errorf("%w: encoding %q is not one of text, base64", runs.ErrInvalid, a.Encoding)), nil
	}
	wr := runs.WriteRequest{Name: a.Name, RunID: a.RunID, Data: data, Close: a.Close, Wait: runs.Duration(a.WaitMS, time.Millisecond),
		Await: runs.Await{Until: a.Until, Idle: runs.Duration(a.IdleMS, time.Millisecond)}}
	ctx, done, err := h.blockingCall(ctx, a.WaitMS > 0)
	if err != nil {
		return fail(err), nil
	}
	defer done()
	res, err := h.M.Write(ctx, wr)
	if err != nil {
		return fail(err), nil
	}
	out := writeReply{WriteResult: res}
	text := fmt.Sprintf("wrote %d bytes to %s's stdin", res.Written, res.Run.Name)
	if res.Closed {
		text += "; stdin closed"
	}
	if r := res.Output; r != nil {
		o := tailOutput(*r, "text", false)
		body := o.Content
		if o.Chunks != nil {
			body = markStderr(o.Chunks)
		}
		out.Output, out.Offset, out.EndOffset = &body, &o.Offset, &o.EndOffset
		text += fmt.Sprintf("; output %d..%d", o.Offset, o.EndOffset)
		if a.Until != "" {
			out.Matched = &r.Matched
			text += untilText(r.Matched)
		}
		switch {
		case o.EOF:
			text += " eof"
		case o.Truncated:
			text += fmt.Sprintf(" more: tail_log offset=%d", o.EndOffset)
		}
		out.Truncated = o.Truncated
		text += ":\n" + body
	}
	return result(out, text), nil
}

// untilText says, shortly, whether until matched.
func untilText(matched bool) string {
	if matched {
		return " (until matched)"
	}
	return " (until not matched)"
}

type resizeArgs struct {
	Name  string `json:"name"`
	RunID string `json:"run_id"`
	Cols  int    `json:"cols"`
	Rows  int    `json:"rows"`
}

func (h *Handlers) resize(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a resizeArgs
	if err := decode(req, &a); err != nil {
		return fail(err), nil
	}
	run, err := h.M.Resize(a.Name, a.RunID, a.Cols, a.Rows)
	if err != nil {
		return fail(err), nil
	}
	return result(resizeResult{Run: run}, fmt.Sprintf("resized %s's terminal to %dx%d", run.Name, run.Cols, run.Rows)), nil
}

// resizeResult is process_resize's answer: the run, with its new size.
type resizeResult struct {
	Run runs.Run `json:"run"`
}

type removeArgs struct {
	Name        string `json:"name"`
	RunID       string `json:"run_id"`
	AllFinished bool   `json:"all_finished" jsonschema:"Remove every finished run (of name, or of all names)."`
}

func (h *Handlers) remove(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a removeArgs
	if err := decode(req, &a); err != nil {
		return fail(err), nil
	}
	res, err := h.M.Remove(a.Name, a.RunID, a.AllFinished)
	if err != nil {
		return fail(err), nil
	}
	if res.Removed == nil {
		res.Removed = []runs.Run{}
	}
	return result(res, removeText(res)), nil
}
