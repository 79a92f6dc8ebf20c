package logread_test

import (
	"bytes"
	"regexp"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/logframe"
	"github.com/agent-box/agent-box/logread"
)

// lines fills p with the log at off of lines of n bytes, made up as it is
// read.
func lines(off int64, p []byte, n int64) {
	for i := range p {
		o := off + int64(i)
		if o%n == n-1 {
			p[i] = '\n'
		} else {
			p[i] = 'a' + byte(o%26)
		}
	}
}

// A grep request stops after GrepScanLimit bytes: it is then truncated,
// and says what it scanned. It reads one window at a time.
func TestGrepScanLimit(t *testing.T) {
	size := int64(2 * logread.GrepScanLimit)
	c := &countingReader{r: readerFunc(func(p []byte, off int64) (int, error) {
		lines(off, p, 4096) // whole lines in every 1 MiB window
		return len(p), nil
	})}
	w, err := logread.Read(c, size, logread.Request{MaxBytes: logread.MaxWindow, Grep: regexp.MustCompile("FAIL")})
	require.NoError(t, err)
	assert.Equal(t, int64(logread.GrepScanLimit), w.EndOffset)
	assert.True(t, w.Truncated)
	assert.Empty(t, w.Matches)
	assert.Equal(t, []logread.Gap{{0, logread.GrepScanLimit}}, w.Skipped)
	assert.Equal(t, int64(logread.GrepScanLimit), c.total)
	assert.LessOrEqual(t, c.max, logread.MaxWindow)
}

// A scan holds one window of log at a time: its reads are windows, and
// it does not allocate one per window.
func TestGrepScanReadsOneWindowAtATime(t *testing.T) {
	log := make([]byte, 8<<20)
	lines(0, log, 64)
	log = append(log, "FAIL\n"...)
	const window = 64 << 10
	c := &countingReader{r: bytes.NewReader(log)}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	w, err := logread.Read(c, int64(len(log)), logread.Request{MaxBytes: window, Grep: regexp.MustCompile("FAIL")})
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	assert.Equal(t, []logread.Match{{Offset: 8 << 20, Line: "FAIL"}}, w.Matches)
	assert.Equal(t, int64(len(log)), w.EndOffset)
	assert.LessOrEqual(t, c.max, window)
	if !raceEnabled {
		assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "a combined scan reuses its window's buffer")
	}

	var framed []byte
	for i := range 20_000 {
		framed = logframe.AppendFrames(framed, logframe.Stream(1+i%2), []byte("some output line\n"))
	}
	fl := flen("some output line\n")
	c = &countingReader{r: bytes.NewReader(framed)}
	w, err = logread.Read(c, int64(len(framed)), logread.Request{MaxBytes: 1000, Framed: true, Offset: 10 * fl, Grep: regexp.MustCompile("x")})
	require.NoError(t, err)
	assert.Equal(t, int64(len(framed)), w.EndOffset)
	assert.Equal(t, []logread.Gap{{10 * fl, int64(len(framed)) - 10*fl}}, w.Skipped)
	assert.LessOrEqual(t, c.max, 1000)
	rest := int64(len(framed)) - 10*fl
	assert.LessOrEqual(t, c.total, rest+rest/100, "each window reads its frames and the start of the next")
}
