package tools

import (
	"encoding/json"

	"github.com/agent-box/agent-box/wire"
)

// Schemas are written out by hand as JSON: they are part of the protocol
// (pinned by the golden tools/list transcript), and mcp-go's struct
// reflection silently drops an output schema for some tag forms.
//
// Every property has a single type: a field that may have no value is left
// out rather than null (exit_code), because a client that maps tool schemas
// onto a one-type dialect (the OpenAPI subset of Gemini's function
// declarations) rejects ["integer", "null"]; the MCP Inspector's --strict
// warns of it (e2e/inspector_test.go).

const runProps = `{
  "name": {"type": "string"},
  "run_id": {"type": "string"},
  "state": {"type": "string", "enum": ["running", "exited", "unknown"]},
  "reason": {"type": "string"},
  "pid": {"type": "integer"},
  "exit_code": {"type": "integer", "description": "exit status when the process exited normally; absent when it was killed by a signal or has not exited"},
  "signal": {"type": "string", "description": "signal that killed it, e.g. SIGKILL"},
  "timed_out": {"type": "boolean", "description": "the run's timeout_s killed it"},
  "oom_killed": {"type": "boolean", "description": "the kernel killed a process of the run at its memory limit"},
  "status_of": {"type": "string", "enum": ["program", "shell"], "description": "whose pid and exit status these are: the program's, or /bin/sh's for a compound command (pipes, lists, builtins)"},
  "survivors": {"type": "array", "items": {"type": "integer"}, "description": "pids of the run's processes still alive after its leader exited (its group's members, and any that left the group)"},
  "command": {"type": "string"},
  "argv": {"type": "array", "items": {"type": "string"}},
  "cwd": {"type": "string"},
  "capture_mode": {"type": "string"},
  "stdin": {"type": "string"},
  "pty": {"type": "boolean", "description": "runs on a terminal of cols x rows"},
  "cols": {"type": "integer"},
  "rows": {"type": "integer"},
  "started_at": {"type": "string"},
  "finished_at": {"type": "string"},
  "log_path": {"type": "string"},
  "log_bytes": {"type": "integer"},
  "log_dropped": {"type": "integer", "description": "Output bytes missing from the log's end (cap or write error)."},
  "log_capped": {"type": "boolean"},
  "log_error": {"type": "string"},
  "limits": {"type": "object", "properties": {"memory_mb": {"type": "integer"}, "cpu_percent": {"type": "integer"}, "pids": {"type": "integer"}}, "description": "the caps the run was started under"},
  "usage": {"type": "object", "description": "what its processes use (running) or used (exited); from: cgroup (its processes; peak: the most it was charged, as memory_mb counts), proc (summed over its live processes; peak: the sum of their own peaks) or exit (recorded then)", "properties": {
    "memory_bytes": {"type": "integer", "description": "resident now"},
    "peak_memory_bytes": {"type": "integer"},
    "cpu_ms": {"type": "integer"},
    "procs": {"type": "integer", "description": "processes now"},
    "from": {"type": "string", "enum": ["cgroup", "proc", "exit"]}
  }, "required": ["cpu_ms", "from"]}
}`

var runSchema = `{"type": "object", "properties": ` + runProps + `, "required": ["name", "run_id", "state", "reason"]}`

const startInput = `{
  "type": "object",
  "properties": {
    "name": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$", "description": "Your name for the run; a finished run's name may be reused (the old run stays)."},
    "command": {"type": "string", "maxLength": 131072, "description": "Shell command (/bin/sh -c); a lone simple command is exec'd, so pid and exit status are the program's (status_of). Give this or argv."},
    "argv": {"type": "array", "items": {"type": "string"}, "maxItems": 4096, "description": "Program and arguments, run without a shell. Give this or command."},
    "cwd": {"type": "string", "description": "Working directory (must exist): absolute, or from the home directory (the default; ~ works)."},
    "env": {"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 1024, "description": "Variables set over the inherited environment."},
    "secret_env": {"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 64, "description": "Variables whose values are [redacted] in the log, every answer and the record."},
    "capture_mode": {"type": "string", "enum": ["combined", "framed"], "default": "combined", "description": "combined: one stream in write order. framed: stdout and stderr apart, each byte-exact."},
    "stdin": {"type": "string", "enum": ["null", "pipe"], "default": "null", "description": "pipe: keep stdin open for process_write."},
    "pty": {"type": "boolean", "description": "On a terminal (TERM=xterm-256color), stdin its input; combined only."},
    "cols": {"type": "integer", "default": 120},
    "rows": {"type": "integer", "default": 40},
    "timeout_s": {"type": "integer", "minimum": 0, "maximum": 604800, "description": "After this many seconds TERM, and 5 s later KILL, every process of the run. 0: none."},
    "max_log_bytes": {"type": "integer", "minimum": 0, "maximum": 1099511627776, "description": "Log size cap (output is still drained). Default 1 GiB."},
    "limits": {"type": "object", "properties": {"memory_mb": {"type": "integer", "minimum": 8, "maximum": 16777216}, "cpu_percent": {"type": "integer", "minimum": 1, "description": "100: one CPU"}, "pids": {"type": "integer", "minimum": 1, "maximum": 4194304}}, "additionalProperties": false, "description": "Caps, in a cgroup; refused where not enforceable. Unset: the server's defaults."},
    "if_running": {"type": "string", "enum": ["error", "reuse"], "default": "error", "description": "reuse: if this name runs with the same command/argv, cwd and env, return that run (reused)."},
    "ready": {"type": "object", "properties": {"log": {"type": "string", "description": "RE2 matching a line"}, "tcp_port": {"type": "integer"}, "http": {"type": "string", "description": "URL answering below 500"}}, "additionalProperties": false, "description": "Return once this one probe passes, the run ends, or ready_timeout_s."},
    "ready_timeout_s": {"type": "integer", "minimum": 0, "maximum": 600, "description": "Default 30; over 50 needs a progress token."}
  },
  "required": ["name"],
  "additionalProperties": false
}`

// startProps are process_start's answer: the run, and its readiness.
var startProps = runProps[:len(runProps)-2] + `,
  "reused": {"type": "boolean", "description": "if_running reuse: the run was running already"},
  "ready": {"type": "boolean"},
  "ready_after_ms": {"type": "integer"},
  "ready_offset": {"type": "integer", "description": "log probe: the offset of the matching line"},
  "ready_error": {"type": "string", "description": "why not ready: the run ended (with its status), or the probe timed out and the run is left running"},
  "output_tail": {"type": "string", "description": "not ready because the run ended: its last lines"}
}`

var startOutput = `{"type": "object", "properties": ` + startProps + `, "required": ["name", "run_id", "pid", "state", "capture_mode", "log_path", "started_at"]}`

const restartInput = `{
  "type": "object",
  "properties": {
    "name": {"type": "string"},
    "grace_ms": {"type": "integer", "minimum": 0, "maximum": 600000, "default": 5000, "description": "SIGKILL after this long past SIGTERM."},
    "secret_env": {"type": "object", "additionalProperties": {"type": "string"}, "description": "The run's secret_env values again (never stored)."}
  },
  "required": ["name"],
  "additionalProperties": false
}`

var restartOutput = `{"type": "object", "properties": ` + startProps[:len(startProps)-2] + `,
  "previous": ` + runSchema + `,
  "stopped": {"type": "boolean", "description": "the previous run was running and was stopped"}
}, "required": ["name", "run_id", "state", "previous"]}`

const listInput = `{
  "type": "object",
  "properties": {
    "name": {"type": "string", "description": "Only runs of this name."},
    "all": {"type": "boolean", "default": false, "description": "Also older runs of each name."},
    "limit": {"type": "integer", "minimum": 1, "maximum": 100000, "default": 100, "description": "At most this many runs, the newest."},
    "before": {"type": "string", "description": "Only runs older than this run id (an answer's next_before)."},
    "state": {"type": "string", "enum": ["running", "exited", "unknown"]},
    "changed_since": {"type": "string", "description": "A cursor from an earlier answer. Give it alone."}
  },
  "additionalProperties": false
}`

var listOutput = `{"type": "object", "properties": {
  "runs": {"type": "array", "items": ` + runSchema + `},
  "total": {"type": "integer", "description": "Runs matching, in this answer or not."},
  "next_before": {"type": "string", "description": "More, older runs exist: pass this as before."},
  "cursor": {"type": "string", "description": "pass as changed_since to list the runs that started or ended after this answer"}
}, "required": ["runs", "total", "cursor"]}`

const killInput = `{
  "type": "object",
  "properties": {
    "name": {"type": "string"},
    "run_id": {"type": "string", "description": "Default: the newest run of name."},
    "signal": {"type": "string", "enum": ["TERM", "INT", "HUP", "QUIT", "KILL", "USR1", "USR2", "STOP", "CONT"], "default": "TERM"},
    "grace_ms": {"type": "integer", "minimum": 0, "maximum": 600000, "description": "If the group is still alive this long after the signal, send SIGKILL."}
  },
  "required": ["name"],
  "additionalProperties": false
}`

var killOutput = `{"type": "object", "properties": {
  "run": ` + runSchema + `,
  "signal": {"type": "string"},
  "signalled_groups": {"type": "array", "items": {"type": "integer"}, "description": "process group ids signalled"},
  "signalled_pids": {"type": "array", "items": {"type": "integer"}, "description": "processes of the run outside its group, signalled one by one"},
  "escalated": {"type": "boolean"},
  "already_exited": {"type": "boolean"},
  "message": {"type": "string"}
}, "required": ["run", "message"]}`

const tailInput = `{
  "type": "object",
  "properties": {
    "name": {"type": "string"},
    "run_id": {"type": "string", "description": "Default: the newest run of name."},
    "offset": {"type": "integer", "default": 0, "description": "Log byte offset to read from; negative: from the end. Pass end_offset to continue exactly."},
    "max_bytes": {"type": "integer", "minimum": 1, "maximum": 1048576, "default": 65536, "description": "Most log bytes to read (framed: whole frames, at least one)."},
    "encoding": {"type": "string", "enum": ["text", "base64"], "default": "text", "description": "base64: exact bytes, for binary output."},
    "raw": {"type": "boolean", "default": false, "description": "Framed runs: return the frames as stored."},
    "wait_ms": {"type": "integer", "minimum": 0, "maximum": 60000, "default": 0, "description": "If nothing complete is past offset and the log can grow, wait this long for output."},
    "tail_lines": {"type": "integer", "minimum": 1, "maximum": 10000, "description": "Return the last N lines instead of reading from offset."},
    "grep": {"type": "string", "maxLength": 4096, "description": "RE2: only matching lines, each with its byte offset, cut at 512 bytes (base64: whole). Scans up to 64 MiB a call for max_bytes of lines; skipped lists bytes left out; continue from end_offset."},
    "context": {"type": "integer", "minimum": 0, "maximum": 20, "default": 0, "description": "With grep: lines before and after each match."},
    "until": {"type": "string", "maxLength": 4096, "description": "RE2, with wait_ms: return once a new line (or an unfinished one: a prompt) matches."},
    "idle_ms": {"type": "integer", "minimum": 0, "maximum": 60000, "description": "With wait_ms: return once output was quiet this long after new bytes."},
    "clean": {"type": "boolean", "description": "Text without terminal escapes, \\r redraws collapsed (not base64/raw). Default: on for pty runs."}
  },
  "required": ["name"],
  "additionalProperties": false
}`

const tailOutputSchema = `{"type": "object", "properties": {
  "name": {"type": "string"},
  "run_id": {"type": "string"},
  "content": {"type": "string", "description": "Text of the window (framed runs: stdout and stderr interleaved); base64 when encoding is base64."},
  "encoding": {"type": "string"},
  "lossy": {"type": "boolean", "description": "Invalid UTF-8 was replaced; use encoding base64 for exact bytes."},
  "stdout": {"type": "string"},
  "stderr": {"type": "string"},
  "chunks": {"type": "array", "items": {"type": "object", "properties": {"stream": {"type": "string"}, "text": {"type": "string"}}}},
  "matches": {"type": "array", "items": {"type": "object", "properties": {"offset": {"type": "integer"}, "stream": {"type": "string"}, "line": {"type": "string"}, "context": {"type": "boolean", "description": "a line around a match"}, "line_bytes": {"type": "integer", "description": "line was cut: its length in the log (part: the part's)"}, "continues": {"type": "boolean", "description": "context after a match before offset, not in this answer"}, "part": {"type": "boolean", "description": "the line is longer than a window: this is a part of it, from offset"}}}},
  "skipped": {"type": "array", "items": {"type": "object", "properties": {"from": {"type": "integer"}, "bytes": {"type": "integer"}}}, "description": "Log bytes left out of this answer, and the offset to fetch each range from."},
  "skipped_bytes": {"type": "integer"},
  "offset": {"type": "integer"},
  "end_offset": {"type": "integer"},
  "truncated": {"type": "boolean", "description": "More bytes exist past end_offset now."},
  "eof": {"type": "boolean", "description": "No byte will ever be written past end_offset: the output is closed (the run finished) or nothing is left to write the log (its supervisor is gone); stop following."},
  "state": {"type": "string"},
  "reason": {"type": "string"},
  "exit_code": {"type": "integer", "description": "absent unless the run exited normally"},
  "signal": {"type": "string"},
  "log_bytes": {"type": "integer"},
  "log_dropped": {"type": "integer"},
  "log_capped": {"type": "boolean"},
  "log_error": {"type": "string"},
  "matched": {"type": "boolean", "description": "given until: whether a line matched it"},
  "cleaned_bytes": {"type": "integer", "description": "clean: bytes of escapes and redrawn text left out"}
}, "required": ["content", "offset", "end_offset", "truncated", "eof", "state", "log_bytes"]}`

const waitInput = `{
  "type": "object",
  "properties": {
    "name": {"type": "string"},
    "names": {"type": "array", "items": {"type": "string"}, "maxItems": 64, "description": "Instead of name: return when the first of these runs ends."},
    "run_id": {"type": "string"},
    "timeout_ms": {"type": "integer", "minimum": 0, "maximum": 600000, "default": 30000, "description": "Without a progress token at most 50000."},
    "since_offset": {"type": "integer", "minimum": 0, "description": "Log offset read to: the tail starts no earlier."},
    "survivors": {"type": "boolean", "default": false, "description": "Also wait for processes that outlive the leader."},
    "clean": {"type": "boolean", "description": "The tail without terminal escapes, \\r redraws collapsed."}
  },
  "additionalProperties": false
}`

var waitOutput = `{"type": "object", "properties": {
  "run": ` + runSchema + `,
  "others": {"type": "array", "items": ` + runSchema + `, "description": "with names: the other runs, still going"},
  "wait_timed_out": {"type": "boolean", "description": "this wait's bound passed with the run still going (the run's own timeout is run.timed_out)"},
  "wait_shortened": {"type": "boolean", "description": "timeout_ms was cut to the bound for calls without a progress token"},
  "duration_ms": {"type": "integer", "description": "Run time so far, or until the exit; absent when the run's end is unknown."},
  "output_tail": {"type": "string", "description": "The last lines of output (framed runs: stdout and stderr interleaved), at most 20 lines and 8 KiB, none before since_offset."},
  "stderr_tail": {"type": "string", "description": "Framed runs: the last lines of stderr alone."},
  "output_tail_offset": {"type": "integer", "description": "Where output_tail begins in the log (framed: the frame holding its first byte)."},
  "stderr_tail_offset": {"type": "integer", "description": "Framed runs: the frame holding stderr_tail's first byte."},
  "output_tail_whole": {"type": "boolean", "description": "output_tail is all of the output past since_offset: nothing was left out."},
  "output_tail_cut": {"type": "boolean", "description": "The tail's first line is longer than the bound: only its end is shown."},
  "cleaned_bytes": {"type": "integer", "description": "clean: bytes of escapes and redrawn text left out"},
  "hint": {"type": "string"}
}, "required": ["run", "wait_timed_out"]}`

const writeInput = `{
  "type": "object",
  "properties": {
    "name": {"type": "string"},
    "run_id": {"type": "string"},
    "data": {"type": "string", "maxLength": 1048576, "description": "Bytes for the run's stdin."},
    "encoding": {"type": "string", "enum": ["text", "base64"], "default": "text"},
    "close": {"type": "boolean", "default": false, "description": "Close stdin after writing (EOF for the child)."},
    "wait_ms": {"type": "integer", "minimum": 0, "maximum": 60000},
    "until": {"type": "string", "maxLength": 4096},
    "idle_ms": {"type": "integer", "minimum": 0, "maximum": 60000}
  },
  "required": ["name"],
  "additionalProperties": false
}`

var writeOutput = `{"type": "object", "properties": {
  "run": ` + runSchema + `,
  "written": {"type": "integer"},
  "closed": {"type": "boolean"},
  "output": {"type": "string", "description": "with wait_ms: the output that followed the write, as tail_log's text"},
  "offset": {"type": "integer"},
  "end_offset": {"type": "integer"},
  "matched": {"type": "boolean"},
  "truncated": {"type": "boolean", "description": "more output is past end_offset"}
}, "required": ["run", "written", "closed"]}`

const resizeInput = `{
  "type": "object",
  "properties": {
    "name": {"type": "string"},
    "run_id": {"type": "string"},
    "cols": {"type": "integer", "minimum": 10, "maximum": 1000},
    "rows": {"type": "integer", "minimum": 5, "maximum": 500}
  },
  "required": ["name", "cols", "rows"],
  "additionalProperties": false
}`

var resizeOutput = `{"type": "object", "properties": {"run": ` + runSchema + `}, "required": ["run"]}`

const removeInput = `{
  "type": "object",
  "properties": {
    "name": {"type": "string"},
    "run_id": {"type": "string"},
    "all_finished": {"type": "boolean", "default": false, "description": "Remove every finished run (of name, or of all names)."}
  },
  "additionalProperties": false
}`

var removeOutput = `{"type": "object", "properties": {
  "removed": {"type": "array", "items": ` + runSchema + `},
  "kept": {"type": "array", "items": ` + runSchema + `},
  "errors": {"type": "array", "items": {"type": "string"}}
}, "required": ["removed"]}`

// errorSchema is the structured content of a failed call (wire.Error).
const errorSchema = `{"type": "object", "properties": {"code": {"type": "string"}, "message": {"type": "string"}, "retryable": {"type": "boolean"}}, "required": ["code", "message", "retryable"]}`

// orError makes an output schema accept a failed call's structured
// content, {"error": {...}}, too: clients check structuredContent against
// the output schema even when isError is set (the TypeScript SDK's
// Client.callTool does), and would turn a tool's failure into a protocol
// error about the schema. What the schema required becomes one branch of
// an anyOf, {"required": ["error"]} the other.
func orError(out string) json.RawMessage {
	var schema map[string]any
	if err := json.Unmarshal(raw(out), &schema); err != nil {
		panic("tools: output schema: " + err.Error())
	}
	var e any
	_ = json.Unmarshal([]byte(errorSchema), &e)
	props, _ := schema["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
		schema["properties"] = props
	}
	props[wire.ErrorKey] = e
	if req, ok := schema["required"]; ok {
		delete(schema, "required")
		schema["anyOf"] = []any{map[string]any{"required": req}, map[string]any{"required": []string{wire.ErrorKey}}}
	}
	b, err := json.Marshal(schema)
	if err != nil {
		panic("tools: output schema: " + err.Error())
	}
	return b
}

func raw(s string) json.RawMessage {
	if !json.Valid([]byte(s)) {
		panic("tools: invalid schema JSON: " + s[:min(len(s), 80)])
	}
	return json.RawMessage(s)
}
