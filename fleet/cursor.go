package fleet

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
)

// A fleet's cursor holds a cursor of each box's process_list, so one
// changed_since covers every box; it is opaque to the model, and needs
// no state in connect: a connect started anew reads it as well. A box
// that could not be asked keeps, in the next cursor, the cursor it had:
// what changed there while it was away is listed once it answers. A box
// the cursor does not know (added to the fleet since) lists its runs as
// if every one were new.
const cursorPrefix = "f1."

func encodeCursor(m map[string]string) string {
	b, _ := json.Marshal(m) // keys sorted: one state, one cursor
	return cursorPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// errNotCursor is what a changed_since that is no cursor of ours gets.
const errNotCursor = "changed_since is not a cursor of process_list (pass the cursor field of an earlier answer unchanged)"

func decodeCursor(s string) (map[string]string, error) {
	rest, ok := strings.CutPrefix(s, cursorPrefix)
	if !ok {
		if strings.HasPrefix(s, "c") && strings.Contains(s, ".") {
			return nil, fmt.Errorf("changed_since is the cursor of one box's process_list: give that box too, or the cursor of a process_list without box")
		}
		return nil, fmt.Errorf("%s", errNotCursor)
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	var m map[string]string
	if err != nil || json.Unmarshal(b, &m) != nil || m == nil {
		return nil, fmt.Errorf("%s", errNotCursor)
	}
	return m, nil
}

// boxCursor turns a fleet's cursor given with box into that box's own.
func (c call) boxCursor(box string) error {
	s, ok, err := c.str("changed_since")
	if err != nil || !ok || !strings.HasPrefix(s, cursorPrefix) {
		return nil // the box's own cursor, or the box's to refuse
	}
	m, err := decodeCursor(s)
	if err != nil {
		return err
	}
	cur, ok := m[box]
	if !ok {
		return fmt.Errorf("that cursor was made before box %s was in the fleet: list it without changed_since", box)
	}
	c.args["changed_since"] = mustString(cur)
	return nil
}
