package fleet

import (
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// A fleet's cursor holds a cursor of each box's process_list, so one
// changed_since covers every box; it is opaque to the model, and needs
// no state in connect: a connect started anew reads it as well. A box
// that could not be asked keeps, in the next cursor, the cursor it had:
// what changed there while it was away is listed once it answers. A box
// the cursor does not know (added to the fleet since) lists its runs as
// if every one were new.
//
// Written "f1.NAME:CURSOR,NAME:CURSOR", names sorted: box names and
// agent-box's cursors ("c1." and base64url) hold neither ':' nor ',', and
// the model copies every byte of it at every call, so it is not wrapped
// in more encoding. A box cursor of another alphabet (a newer box's) is
// written as "~" and its base64url.
const cursorPrefix = "f1."

// plainCursor is the alphabet a box's cursor is written in as it is.
var plainCursor = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

func encodeCursor(m map[string]string) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names) // one state, one cursor
	var b strings.Builder
	b.WriteString(cursorPrefix)
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		cur := m[n]
		if !plainCursor.MatchString(cur) {
			cur = "~" + base64.RawURLEncoding.EncodeToString([]byte(cur))
		}
		b.WriteString(n + ":" + cur)
	}
	return b.String()
}

// errNotCursor is what a changed_since that is no cursor of ours gets.
const errNotCursor = "changed_since is not a cursor of process_list (pass the cursor field of an earlier answer unchanged)"

func decodeCursor(s string) (map[string]string, error) {
	rest, ok := strings.CutPrefix(s, cursorPrefix)
	if !ok {
		if strings.HasPrefix(s, "c") && strings.Contains(s, ".") {
			return nil, errors.New("changed_since is the cursor of one box's process_list: give that box too, or the cursor of a process_list without box")
		}
		return nil, errors.New(errNotCursor)
	}
	m := map[string]string{}
	if rest == "" {
		return m, nil
	}
	for _, entry := range strings.Split(rest, ",") {
		name, cur, ok := strings.Cut(entry, ":")
		if _, twice := m[name]; !ok || twice || CheckName(name) != nil || cur == "" {
			return nil, errors.New(errNotCursor)
		}
		if enc, ok := strings.CutPrefix(cur, "~"); ok {
			b, err := base64.RawURLEncoding.DecodeString(enc)
			if err != nil || len(b) == 0 {
				return nil, errors.New(errNotCursor)
			}
			cur = string(b)
		}
		m[name] = cur
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
