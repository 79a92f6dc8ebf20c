package tools

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mark3labs/mcp-go/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/capture"
	"github.com/agent-box/agent-box/logread"
	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/runrecord"
	"github.com/agent-box/agent-box/runs"
	"github.com/agent-box/agent-box/wire"
)

var update = flag.Bool("update", false, "rewrite the generated schemas in schemas/")

// TestSchemasAreGenerated: schemas/ holds what the types give, for every
// tool Register adds and no other.
func TestSchemasAreGenerated(t *testing.T) {
	var want []string
	for _, tool := range slices.Sorted(maps.Keys(toolSchemas)) {
		in, out := toolSchemas[tool]()
		for kind, b := range map[string][]byte{"in": in, "out": out} {
			name := tool + "." + kind + ".json"
			want = append(want, name)
			path := filepath.Join("schemas", name)
			if *update {
				require.NoError(t, os.WriteFile(path, b, 0o644))
				continue
			}
			had, err := os.ReadFile(path)
			require.NoError(t, err, "run go test ./tools -run TestSchemasAreGenerated -update")
			assert.True(t, bytes.Equal(b, had), "%s differs from what the types give: run go test ./tools -run TestSchemasAreGenerated -update, and check the change", path)
		}
	}
	if *update {
		return // Register reads the schemas this build embeds
	}
	s := server.NewMCPServer("t", "0")
	(&Handlers{}).Register(s)
	require.Equal(t, slices.Sorted(maps.Keys(s.ListTools())), slices.Sorted(maps.Keys(toolSchemas)))
	ents, err := os.ReadDir("schemas")
	require.NoError(t, err)
	var have []string
	for _, e := range ents {
		have = append(have, e.Name())
	}
	assert.ElementsMatch(t, want, have, "schemas/ holds files of no tool")
}

// toolSchemas generate each tool's input and output schema from its types.
var toolSchemas = map[string]func() (in, out json.RawMessage){
	"process_start": func() (in, out json.RawMessage) {
		return startInput(), output[startReply]("run")
	},
	"process_restart": func() (in, out json.RawMessage) {
		return restartInput(), output[restartReply]("run", "previous")
	},
	"process_list":   func() (in, out json.RawMessage) { return listInput(), output[listReply]() },
	"process_kill":   func() (in, out json.RawMessage) { return killInput(), output[runs.KillResult]() },
	"tail_log":       func() (in, out json.RawMessage) { return tailInput(), output[TailOutput]() },
	"process_wait":   func() (in, out json.RawMessage) { return waitInput(), output[waitReply]() },
	"process_write":  func() (in, out json.RawMessage) { return writeInput(), output[writeReply]() },
	"process_resize": func() (in, out json.RawMessage) { return resizeInput(), output[resizeResult]() },
	"process_remove": func() (in, out json.RawMessage) { return removeInput(), output[runs.RemoveResult]() },
}

// props are the properties of an object schema, by name.
type props map[string]*jsonschema.Schema

// forType is the schema of T, every type single (oneType).
func forType[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](&jsonschema.ForOptions{TypeSchemas: typeSchemas})
	if err != nil {
		panic("tools: schema: " + err.Error())
	}
	oneType(s)
	return s
}

// typeSchemas are the schemas of types that say more than their Go kind.
var typeSchemas = map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[outcome.State](): {Type: "string", Enum: enum(outcome.Running, outcome.Exited, outcome.Unknown)},
}

// input is the input schema of a tool whose arguments decode into T: no
// other argument is allowed, required lists those that must be given, and
// bound sets what the tags cannot say.
func input[T any](required []string, bound func(p props)) json.RawMessage {
	s := forType[T]()
	s.Required = required
	if bound != nil {
		bound(s.Properties)
	}
	return marshal(s)
}

// output is the output schema of a tool whose result is a T, the error
// branch added (orError). What it requires are the fields of T that are
// never left out (no omitempty), or required when T's embedded pointers
// make that untrue.
// An answer may hold more than its schema says (a newer box's), so no
// object in it forbids other properties.
//
// Output schemas carry no prose: a model reads every tools/list, and what
// a result's fields mean is said where the model meets them, in the
// arguments' descriptions and the reply's text. A run (runs.Run), which
// most results hold and some more than once, is one definition each
// schema refers to: in full in process_list's, the place for every fact
// of a run; elsewhere its identity and state (runCore), the object being
// the same and open to the rest.
func output[T any](required ...string) json.RawMessage {
	s := forOutput[T]()
	if refersTo(s, runRef) {
		run := forOutput[runs.Run]()
		if reflect.TypeFor[T]() != reflect.TypeFor[listReply]() {
			maps.DeleteFunc(run.Properties, func(k string, _ *jsonschema.Schema) bool { return !slices.Contains(runCore, k) })
		}
		s.Defs = map[string]*jsonschema.Schema{"run": run}
	}
	if required != nil {
		s.Required = required
	}
	orError(s)
	return marshal(s)
}

// runCore are the properties of a run an output schema other than
// process_list's spells out.
var runCore = []string{"name", "run_id", "state", "reason", "pid", "exit_code", "signal", "timed_out", "oom_killed", "survivors", "log_bytes"}

// runRef is where an output schema's runs point to.
const runRef = "#/$defs/run"

// forOutput is the schema of T as an output schema holds it: no prose,
// no object closed, a run inside it a reference to the one definition.
func forOutput[T any]() *jsonschema.Schema {
	types := maps.Clone(typeSchemas)
	if reflect.TypeFor[T]() != reflect.TypeFor[runs.Run]() {
		types[reflect.TypeFor[runs.Run]()] = &jsonschema.Schema{Ref: runRef}
	}
	s, err := jsonschema.For[T](&jsonschema.ForOptions{TypeSchemas: types})
	if err != nil {
		panic("tools: schema: " + err.Error())
	}
	oneType(s)
	walk(s, func(s *jsonschema.Schema) {
		s.Description = ""
		if s.Type == "object" && s.Properties != nil {
			s.AdditionalProperties = nil
		}
		// A run's (runs.Run): fields whose values are a few words.
		if p := s.Properties["status_of"]; p != nil {
			p.Enum = enum(runs.StatusOfProgram, runs.StatusOfShell)
		}
		if u := s.Properties["usage"]; u != nil {
			u.Properties["from"].Enum = enum(runs.UsageFromCgroup, runs.UsageFromProc, runs.UsageAtExit)
		}
	})
	return s
}

// refersTo reports whether a schema under s refers to ref.
func refersTo(s *jsonschema.Schema, ref string) bool {
	found := false
	walk(s, func(s *jsonschema.Schema) { found = found || s.Ref == ref })
	return found
}

// oneType turns every ["null", T] that jsonschema-go gives pointers and
// slices into T: absent stands for no value.
func oneType(s *jsonschema.Schema) {
	walk(s, func(s *jsonschema.Schema) {
		if len(s.Types) == 2 && s.Types[0] == "null" {
			s.Type, s.Types = s.Types[1], nil
		}
	})
}

// walk calls f on s and every schema under it.
func walk(s *jsonschema.Schema, f func(*jsonschema.Schema)) {
	if s == nil {
		return
	}
	f(s)
	for _, p := range s.Properties {
		walk(p, f)
	}
	walk(s.Items, f)
	if a := s.AdditionalProperties; a != nil && a.Not == nil {
		walk(a, f)
	}
}

// orError makes an output schema accept a failed call's structured
// content, {"error": {...}}, too: clients check structuredContent against
// the output schema even when isError is set (the TypeScript SDK's
// Client.callTool does), and would turn a tool's failure into a protocol
// error about the schema. What the schema required becomes one branch of
// an anyOf, {"required": ["error"]} the other.
func orError(s *jsonschema.Schema) {
	e := forOutput[wire.Error]()
	s.Properties[wire.ErrorKey] = e
	s.AnyOf = []*jsonschema.Schema{{Required: s.Required}, {Required: []string{wire.ErrorKey}}}
	s.Required = nil
}

func marshal(s *jsonschema.Schema) json.RawMessage {
	b, err := json.Marshal(s)
	if err != nil {
		panic("tools: schema: " + err.Error())
	}
	return b
}

func enum[T any](vs ...T) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		out[i] = v
	}
	return out
}

func def(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("tools: schema default: " + err.Error())
	}
	return b
}

func fptr[T int | int64 | time.Duration](v T) *float64 { return new(float64(v)) }

func ms(d time.Duration) *float64 { return fptr(d.Milliseconds()) }

// within bounds an integer property to min..max.
func within(s *jsonschema.Schema, min, max *float64) { s.Minimum, s.Maximum = min, max }

// grepDescription says how grep cuts and bounds its answer: the constants
// of runs and logread.
var grepDescription = fmt.Sprintf("RE2: only matching lines, each with its byte offset, cut at %d bytes (base64: whole). "+
	"Scans up to %d MiB a call for max_bytes of lines; skipped lists bytes left out; continue from end_offset.",
	runs.GrepLineBytes, logread.GrepScanLimit>>20)

// awaitBounds are the bounds of wait_ms, until and idle_ms (tail_log and
// process_write).
func awaitBounds(p props) {
	within(p["wait_ms"], fptr(0), ms(runs.MaxWait))
	within(p["idle_ms"], fptr(0), ms(runs.MaxWait))
	p["until"].MaxLength = new(runs.MaxGrepBytes)
}

func startInput() json.RawMessage {
	return input[runs.StartRequest]([]string{"name"}, func(p props) {
		p["name"].Pattern = runrecord.NamePattern
		p["command"].MaxLength = new(runs.MaxCommandBytes)
		p["argv"].MaxItems = new(runs.MaxArgs)
		p["env"].MaxProperties = new(runs.MaxEnv)
		p["secret_env"].MaxProperties = new(runs.MaxSecrets)
		p["capture_mode"].Enum = enum(capture.Combined, capture.Framed)
		p["capture_mode"].Default = def(capture.Combined)
		p["stdin"].Enum, p["stdin"].Default = enum(runs.StdinNull, runs.StdinPipe), def(runs.StdinNull)
		p["cols"].Default, p["rows"].Default = def(runs.DefaultCols), def(runs.DefaultRows)
		within(p["timeout_s"], fptr(0), fptr(runs.MaxTimeoutS))
		within(p["nice"], fptr(0), fptr(runs.MaxNice))
		within(p["max_log_bytes"], fptr(0), fptr(runs.MaxMaxLogBytes))
		l := p["limits"].Properties
		within(l["memory_mb"], fptr(runs.MinMemoryMB), fptr(runs.MaxMemoryMB))
		l["cpu_percent"].Minimum = fptr(1)
		within(l["pids"], fptr(1), fptr(runs.MaxPids))
		p["if_running"].Enum, p["if_running"].Default = enum(runs.IfRunningError, runs.IfRunningReuse), def(runs.IfRunningError)
		within(p["ready_timeout_s"], fptr(0), fptr(int64(runs.MaxReadyTimeout/time.Second)))
		p["ready_timeout_s"].Default = def(int64(runs.DefaultWaitPolicy.Default / time.Second))
		within(p["wait_ms"], fptr(0), ms(runs.MaxWaitTimeout))
		r := p["ready"].Properties
		r["log"].MaxLength = new(runs.MaxGrepBytes)
		r["http"].MaxLength = new(runs.MaxPathBytes)
		within(r["tcp_port"], fptr(1), fptr(runs.MaxPort))
	})
}

func restartInput() json.RawMessage {
	return input[restartArgs]([]string{"name"}, func(p props) {
		within(p["grace_ms"], fptr(0), ms(runs.MaxGrace))
		p["grace_ms"].Default = def(runs.DefaultRestartGrace.Milliseconds())
	})
}

func listInput() json.RawMessage {
	return input[listArgs](nil, func(p props) {
		within(p["limit"], fptr(1), fptr(runs.MaxListLimit))
		p["limit"].Default = def(runs.DefaultListLimit)
		p["state"].Enum = enum(outcome.Running, outcome.Exited, outcome.Unknown)
	})
}

func killInput() json.RawMessage {
	return input[killArgs]([]string{"name"}, func(p props) {
		p["signal"].Enum, p["signal"].Default = enum(runs.SignalNames...), def(runs.SignalNames[0])
		within(p["grace_ms"], fptr(0), ms(runs.MaxGrace))
	})
}

func tailInput() json.RawMessage {
	return input[tailArgs]([]string{"name"}, func(p props) {
		p["offset"].Default = def(0)
		within(p["max_bytes"], fptr(1), fptr(logread.MaxWindow))
		p["max_bytes"].Default = def(runs.DefaultTailBytes)
		p["encoding"].Enum, p["encoding"].Default = enum(encText, encBase64), def(encText)
		within(p["tail_lines"], fptr(1), fptr(logread.MaxTailLines))
		p["grep"].MaxLength, p["grep"].Description = new(runs.MaxGrepBytes), grepDescription
		within(p["context"], fptr(0), fptr(logread.MaxContext))
		awaitBounds(p)
	})
}

func waitInput() json.RawMessage {
	return input[waitArgs](nil, func(p props) {
		p["names"].MaxItems = new(runs.MaxWaitNames)
		within(p["timeout_ms"], fptr(0), ms(runs.MaxWaitTimeout))
		p["timeout_ms"].Default = def(runs.DefaultWaitPolicy.Default.Milliseconds())
		p["since_offset"].Minimum = fptr(0)
	})
}

func writeInput() json.RawMessage {
	return input[writeArgs]([]string{"name"}, func(p props) {
		p["data"].MaxLength = new(runs.MaxWriteBytes)
		p["encoding"].Enum, p["encoding"].Default = enum(encText, encBase64), def(encText)
		awaitBounds(p)
	})
}

func resizeInput() json.RawMessage {
	return input[resizeArgs]([]string{"name", "cols", "rows"}, func(p props) {
		within(p["cols"], fptr(runs.MinCols), fptr(runs.MaxCols))
		within(p["rows"], fptr(runs.MinRows), fptr(runs.MaxRows))
	})
}

func removeInput() json.RawMessage {
	return input[removeArgs](nil, nil)
}
