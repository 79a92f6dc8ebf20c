package fleet

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/agent-box/agent-box/session"
	"github.com/agent-box/agent-box/wire"
)

// defaultLimit is process_list's limit when none is given (the box's).
const defaultLimit = 100

// maxTextRuns bounds the runs the merged text shows a line of, as a box
// bounds its own: a model reads the text whole, and the structured
// content has every run.
const maxTextRuns = 50

// boxList is one box's process_list answer: its runs kept as the box
// wrote them, each with the two fields the merge reads.
type boxList struct {
	Runs       []json.RawMessage `json:"runs"`
	Total      int               `json:"total"`
	NextBefore string            `json:"next_before"`
	Cursor     string            `json:"cursor"`
}

// listAnswer is a box's answer to process_list, read in one pass: the
// merge of many boxes is mostly reading their answers.
type listAnswer struct {
	Content    []content `json:"content"`
	IsError    bool      `json:"isError"`
	Structured boxList   `json:"structuredContent"`
}

// listed is one run of a merged list.
type listed struct {
	id, name, box string
	raw           json.RawMessage // as the box wrote it, box added
}

// age sorts runs newest last. A box lists a run without an id (a name it
// cannot read a run of) as newer than every run, so the merge does too.
func (r listed) age() string {
	if r.id == "" {
		return "\uffff" + r.name
	}
	return r.id
}

// mergedList is process_list's answer over every box.
type mergedList struct {
	Runs        []listed
	Total       int
	NextBefore  string
	Cursor      string
	Unreachable []away
}

// listAll is process_list over every box, merged: the newest runs of all
// boxes by run id (which sorts by start time), at most limit of them, so
// before pages through every box at once.
func (f *Fleet) listAll(ctx context.Context, c call) (session.Answer, error) {
	var since map[string]string
	s, changes, err := c.str("changed_since")
	if err != nil {
		return failure(wire.InvalidArgument, "invalid argument: "+err.Error()), nil
	}
	if changes {
		if since, err = decodeCursor(s); err != nil {
			return failure(wire.InvalidArgument, "invalid argument: "+err.Error()), nil
		}
	}
	limit := defaultLimit
	if raw, ok := c.args["limit"]; ok {
		_ = json.Unmarshal(raw, &limit) // a bad one is the boxes' to refuse
	}
	lists := make([]*boxList, len(f.boxes))
	texts := make([]string, len(f.boxes))
	failed := make([]string, len(f.boxes))
	absent := 0 // boxes with no run of the name asked for
	var refused *session.Answer
	var mu sync.Mutex
	f.each(ctx, f.all(), func(ctx context.Context, i int) {
		args := c.cloneArgs()
		if changes {
			if cur, ok := since[f.boxes[i].Name]; ok {
				args["changed_since"] = mustString(cur)
			} else {
				delete(args, "changed_since")
			}
		}
		ans, err := f.boxes[i].Caller.CallTool(ctx, c.with(args).params(), nil)
		var la listAnswer
		if err == nil && ans.Error == nil && json.Unmarshal(ans.Result, &la) == nil && !la.IsError {
			if la.Structured.Cursor == "" {
				failed[i] = "its answer to process_list has no cursor"
				return
			}
			var text strings.Builder
			for _, c := range la.Content {
				if c.Type == "text" {
					text.WriteString(c.Text)
				}
			}
			lists[i], texts[i] = &la.Structured, text.String()
			return
		}
		res, err := parseAnswer(ans, err)
		switch {
		case err != nil:
			failed[i] = f.reason(ctx, i, err)
		case res.IsError && res.code() == wire.InvalidArgument:
			mu.Lock()
			if refused == nil {
				a := answer(prefixed(res, f.boxes[i].Name))
				refused = &a
			}
			mu.Unlock()
		case res.IsError && res.code() == wire.NoSuchRun:
			// name is not on this box: it adds no run, but its cursor,
			// that the next changed_since starts there from now.
			mu.Lock()
			absent++
			mu.Unlock()
			var l boxList
			res, err := parseAnswer(f.boxes[i].Caller.CallTool(ctx, toolParams("process_list", json.RawMessage(`{"limit":1}`)), nil))
			switch {
			case err == nil && !res.IsError && json.Unmarshal(res.Structured, &l) == nil && l.Cursor != "":
				lists[i] = &boxList{Cursor: l.Cursor}
			case err != nil:
				failed[i] = "could not give its cursor: " + f.reason(ctx, i, err)
			default:
				failed[i] = "could not give its cursor: " + res.message()
			}
		case res.IsError:
			failed[i] = res.message()
		default:
			failed[i] = "its answer to process_list is not one"
		}
	})
	if ctx.Err() != nil {
		return session.Answer{}, ctx.Err()
	}
	if refused != nil {
		return *refused, nil
	}
	if absent == len(f.boxes) {
		// Every box said it has no run of name: so does the fleet.
		name, _, _ := c.str("name")
		return failure(wire.NoSuchRun, fmt.Sprintf("no such run: no run named %q on any box (process_list shows the runs there are)", name)), nil
	}
	var out mergedList
	cursors := map[string]string{}
	more := false
	for i, l := range lists {
		name := f.boxes[i].Name
		if l == nil {
			if failed[i] != "" {
				out.Unreachable = append(out.Unreachable, away{Box: name, Reason: failed[i]})
			}
			if cur, ok := since[name]; ok {
				cursors[name] = cur
			}
			continue
		}
		cursors[name] = l.Cursor
		out.Total += l.Total
		more = more || l.NextBefore != ""
		tag := []byte(`{"box":` + string(mustString(name)))
		var ids []string
		for _, raw := range l.Runs {
			var r struct {
				Name  string `json:"name"`
				RunID string `json:"run_id"`
			}
			if json.Unmarshal(raw, &r) != nil || len(raw) < 2 || raw[0] != '{' {
				continue // not a run: nothing to list
			}
			// The box added as the first field, without decoding the
			// run and encoding it again.
			rest := raw[1:]
			tagged := append([]byte{}, tag...)
			if len(bytes.TrimLeft(rest, " \t\r\n")) > 0 && bytes.TrimLeft(rest, " \t\r\n")[0] != '}' {
				tagged = append(tagged, ',')
			}
			tagged = append(tagged, rest...)
			out.Runs = append(out.Runs, listed{id: r.RunID, name: r.Name, box: name, raw: tagged})
			if r.RunID != "" {
				ids = append(ids, r.RunID)
			}
		}
		f.learn(i, ids)
	}
	slices.SortStableFunc(out.Runs, func(a, b listed) int { return cmp.Compare(b.age(), a.age()) })
	if !changes && len(out.Runs) > limit && limit > 0 {
		out.Runs, more = out.Runs[:limit], true
	}
	if more && !changes {
		// The oldest run listed with an id: a box pages its runs without
		// one (a name it cannot list) before every other, so before never
		// needs to name one.
		for i := len(out.Runs) - 1; i >= 0 && out.NextBefore == ""; i-- {
			out.NextBefore = out.Runs[i].id
		}
	}
	out.Cursor = encodeCursor(cursors)
	return rawAnswer(f.listText(out, texts, changes), out.structured()), nil
}

// structured is the merged list's structured content, written from the
// boxes' runs as they are.
func (out mergedList) structured() []byte {
	b := []byte(`{"runs":[`)
	for i, r := range out.Runs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, r.raw...)
	}
	b = append(b, `],"total":`...)
	b = strconv.AppendInt(b, int64(out.Total), 10)
	if out.NextBefore != "" {
		b = append(b, `,"next_before":`...)
		b = append(b, mustString(out.NextBefore)...)
	}
	b = append(b, `,"cursor":`...)
	b = append(b, mustString(out.Cursor)...)
	if len(out.Unreachable) > 0 {
		u, _ := json.Marshal(out.Unreachable)
		b = append(b, `,"unreachable":`...)
		b = append(b, u...)
	}
	return append(b, '}')
}

// rawAnswer is a tool's result of text and structured content already
// written as JSON.
func rawAnswer(text string, structured []byte) session.Answer {
	b := []byte(`{"content":[{"type":"text","text":`)
	b = append(b, mustString(text)...)
	b = append(b, `}],"structuredContent":`...)
	b = append(b, structured...)
	return session.Answer{Result: append(b, '}')}
}

func str(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// listText is the merged answer for the model: the boxes' own lines of
// the runs it holds, each run's name as NAME@BOX, then the boxes that did
// not answer, then the cursor.
func (f *Fleet) listText(out mergedList, texts []string, changes bool) string {
	// A box's text has one line a run, which starts "NAME run_id=ID "
	// (ID empty for a run it cannot read).
	type key struct{ box, name, id string }
	lines := map[key]string{}
	for i, t := range texts {
		for _, line := range strings.Split(t, "\n") {
			if name, rest, ok := strings.Cut(line, " run_id="); ok {
				id, _, _ := strings.Cut(rest, " ")
				lines[key{f.boxes[i].Name, name, id}] = line
			}
		}
	}
	var b strings.Builder
	switch {
	case len(out.Runs) == 0 && changes:
		b.WriteString("no run started or ended since that cursor on any box that answered")
	case len(out.Runs) == 0:
		b.WriteString("no runs on any box that answered")
	case out.NextBefore != "":
		fmt.Fprintf(&b, "%d of %d runs, the newest; older ones: process_list with before=%s", len(out.Runs), out.Total, out.NextBefore)
	case changes:
		fmt.Fprintf(&b, "%d run(s) started or ended since that cursor:", len(out.Runs))
	default:
		fmt.Fprintf(&b, "%d run(s):", len(out.Runs))
	}
	unshown, shown := 0, 0
	for _, r := range out.Runs {
		name, box := r.name, r.box
		line, ok := lines[key{box, name, r.id}]
		if !ok || shown == maxTextRuns {
			unshown++ // the box left it out of its text, or the text is full: structured content has it
			continue
		}
		shown++
		b.WriteString("\n" + name + "@" + box + strings.TrimPrefix(line, name))
	}
	if unshown > 0 {
		fmt.Fprintf(&b, "\n%d more in structured content", unshown)
	}
	for _, a := range out.Unreachable {
		fmt.Fprintf(&b, "\nunreachable: %s (%s)", a.Box, a.Reason)
	}
	b.WriteString("\ncursor=" + out.Cursor + " (process_list changed_since=cursor lists what starts or ends after this, on every box)")
	return b.String()
}
