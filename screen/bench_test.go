package screen

import (
	"context"
	"strings"
	"testing"
)

func BenchmarkRenderLines(b *testing.B) {
	out := []byte(strings.Repeat("compiling package github.com/x/y/z ... ok 0.123s\r\n", 64<<10/50))
	b.SetBytes(int64(len(out)))
	for b.Loop() {
		Render(context.Background(), out, 120, 40)
	}
}
