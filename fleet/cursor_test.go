package fleet

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCursorRoundTrips(t *testing.T) {
	for _, m := range []map[string]string{
		{},
		{"a": "c1.ABjunrp-PKAbe7-VEwAA"},
		{"dev": "c1.AB", "gpu.1": "c1.CD", "x_y-z": "c1.EF"},
		{"new": "c2:with,odd~chars and spaces", "old": "c1.AB"}, // a newer box's cursor
	} {
		s := encodeCursor(m)
		require.True(t, strings.HasPrefix(s, cursorPrefix), s)
		got, err := decodeCursor(s)
		require.NoError(t, err, s)
		assert.Equal(t, m, got, s)
	}
	// Plain box cursors are written as they are: the model copies it.
	assert.Equal(t, "f1.a:c1.AB,b:c1.CD", encodeCursor(map[string]string{"b": "c1.CD", "a": "c1.AB"}))
}

func TestCursorRefusesWhatIsNotOne(t *testing.T) {
	for _, s := range []string{"", "f1", "f1.a", "f1.a:", "f1.@:c1", "f1.a:c1,b", "f1.a:~!!", "f1.a:~", "f1.a:c1.X,a:c1.Y", "zz"} {
		_, err := decodeCursor(s)
		assert.ErrorContains(t, err, "not a cursor of process_list", "%q", s)
	}
	_, err := decodeCursor("c1.ABjunrp-PKAbe7-VEwAA")
	assert.ErrorContains(t, err, "give that box too")
}

func FuzzCursor(f *testing.F) {
	f.Add("f1.a:c1.AB,b:~YzI6eA")
	f.Add("c1.AB")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := decodeCursor(s)
		if err != nil {
			return
		}
		again, err := decodeCursor(encodeCursor(m))
		require.NoError(t, err)
		assert.Equal(t, m, again)
	})
}
