package screen

import (
	"strings"
	"testing"
)

func BenchmarkRenderLines(b *testing.B) {
	out := []byte(strings.Repeat("compiling package github.com/x/y/z ... ok 0.123s\r\n", 64<<10/50))
	b.SetBytes(int64(len(out)))
	for b.Loop() {
		Render(out, 120, 40)
	}
}
