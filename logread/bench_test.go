package logread_test

import (
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/agent-box/agent-box/logframe"
	"github.com/agent-box/agent-box/logread"
)

// benchSize is the log the requirement names: 256 MiB drained in 1 MiB
// windows should run near the speed of reading it.
const benchSize = 256 << 20

// benchFile writes a log of about benchSize bytes, made by repeating block,
// and returns it open.
func benchFile(b *testing.B, block []byte) (*os.File, int64) {
	b.Helper()
	path := filepath.Join(b.TempDir(), "log")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	var size int64
	for size < benchSize {
		n, err := f.Write(block)
		if err != nil {
			b.Fatal(err)
		}
		size += int64(n)
	}
	// Flushed, so that the first sub-benchmark does not read while the
	// kernel writes the file back, which slowed its reads severalfold.
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	return f, size
}

// logLines is build-log-like output: ASCII lines with some non-ASCII
// text, the common case whose UTF-8 check runs at memory speed.
func logLines(rng *rand.Rand, n int) []byte {
	words := []string{"compiling", "ok", "src/pkg/file.go", "took", "12ms", "warning:", "unused", "variable", "=", "PASS"}
	other := []string{"→", "café", "über", "日本語", "🎉"}
	var b []byte
	for len(b) < n {
		b = append(b, "2026-12-02T14:42:18.123Z INFO "...)
		for range 3 + rng.IntN(12) {
			if rng.IntN(30) == 0 {
				b = append(b, other[rng.IntN(len(other))]...)
			} else {
				b = append(b, words[rng.IntN(len(words))]...)
			}
			b = append(b, ' ')
		}
		b[len(b)-1] = '\n'
	}
	return b
}

func combinedBlock() []byte { return logLines(rand.New(rand.NewPCG(1, 1)), 1<<20) }

// denseBlock is the worst case for the UTF-8 check: multi-byte characters
// every few bytes, where unicode/utf8.Valid is at its slowest (its ASCII
// fast path never applies; docs/architecture/performance.md, "drain").
func denseBlock() []byte { return randText(rand.New(rand.NewPCG(1, 1)), 1<<20) }

// framedBlock encodes writes the size of pipe reads, mostly stdout, cut
// anywhere, so characters are split across frames.
func framedBlock() []byte {
	rng := rand.New(rand.NewPCG(2, 2))
	text := logLines(rng, 6<<20)
	var log []byte
	for p := text; len(p) > 0; {
		n := min(len(p), 512+rng.IntN(64<<10))
		s := logframe.Stdout
		if rng.IntN(5) == 0 {
			s = logframe.Stderr
		}
		log = logframe.AppendFrames(log, s, p[:n])
		p = p[n:]
	}
	return log
}

func drainBench(b *testing.B, r io.ReaderAt, size int64, req logread.Request) {
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		req.Offset = 0
		for {
			w, err := logread.Read(r, size, req)
			if err != nil {
				b.Fatal(err)
			}
			if !w.Truncated {
				break
			}
			req.Offset = w.EndOffset
		}
	}
}

// BenchmarkReadAtBaseline is the speed to compare with: reading the same
// file in 1 MiB ReadAt calls into a fresh buffer each, as a window does.
func BenchmarkReadAtBaseline(b *testing.B) {
	f, size := benchFile(b, combinedBlock())
	b.SetBytes(size)
	for b.Loop() {
		for off := int64(0); off < size; off += logread.MaxWindow {
			buf := make([]byte, min(logread.MaxWindow, size-off))
			if _, err := f.ReadAt(buf, off); err != nil && err != io.EOF {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkReadCombined1MiB(b *testing.B) {
	f, size := benchFile(b, combinedBlock())
	b.Run("text", func(b *testing.B) {
		drainBench(b, f, size, logread.Request{MaxBytes: logread.MaxWindow})
	})
	b.Run("exact", func(b *testing.B) {
		drainBench(b, f, size, logread.Request{MaxBytes: logread.MaxWindow, Exact: true})
	})
	dense, dsize := benchFile(b, denseBlock())
	b.Run("text-dense-unicode", func(b *testing.B) {
		drainBench(b, dense, dsize, logread.Request{MaxBytes: logread.MaxWindow})
	})
}

func BenchmarkReadFramed1MiB(b *testing.B) {
	f, size := benchFile(b, framedBlock())
	b.Run("text", func(b *testing.B) {
		drainBench(b, f, size, logread.Request{MaxBytes: logread.MaxWindow, Framed: true})
	})
	b.Run("exact", func(b *testing.B) {
		drainBench(b, f, size, logread.Request{MaxBytes: logread.MaxWindow, Framed: true, Exact: true})
	})
	b.Run("raw", func(b *testing.B) {
		drainBench(b, f, size, logread.Request{MaxBytes: logread.MaxWindow, Framed: true, Raw: true})
	})
}

// BenchmarkTailLines measures tail_lines on the large log; SetBytes is the
// text returned, so MB/s says how fast an answer of that size comes back.
func BenchmarkTailLines(b *testing.B) {
	combined, csize := benchFile(b, combinedBlock())
	framed, fsize := benchFile(b, framedBlock())
	for _, bc := range []struct {
		name string
		r    io.ReaderAt
		size int64
		req  logread.Request
	}{
		{"combined/100", combined, csize, logread.Request{TailLines: 100, MaxBytes: logread.MaxWindow}},
		{"combined/10000", combined, csize, logread.Request{TailLines: logread.MaxTailLines, MaxBytes: logread.MaxWindow}},
		{"framed/100", framed, fsize, logread.Request{TailLines: 100, MaxBytes: logread.MaxWindow, Framed: true}},
		{"framed/10000", framed, fsize, logread.Request{TailLines: logread.MaxTailLines, MaxBytes: logread.MaxWindow, Framed: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			w, err := logread.Read(bc.r, bc.size, bc.req)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(w.Content)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := logread.Read(bc.r, bc.size, bc.req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGrepScan measures one grep request with no match over the large
// log at tail_log's default max_bytes: it scans the whole log (up to
// GrepScanLimit), so MB/s says how long a grep of a big log takes.
func BenchmarkGrepScan(b *testing.B) {
	combined, csize := benchFile(b, combinedBlock())
	framed, fsize := benchFile(b, framedBlock())
	re := regexp.MustCompile("FAIL|panic")
	for _, bc := range []struct {
		name string
		r    io.ReaderAt
		size int64
		req  logread.Request
	}{
		{"combined", combined, csize, logread.Request{MaxBytes: 64 << 10, Grep: re}},
		{"framed", framed, fsize, logread.Request{MaxBytes: 64 << 10, Grep: re, Framed: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(min(bc.size, logread.GrepScanLimit))
			b.ReportAllocs()
			for b.Loop() {
				w, err := logread.Read(bc.r, bc.size, bc.req)
				if err != nil || len(w.Matches) > 0 {
					b.Fatal(err, w.Matches)
				}
			}
		})
	}
}
