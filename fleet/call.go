package fleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agent-box/agent-box/session"
	"github.com/agent-box/agent-box/wire"
)

// call is one tools/call: its params as given (the _meta a box reads
// included) and its arguments, which the fleet reads and rewrites.
type call struct {
	raw  map[string]json.RawMessage
	tool string
	args map[string]json.RawMessage
}

func parseCall(params json.RawMessage) (call, error) {
	c := call{args: map[string]json.RawMessage{}}
	if err := json.Unmarshal(params, &c.raw); err != nil || c.raw == nil {
		return c, errors.New("tools/call params must be an object")
	}
	if err := json.Unmarshal(c.raw["name"], &c.tool); err != nil {
		return c, errors.New("tools/call needs the tool's name")
	}
	if a := c.raw["arguments"]; len(a) > 0 && string(a) != "null" {
		if err := json.Unmarshal(a, &c.args); err != nil || c.args == nil {
			return c, errors.New("arguments must be an object")
		}
	}
	return c, nil
}

// params are the call's params with its arguments as they are now.
func (c call) params() json.RawMessage {
	p := make(map[string]json.RawMessage, len(c.raw))
	for k, v := range c.raw {
		p[k] = v
	}
	p["arguments"], _ = json.Marshal(c.args)
	b, _ := json.Marshal(p)
	return b
}

// with is a copy of c whose arguments are args.
func (c call) with(args map[string]json.RawMessage) call {
	c.args = args
	return c
}

// cloneArgs is a copy of the arguments, to change for one box.
func (c call) cloneArgs() map[string]json.RawMessage {
	a := make(map[string]json.RawMessage, len(c.args))
	for k, v := range c.args {
		a[k] = v
	}
	return a
}

// str is the string argument key, if given.
func (c call) str(key string) (string, bool, error) {
	raw, ok := c.args[key]
	if !ok || string(raw) == "null" {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", true, fmt.Errorf("%s must be a string", key)
	}
	return s, true, nil
}

// take is str, and removes the argument: a box's tools take no box.
func (c call) take(key string) (string, bool, error) {
	s, ok, err := c.str(key)
	delete(c.args, key)
	return s, ok, err
}

// toolParams are the params of a call of tool with args.
func toolParams(tool string, args json.RawMessage) json.RawMessage {
	b, _ := json.Marshal(map[string]json.RawMessage{"name": mustString(tool), "arguments": args})
	return b
}

func mustString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// result is a tools/call result, its structured content kept as sent.
type result struct {
	Content    []content       `json:"content"`
	IsError    bool            `json:"isError,omitempty"`
	Structured json.RawMessage `json:"structuredContent,omitempty"`
}

type content struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// parseAnswer is a box's answer as a tool result; a protocol error or a
// failed call is an error.
func parseAnswer(ans session.Answer, err error) (result, error) {
	var r result
	switch {
	case err != nil:
		return r, err
	case ans.Error != nil:
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(ans.Error, &e)
		return r, fmt.Errorf("the box answered with an error: %s", e.Message)
	}
	if err := json.Unmarshal(ans.Result, &r); err != nil {
		return r, fmt.Errorf("the box's answer is not a tool result: %w", err)
	}
	return r, nil
}

func (r result) text() string {
	var b strings.Builder
	for _, c := range r.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

func (r result) failure() wire.Error {
	var sc struct {
		Error wire.Error `json:"error"`
	}
	_ = json.Unmarshal(r.Structured, &sc)
	return sc.Error
}

func (r result) code() wire.Code { return r.failure().Code }

func (r result) message() string {
	if m := r.failure().Message; m != "" {
		return m
	}
	return r.text()
}

func answer(r result) session.Answer {
	b, _ := json.Marshal(r)
	return session.Answer{Result: b}
}

// failure is a tool's failure as agent-box words one: the text the model
// reads, and the structured error a program branches on.
func failure(code wire.Code, msg string) session.Answer {
	return fail(code, msg, false)
}

func failureRetry(code wire.Code, msg string) session.Answer {
	return fail(code, msg, true)
}

func fail(code wire.Code, msg string, retryable bool) session.Answer {
	sc, _ := json.Marshal(map[string]wire.Error{wire.ErrorKey: {Code: code, Message: msg, Retryable: retryable}})
	return answer(result{Content: []content{{Type: "text", Text: msg}}, IsError: true, Structured: sc})
}

// prefixed is a box's result with its text saying the box.
func prefixed(r result, box string) result {
	for i := range r.Content {
		if r.Content[i].Type == "text" {
			r.Content[i].Text = "box " + box + ": " + r.Content[i].Text
			break
		}
	}
	if r.IsError {
		e := r.failure()
		if e.Message != "" {
			e.Message = "box " + box + ": " + e.Message
			r.Structured, _ = json.Marshal(map[string]wire.Error{wire.ErrorKey: e})
		}
	}
	return r
}

// decorate is a box's answer as the fleet gives it: the text says the
// box, and so does every run in the structured content; the names of
// runs still running are NAME@BOX, as process_wait takes them. It
// returns the run ids the answer holds.
func decorate(raw json.RawMessage, box string) (result, []string) {
	var r result
	if json.Unmarshal(raw, &r) != nil {
		return result{Content: []content{{Type: "text", Text: "box " + box + ": " + string(raw)}}}, nil
	}
	r = prefixed(r, box)
	if r.IsError || len(r.Structured) == 0 {
		return r, nil
	}
	var sc map[string]json.RawMessage
	if json.Unmarshal(r.Structured, &sc) != nil {
		return r, nil
	}
	ids := tagRuns(sc, box)
	r.Structured, _ = json.Marshal(sc)
	return r, ids
}

// tagRuns adds box to the runs of a structured answer: run, previous,
// runs, others, removed, kept, ends[].run, and beside tail_log's run_id;
// and NAME@BOX to running.
func tagRuns(sc map[string]json.RawMessage, box string) (ids []string) {
	tag := func(raw json.RawMessage) json.RawMessage {
		var run map[string]json.RawMessage
		if json.Unmarshal(raw, &run) != nil || run == nil {
			return raw
		}
		if id := str(run["run_id"]); id != "" {
			ids = append(ids, id)
		}
		run["box"] = mustString(box)
		b, _ := json.Marshal(run)
		return b
	}
	tagList := func(raw json.RawMessage, inner string) json.RawMessage {
		var list []json.RawMessage
		if json.Unmarshal(raw, &list) != nil {
			return raw
		}
		for i := range list {
			if inner == "" {
				list[i] = tag(list[i])
				continue
			}
			var o map[string]json.RawMessage
			if json.Unmarshal(list[i], &o) == nil && o[inner] != nil {
				o[inner] = tag(o[inner])
				list[i], _ = json.Marshal(o)
			}
		}
		b, _ := json.Marshal(list)
		return b
	}
	for _, k := range []string{"run", "previous"} {
		if sc[k] != nil {
			sc[k] = tag(sc[k])
		}
	}
	if sc["run_id"] != nil {
		sc["box"] = mustString(box) // tail_log: the run's name and id are its own fields
		if id := str(sc["run_id"]); id != "" {
			ids = append(ids, id)
		}
	}
	for _, k := range []string{"runs", "others", "removed", "kept"} {
		if sc[k] != nil {
			sc[k] = tagList(sc[k], "")
		}
	}
	if sc["ends"] != nil {
		sc["ends"] = tagList(sc["ends"], "run")
	}
	if sc["running"] != nil {
		var names []string
		if json.Unmarshal(sc["running"], &names) == nil {
			for i, n := range names {
				names[i] = n + "@" + box
			}
			sc["running"], _ = json.Marshal(names)
		}
	}
	return ids
}
