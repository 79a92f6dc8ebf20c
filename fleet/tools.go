package fleet

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// marshal is json.Marshal without its HTML escapes: a box's descriptions
// say "->", which would cost the model six bytes each as \u003e.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// maxEnum is the most boxes whose names every tool's box lists as an
// enum. Beyond, the names are said once, in the instructions: ten tools
// each listing a hundred names would cost the model more than the tools.
const maxEnum = 20

// ToolList is a box's tools/list result as the fleet's: every tool takes
// box, process_start needs it, and the runs in answers say their box.
func (f *Fleet) ToolList(list json.RawMessage) (json.RawMessage, error) {
	var l map[string]json.RawMessage
	if err := json.Unmarshal(list, &l); err != nil {
		return nil, fmt.Errorf("tools/list: %w", err)
	}
	var tools []map[string]json.RawMessage
	if err := json.Unmarshal(l["tools"], &tools); err != nil {
		return nil, fmt.Errorf("tools/list: tools: %w", err)
	}
	for _, t := range tools {
		name := str(t["name"])
		in, err := f.input(name, t["inputSchema"])
		if err != nil {
			return nil, fmt.Errorf("tools/list: %s: %w", name, err)
		}
		t["inputSchema"] = in
		if out, ok := t["outputSchema"]; ok {
			t["outputSchema"] = output(name, out)
		}
	}
	l["tools"], _ = marshal(tools)
	return marshal(l)
}

// boxHelp says, per tool, what leaving box out does.
func boxHelp(tool string) string {
	switch tool {
	case "process_start":
		return ""
	case "process_list", "process_wait":
		return "Default: every box."
	}
	return "Default: found by name."
}

// input is a tool's input schema with box.
func (f *Fleet) input(tool string, raw json.RawMessage) (json.RawMessage, error) {
	var s map[string]json.RawMessage
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	var props map[string]json.RawMessage
	_ = json.Unmarshal(s["properties"], &props)
	if props == nil {
		props = map[string]json.RawMessage{}
	}
	box := map[string]any{"type": "string"}
	if len(f.boxes) <= maxEnum {
		box["enum"] = f.Names()
	}
	if h := boxHelp(tool); h != "" {
		box["description"] = h
	}
	props["box"], _ = marshal(box)
	if tool == "process_wait" {
		props["names"] = describe(props["names"], " NAME@BOX: a run on BOX.")
	}
	s["properties"], _ = marshal(props)
	if tool == "process_start" {
		var req []string
		_ = json.Unmarshal(s["required"], &req)
		s["required"], _ = marshal(append(req, "box"))
	}
	return marshal(s)
}

// describe adds more to a schema's description.
func describe(raw json.RawMessage, more string) json.RawMessage {
	var p map[string]json.RawMessage
	if json.Unmarshal(raw, &p) != nil || p == nil {
		return raw
	}
	p["description"] = mustString(str(p["description"]) + more)
	b, _ := marshal(p)
	return b
}

// output is a tool's output schema with the fleet's additions: a run's
// box, and process_list's unreachable boxes.
func output(tool string, raw json.RawMessage) json.RawMessage {
	var s map[string]json.RawMessage
	if json.Unmarshal(raw, &s) != nil {
		return raw
	}
	var defs map[string]map[string]json.RawMessage
	if json.Unmarshal(s["$defs"], &defs) == nil && defs["run"] != nil {
		var props map[string]json.RawMessage
		if json.Unmarshal(defs["run"]["properties"], &props) == nil && props != nil {
			props["box"] = json.RawMessage(`{"type":"string"}`)
			defs["run"]["properties"], _ = marshal(props)
			s["$defs"], _ = marshal(defs)
		}
	}
	if tool == "tail_log" {
		var props map[string]json.RawMessage
		if json.Unmarshal(s["properties"], &props) == nil && props != nil {
			props["box"] = json.RawMessage(`{"type":"string"}`)
			s["properties"], _ = marshal(props)
		}
	}
	if tool == "process_list" || tool == "process_wait" {
		var props map[string]json.RawMessage
		if json.Unmarshal(s["properties"], &props) == nil && props != nil {
			props["unreachable"] = json.RawMessage(`{"type":"array","items":{"type":"object","properties":{"box":{"type":"string"},"reason":{"type":"string"}}}}`)
			if tool == "process_wait" {
				props["unanswered"] = json.RawMessage(`{"type":"array","items":{"type":"string"}}`)
			}
			s["properties"], _ = marshal(props)
		}
	}
	b, err := marshal(s)
	if err != nil {
		return raw
	}
	return b
}

// Instructions are what the fleet adds to the box's instructions.
func (f *Fleet) Instructions() string {
	return " This server reaches several boxes: " + strings.Join(f.Names(), ", ") + ". " +
		"Every tool takes box; process_start needs it. A run is NAME@BOX (name it so, or give box). Without box, process_list and process_wait cover every box, " +
		"and the other tools find the one box with a run of that name."
}
