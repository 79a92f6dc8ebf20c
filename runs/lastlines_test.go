package runs

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"

	"github.com/agent-box/agent-box/logread"
)

func TestLastLines(t *testing.T) {
	long := strings.Repeat("é", 10) // 20 bytes
	for _, tc := range []struct {
		name, in string
		n, max   int
		want     string
		cut      bool
	}{
		{"empty", "", 3, 100, "", false},
		{"fewer lines than n", "a\nb\n", 3, 100, "a\nb\n", false},
		{"last n lines", "a\nb\nc\nd\n", 2, 100, "c\nd\n", false},
		// As the child wrote it: no newline is added (issue 9: stderr
		// "lateerr" read "lateerr\n").
		{"unterminated last line", "a\nb", 1, 100, "b", false},
		{"only a newline", "\n", 1, 100, "\n", false},
		{"bytes bound whole lines", "aaaa\nbb\ncc\n", 3, 6, "bb\ncc\n", false},
		// The last line alone is over the bound: its end, from a
		// character boundary, not nothing.
		{"last line too long", "x\n" + long + "\n", 3, 7, "ééé\n", true},
		{"only line too long", long, 1, 8, "éééé", true},
	} {
		got, cut := lastLines(tc.in, tc.n, tc.max)
		assert.Equal(t, tc.want, got, tc.name)
		assert.Equal(t, tc.cut, cut, tc.name)
		assert.True(t, utf8.ValidString(got), tc.name)
		assert.LessOrEqual(t, len(got), tc.max+1, "%s: bounded (plus the newline)", tc.name)
	}
}

// The tail of a framed run's output keeps which stream wrote each part:
// the last chunks, the first of them cut to where the tail begins.
func TestLastChunks(t *testing.T) {
	chunks := []logread.Chunk{{Stream: "stdout", Text: "a\nb\n"}, {Stream: "stderr", Text: "c\n"}, {Stream: "stdout", Text: "d\n"}}
	assert.Equal(t, []logread.Chunk{{Stream: "stdout", Text: "b\n"}, {Stream: "stderr", Text: "c\n"}, {Stream: "stdout", Text: "d\n"}}, lastChunks(chunks, 6))
	assert.Equal(t, []logread.Chunk{{Stream: "stdout", Text: "d\n"}}, lastChunks(chunks, 2))
	assert.Equal(t, chunks, lastChunks(chunks, 8))
	assert.Empty(t, lastChunks(chunks, 0))
}
