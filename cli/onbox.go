package cli

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/agent-box/agent-box/session"
)

// runOn reads a run's NAME. Over several boxes (package fleet), NAME@BOX
// is the run NAME on box BOX: every call of the command then goes to that
// box (process_start needs one; elsewhere it settles which of several
// boxes with a run of the name is meant). A run's name cannot hold an @,
// so NAME@BOX splits at its one @; over one box it is the box's to refuse.
func (c *cmd) runOn(name string) string {
	run, box, ok := strings.Cut(name, "@")
	if !ok || len(c.box.Boxes) == 0 || run == "" || box == "" {
		return name
	}
	c.box.Tools = session.Tools{Caller: onBox{c.box.Caller, box}, Box: box}
	return run
}

// onBox is a fleet whose every call names one of its boxes.
type onBox struct {
	fleet session.Caller
	box   string
}

func (o onBox) CallTool(ctx context.Context, params json.RawMessage, progress func(line []byte)) (session.Answer, error) {
	var p map[string]json.RawMessage
	args := map[string]json.RawMessage{}
	if err := json.Unmarshal(params, &p); err != nil || p == nil {
		return o.fleet.CallTool(ctx, params, progress) // the fleet's to refuse
	}
	if a := p["arguments"]; len(a) > 0 && string(a) != "null" {
		if err := json.Unmarshal(a, &args); err != nil || args == nil {
			return o.fleet.CallTool(ctx, params, progress)
		}
	}
	args["box"], _ = json.Marshal(o.box)
	var err error
	if p["arguments"], err = json.Marshal(args); err != nil {
		return session.Answer{}, err
	}
	if params, err = json.Marshal(p); err != nil {
		return session.Answer{}, err
	}
	return o.fleet.CallTool(ctx, params, progress)
}
