//go:build linux

package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
)

// A coloured progress bar redrawn with \r reads back as its last state by
// default, on pipes as on a terminal, and byte for byte with clean: false
// (the log keeps what was written); process_wait's tail cleans the same
// way.
func TestCleanCollapsesAProgressBar(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	script := `printf '\033[32mbuild\033[0m\n'; for i in 10 50 100; do printf '\r\033[K[%3d%%] compiling' $i; done; printf '\n\033]0;done\007ok\n'`
	written := "\x1b[32mbuild\x1b[0m\n\r\x1b[K[ 10%] compiling\r\x1b[K[ 50%] compiling\r\x1b[K[100%] compiling\n\x1b]0;done\x07ok\n"
	want := "build\n[100%] compiling\nok\n"
	s.OK("process_start", map[string]any{"name": "bar", "command": script})
	w := s.OK("process_wait", map[string]any{"name": "bar"})
	assert.Equal(t, want, w.Data["output_tail"])
	assert.EqualValues(t, len(written)-len(want), w.Data["cleaned_bytes"])
	assert.Contains(t, w.Text, "bytes of escapes and redrawn text left out")
	assert.Equal(t, written, s.OK("process_wait", map[string]any{"name": "bar", "clean": false}).Data["output_tail"])

	c := s.OK("tail_log", map[string]any{"name": "bar"})
	assert.Equal(t, want, c.Data["content"])
	assert.EqualValues(t, len(written)-len(want), c.Data["cleaned_bytes"])
	assert.Contains(t, c.Text, want)

	raw := s.OK("tail_log", map[string]any{"name": "bar", "offset": 0, "clean": false})
	assert.Equal(t, written, raw.Data["content"], "with clean: false, the text is what was written")
	assert.Nil(t, raw.Data["cleaned_bytes"])
	exact := s.OK("tail_log", map[string]any{"name": "bar", "offset": 0, "encoding": "base64"})
	assert.Equal(t, written, string(abtest.B64(t, abtest.Str(exact.Data["content"]))))

	bad := s.Call("tail_log", map[string]any{"name": "bar", "encoding": "base64", "clean": true})
	require.True(t, bad.IsError)
	assert.Contains(t, bad.Text, "clean makes text for reading")
}

// A pip-like download bar, redrawn with \r some fifty times on a pipe,
// reads as its last state in tail_log, process_wait and process_write:
// a tenth of its bytes.
func TestProgressBarReadsAsItsLastState(t *testing.T) {
	t.Parallel()
	s := connect(t, t.TempDir())
	script := `read go; echo 'Collecting numpy'; for i in $(seq 0 2 100); do bar=$(printf '%*s' $((i*40/100)) '' | tr ' ' '#'); ` +
		`printf '\r   %3d%% |%-40s| 7.2/7.2 MB 12.3 MB/s eta 0:00:01' $i "$bar"; done; echo; echo 'Installed numpy'`
	s.OK("process_start", map[string]any{"name": "pip", "command": script, "stdin": "pipe"})
	wr := s.OK("process_write", map[string]any{"name": "pip", "data": "go\n", "wait_ms": 20000, "until": "^Installed"})
	last := "   100% |" + strings.Repeat("#", 40) + "| 7.2/7.2 MB 12.3 MB/s eta 0:00:01\n"
	want := "Collecting numpy\n" + last + "Installed numpy\n"
	assert.Equal(t, want, wr.Data["output"], wr.Text)
	w := s.OK("process_wait", map[string]any{"name": "pip"})
	assert.Equal(t, want, w.Data["output_tail"], w.Text)
	c := s.OK("tail_log", map[string]any{"name": "pip"})
	assert.Equal(t, want, c.Data["content"], c.Text)
	raw := s.OK("tail_log", map[string]any{"name": "pip", "clean": false})
	rawText := abtest.Str(raw.Data["content"])
	assert.Greater(t, len(rawText), 4000, "the bar as written")
	assert.Less(t, len(want), 500)
	assert.Less(t, len(c.Text), 700, "the reply as a model reads it: %s", c.Text)
	t.Logf("progress bar: %d bytes written, %d clean; tail_log reply %d bytes", len(rawText), len(want), len(c.Text))
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
	raw := s.OK("tail_log", map[string]any{"name": "tty", "offset": 0, "clean": false})
	assert.Equal(t, "\x1b[31mred\x1b[0m\r\n", raw.Data["content"], "the terminal's bytes: ONLCR made the newline CRLF")
	exact := s.OK("tail_log", map[string]any{"name": "tty", "encoding": "base64"})
	assert.Equal(t, "\x1b[31mred\x1b[0m\r\n", string(abtest.B64(t, abtest.Str(exact.Data["content"]))))
}
