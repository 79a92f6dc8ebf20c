package cli

import (
	"testing"
)

func TestParseDetachKeys(t *testing.T) {
	for in, want := range map[string]string{
		"ctrl-p,ctrl-q": "\x10\x11",
		"ctrl-A,x":      "\x01x",
		"ctrl-@,ctrl-_": "\x00\x1f",
		"ctrl-\\":       "\x1c",
	} {
		got, err := parseDetachKeys(in)
		if err != nil || string(got) != want {
			t.Errorf("parseDetachKeys(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "ctrl-1", "ctrl-pq", "p,,q", "alt-x"} {
		if got, err := parseDetachKeys(in); err == nil {
			t.Errorf("parseDetachKeys(%q) = %q, want an error", in, got)
		}
	}
}

// What is typed is forwarded but for the detach sequence; a partial one
// is held until the next key shows it is not one, across reads.
func TestDetachKeysFilter(t *testing.T) {
	for _, tc := range []struct {
		reads    []string
		want     string
		detached bool
	}{
		{[]string{"abc"}, "abc", false},
		{[]string{"ab\x10\x11cd"}, "ab", true},
		{[]string{"ab\x10", "\x11"}, "ab", true},
		{[]string{"a\x10", "b"}, "a\x10b", false},
		{[]string{"\x10\x10\x11"}, "\x10", true},
		{[]string{"x\x10"}, "x", false}, // held, not yet known
	} {
		k := &detachKeys{seq: []byte("\x10\x11")}
		var got []byte
		detached := false
		for _, r := range tc.reads {
			out, d := k.filter([]byte(r))
			got = append(got, out...)
			if d {
				detached = true
				break
			}
		}
		if string(got) != tc.want || detached != tc.detached {
			t.Errorf("%q: forwarded %q detached %v; want %q %v", tc.reads, got, detached, tc.want, tc.detached)
		}
	}
}

// A sequence that repeats its own start is found however many of its
// first key come before it.
func TestDetachKeysFilterRepeatedStart(t *testing.T) {
	k := &detachKeys{seq: []byte("aab")}
	out, detached := k.filter([]byte("xaaab"))
	if string(out) != "xa" || !detached {
		t.Errorf("forwarded %q detached %v; want %q true", out, detached, "xa")
	}
}
