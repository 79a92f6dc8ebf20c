//go:build linux

package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
)

// A coloured progress bar redrawn with \r reads back as its last state
// with clean, and byte for byte without it (the log keeps what was
// written); process_wait's tail cleans the same way.
func TestCleanCollapsesAProgressBar(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	script := `printf '\033[32mbuild\033[0m\n'; for i in 10 50 100; do printf '\r\033[K[%3d%%] compiling' $i; done; printf '\n\033]0;done\007ok\n'`
	written := "\x1b[32mbuild\x1b[0m\n\r\x1b[K[ 10%] compiling\r\x1b[K[ 50%] compiling\r\x1b[K[100%] compiling\n\x1b]0;done\x07ok\n"
	want := "build\n[100%] compiling\nok\n"
	s.OK("process_start", map[string]any{"name": "bar", "command": script})
	w := s.OK("process_wait", map[string]any{"name": "bar", "clean": true})
	assert.Equal(t, want, w.Data["output_tail"])
	assert.EqualValues(t, len(written)-len(want), w.Data["cleaned_bytes"])
	assert.Contains(t, w.Text, "bytes of escapes and redrawn text left out")

	c := s.OK("tail_log", map[string]any{"name": "bar", "clean": true})
	assert.Equal(t, want, c.Data["content"])
	assert.EqualValues(t, len(written)-len(want), c.Data["cleaned_bytes"])
	assert.Contains(t, c.Text, want)

	raw := s.OK("tail_log", map[string]any{"name": "bar"})
	assert.Equal(t, written, raw.Data["content"], "without clean, the text is what was written")
	assert.Nil(t, raw.Data["cleaned_bytes"])
	exact := s.OK("tail_log", map[string]any{"name": "bar", "encoding": "base64"})
	assert.Equal(t, written, string(abtest.B64(t, abtest.Str(exact.Data["content"]))))

	bad := s.Call("tail_log", map[string]any{"name": "bar", "encoding": "base64", "clean": true})
	require.True(t, bad.IsError)
	assert.Contains(t, bad.Text, "clean makes text for reading")
}

// A pty run's text is clean unless asked otherwise: a terminal's output
// is colours, redraws and CRLF; base64 is still the bytes as written.
func TestPtyTextIsCleanByDefault(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	s.OK("process_start", map[string]any{"name": "tty", "pty": true, "command": `printf '\033[31mred\033[0m\n'`})
	w := s.OK("process_wait", map[string]any{"name": "tty"})
	assert.Equal(t, "red\n", w.Data["output_tail"])
	assert.Equal(t, "red\n", s.OK("tail_log", map[string]any{"name": "tty"}).Data["content"])
	raw := s.OK("tail_log", map[string]any{"name": "tty", "clean": false})
	assert.Equal(t, "\x1b[31mred\x1b[0m\r\n", raw.Data["content"], "the terminal's bytes: ONLCR made the newline CRLF")
	exact := s.OK("tail_log", map[string]any{"name": "tty", "encoding": "base64"})
	assert.Equal(t, "\x1b[31mred\x1b[0m\r\n", string(abtest.B64(t, abtest.Str(exact.Data["content"]))))
}
