package runs

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agent-box/agent-box/logread"
)

// The count of a cleaned window is of the text shown: a framed window's
// chunks (its Content is made of them again) and a grep's lines.
func TestCleanWindowCountsWhatIsShown(t *testing.T) {
	t.Parallel()
	framed := logread.Window{
		Content: "[10%]x\r[20%]\n",
		Stdout:  "[10%]\r[20%]\n", Stderr: "x",
		Chunks: []logread.Chunk{{Stream: "stdout", Text: "[10%]"}, {Stream: "stderr", Text: "x"}, {Stream: "stdout", Text: "\r[20%]\n"}},
	}
	assert.Equal(t, 1, cleanWindow(&framed), "the \\r of the last chunk")
	assert.Equal(t, "[10%]x[20%]\n", framed.Content, "Content is the cleaned chunks")
	assert.Equal(t, "[20%]\n", framed.Stdout)

	grep := logread.Window{Matches: []logread.Match{{Line: "\x1b[31mFAIL\x1b[0m x"}, {Line: "ok"}}}
	assert.Equal(t, 9, cleanWindow(&grep))
	assert.Equal(t, "FAIL x", grep.Matches[0].Line)

	tail := Tail{Output: "a\rb\n", OutputChunks: []logread.Chunk{{Stream: "stdout", Text: "a"}, {Stream: "stdout", Text: "\rb\n"}}}
	assert.Equal(t, 1, tail.clean())
	assert.Equal(t, "ab\n", tail.Output)
}
