package logread

import "testing"

// newlinesBack decides which newlines of a frame's payload start the lines
// tail_lines returns: counted from the end, at most want.
func TestNewlinesBack(t *testing.T) {
	for _, tc := range []struct {
		p        string
		want     int
		k, start int
	}{
		{"", 3, 0, 0},
		{"no newline", 2, 0, 0},
		{"a\nb", 1, 1, 2},
		{"a\nb\nc", 1, 1, 4},
		{"a\nb\nc", 2, 2, 2},
		{"a\nb\nc", 5, 2, 2},
		{"\n", 1, 1, 1},
		{"\n\n", 2, 2, 1},
		{"ab\n", 0, 0, 0},
	} {
		k, start := newlinesBack([]byte(tc.p), tc.want)
		if k != tc.k || start != tc.start {
			t.Errorf("newlinesBack(%q, %d) = %d, %d; want %d, %d", tc.p, tc.want, k, start, tc.k, tc.start)
		}
	}
}
