//go:build linux

package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/internal/abtest"
)

// process_wait's output tail is bounded, never empty when there was
// output, and says where it begins in the log: a tail of long lines (over
// the 8 KiB bound) shows the end of the last one, flagged as cut; a tail
// of short lines is exactly the log from output_tail_offset on.
func TestWaitOutputTailSaysWhereItBegins(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"combined", "framed"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			s := connect(t, t.TempDir())

			// Three 9000-byte lines, the last of z's.
			s.OK("process_start", map[string]any{"name": "long", "capture_mode": mode,
				"command": `for c in x y z; do head -c 9000 /dev/zero | tr '\0' $c; echo; done`})
			w := s.OK("process_wait", map[string]any{"name": "long", "timeout_ms": 60000})
			tail := abtest.Str(w.Data["output_tail"])
			require.NotEmpty(t, tail, w.Text)
			assert.LessOrEqual(t, len(tail), 8<<10+1)
			assert.True(t, tail == strings.Repeat("z", len(tail)-1)+"\n", "not the end of the last line: %.100q", tail)
			assert.Equal(t, true, w.Data["output_tail_cut"])
			assert.Contains(t, w.Text, "the first line cut")
			assert.Equal(t, false, w.Data["output_tail_whole"])
			if mode == "combined" {
				assert.Equal(t, int64(3*9001-len(tail)), abtest.Num(w.Data["output_tail_offset"]), "where the shown end of the last line begins")
			} else {
				// The frame holding the tail's first byte: how the output
				// was cut into frames decides which, so read from it.
				r := s.OK("tail_log", map[string]any{"name": "long", "offset": abtest.Num(w.Data["output_tail_offset"]), "max_bytes": 1 << 20})
				assert.True(t, strings.HasSuffix(abtest.Chunks(r.Data, "stdout"), tail), "tail_log from output_tail_offset does not hold the tail")
			}

			// 100 short lines: the tail is the last 20, and the log from
			// output_tail_offset on holds them.
			s.OK("process_start", map[string]any{"name": "short", "capture_mode": mode,
				"command": `i=0; while [ $i -lt 100 ]; do echo line $i; i=$((i+1)); done`})
			w = s.OK("process_wait", map[string]any{"name": "short", "timeout_ms": 60000})
			tail = abtest.Str(w.Data["output_tail"])
			assert.True(t, strings.HasPrefix(tail, "line 80\n") && strings.HasSuffix(tail, "line 99\n"), "%q", tail)
			assert.Nil(t, w.Data["output_tail_cut"])
			from := abtest.Num(w.Data["output_tail_offset"])
			require.GreaterOrEqual(t, from, int64(0), "%.300s", w.Text)
			assert.Equal(t, false, w.Data["output_tail_whole"])
			assert.Contains(t, w.Text, "tail_log from offset 0 for the rest")
			all, stdout, _ := s.ReadAll("short", 1<<20, mode == "framed")
			if mode == "combined" {
				assert.Positive(t, from)
				assert.Equal(t, tail, string(all[from:]), "output_tail_offset is where the tail begins")
			} else {
				// A frame boundary at or before the tail: reading from it
				// returns the tail's lines.
				r := s.OK("tail_log", map[string]any{"name": "short", "offset": from, "max_bytes": 1 << 20})
				assert.True(t, strings.HasSuffix(abtest.Chunks(r.Data, "stdout"), tail), "from %d: %v", from, r.Data["chunks"])
				assert.True(t, strings.HasSuffix(string(stdout), tail))
			}

			// Output that fits whole: it starts at 0 and says it is whole.
			s.OK("process_start", map[string]any{"name": "tiny", "capture_mode": mode, "command": "echo hi"})
			w = s.OK("process_wait", map[string]any{"name": "tiny", "timeout_ms": 60000})
			assert.Equal(t, "hi\n", w.Data["output_tail"])
			assert.Equal(t, int64(0), abtest.Num(w.Data["output_tail_offset"]))
			assert.Equal(t, true, w.Data["output_tail_whole"])
			assert.NotContains(t, w.Text, "offset")
		})
	}
}
