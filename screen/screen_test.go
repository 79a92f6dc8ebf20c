package screen

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRenderRedrawsReadAsTheLastState(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	// A top-like display: home, rows, erase to the end, three times;
	// each state shorter than the one before, so a collage would show.
	for i, load := range []string{"load 9.99 9.99 9.99", "load 5.00", "load 1"} {
		out.WriteString("\x1b[H\x1b[J")
		out.WriteString(load + "\r\n")
		out.WriteString("PID  CMD\r\n")
		for p := range 3 - i {
			out.WriteString(strings.Repeat("x", 30-p) + "\r\n")
		}
	}
	out.WriteString("\x1b[2;6H") // the cursor parked at row 2, col 6
	s := render(t, []byte(out.String()), 40, 10)
	assert.Equal(t, []string{"load 1", "PID  CMD", strings.Repeat("x", 30)}, s.Lines)
	assert.Equal(t, [4]int{40, 10, 2, 6}, [4]int{s.Cols, s.Rows, s.CursorRow, s.CursorCol})
}

func TestRenderCursorMovesAndProgress(t *testing.T) {
	t.Parallel()
	// \r progress, a cursor move up, an erase of the line, a query the
	// emulator answers (dropped, not blocking), wide characters.
	out := "step 1\r\nprogress 10%\rprogress 100%\r\n\x1b[6n" +
		"old line\x1b[1A\r\x1b[2Kstep 2 世界\x1b[1B\r\x1b[K"
	s := render(t, []byte(out), 20, 5)
	// "step 2" took the progress line's place; "old line" was erased.
	assert.Equal(t, []string{"step 1", "step 2 世界"}, s.Lines)
	assert.Equal(t, 3, s.CursorRow)
	assert.Equal(t, 1, s.CursorCol)
}

func TestRenderScrollsAndWraps(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	for i := range 8 {
		out.WriteString(strings.Repeat(string(rune('a'+i)), 3) + "\r\n")
	}
	out.WriteString("0123456789abc") // wraps at 10 columns
	s := render(t, []byte(out.String()), 10, 4)
	assert.Equal(t, []string{"ggg", "hhh", "0123456789", "abc"}, s.Lines)
	assert.Equal(t, [2]int{4, 4}, [2]int{s.CursorRow, s.CursorCol})
}

func TestRenderAlternateScreen(t *testing.T) {
	t.Parallel()
	s := render(t, []byte("shell$ less f\r\n\x1b[?1049h\x1b[Hpage one\r\n(END)"), 20, 5)
	assert.Equal(t, []string{"page one", "(END)"}, s.Lines, "the alternate screen is what shows")
	s = render(t, []byte("shell$ less f\r\n\x1b[?1049h\x1b[Hpage one\x1b[?1049lshell$ "), 20, 5)
	assert.Equal(t, "shell$ less f", s.Lines[0], "leaving it shows the main screen again")
}

func TestReset(t *testing.T) {
	t.Parallel()
	for out, want := range map[string]bool{
		"plain\r\nlines\r\n":                  false,
		"a\x1b[2Jb":                           true,
		"a\x1b[H\x1b[Jb":                      true,
		"a\x1b[1;1H\x1b[0Jb":                  true,
		"a\x1b[Hb":                            false, // home alone overwrites, clears nothing
		"a\x1b[?1049hb":                       true,
		"a\x1b[?1049hb\x1b[?1049lc":           false, // the main screen again, drawn before out
		"a\x1b[?1049hb\x1b[?1049l\x1b[2Jc":    true,
		"\x1bc":                               true,
		"a\x1b[2J\x1b[?1049hb\x1b[?1049l$ ls": false,
	} {
		assert.Equal(t, want, Reset([]byte(out)), "%q", out)
	}
}

// render is Render of out, which must not fail.
func render(t *testing.T, out []byte, cols, rows int) Screen {
	t.Helper()
	s, err := Render(context.Background(), out, cols, rows)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A render gives up once its ctx is done: a long replay on a large
// terminal must not hold a call past its cancel.
func TestRenderEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Render(ctx, bytes.Repeat([]byte("x\r\n"), 1<<12), 1000, 500)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Render of a cancelled ctx: %v, want context.Canceled", err)
	}
}
