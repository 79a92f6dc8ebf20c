package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// drainLine is what the drained log is made of: printable ASCII, so the
// text encoding carries it unescaped apart from the newlines, as it would a
// build log.
const drainLine = "agent-box bench: a line of build output 0123456789 abcdefghijklmnopqrstuvwxyz"

// maxTailBytes is tail_log's largest max_bytes.
const maxTailBytes = 1 << 20

// benchDrain reads a finished log from start to end in 1 MiB tail_log
// calls, as an agent fetching a whole log would, in each encoding, against
// cat of the same (page-cached) file.
func (b *bench) benchDrain() []metric {
	n := b.cfg.drainBytes
	title := func(enc string) string {
		return fmt.Sprintf("tail_log drain of a %d MiB log, %s, 1 MiB calls", n>>20, enc)
	}
	fail := func(err error) []metric {
		return []metric{failed(title("base64"), err), failed(title("text"), err)}
	}
	c, err := b.connect(b.stateDir)
	if err != nil {
		return fail(err)
	}
	defer c.close()

	name := b.name("drain")
	if _, _, err := c.start(map[string]any{
		"name": name, "cwd": b.work, "max_log_bytes": 2 * n,
		// yes's stderr is dropped: were SIGPIPE ignored in the child (as
		// the supervisor once let it be), yes would report the broken
		// pipe into the log instead of dying of it quietly.
		"command": fmt.Sprintf("yes '%s' 2>/dev/null | head -c %d", drainLine, n),
	}); err != nil {
		return fail(err)
	}
	var w waitInfo
	if _, err := c.call("process_wait", map[string]any{"name": name, "timeout_ms": 600000}, &w); err != nil {
		return fail(err)
	}
	if err := w.exitedOK(); err != nil {
		return fail(err)
	}
	if w.Run.LogBytes != n {
		return fail(fmt.Errorf("log is %d bytes, want %d", w.Run.LogBytes, n))
	}

	var base []time.Duration
	for range 3 {
		d, err := catBaseline(w.Run.LogPath)
		if err != nil {
			return fail(fmt.Errorf("baseline: %w", err))
		}
		base = append(base, d)
	}
	baseRate := mibPerSec(n, median(base))

	var out []metric
	for _, enc := range []string{"base64", "text"} {
		m := metric{Name: title(enc), Unit: "MiB/s", Target: "≥ 0.3× baseline"}
		st, err := drain(c, name, enc, n)
		if err != nil {
			return append(out, failed(m.Name, err))
		}
		m.Value = mibPerSec(n, st.elapsed)
		m.Samples = st.calls
		m.setBaseline("cat log > /dev/null", baseRate)
		m.setMet(*m.Ratio >= 0.3)
		m.Note = fmt.Sprintf("%.2f s for %d calls, median call %.1f ms; %.2f MB of JSON read per call; server CPU %.2f s, bench client CPU %.2f s",
			st.elapsed.Seconds(), st.calls, ms(median(st.perCall)), float64(st.rx)/float64(st.calls)/1e6, st.serverCPU.Seconds(), st.clientCPU.Seconds())
		out = append(out, m)
	}
	if _, err := c.call("process_remove", map[string]any{"name": name}, nil); err != nil {
		return append(out, failed("drain cleanup", err))
	}
	return out
}

type drainStats struct {
	elapsed   time.Duration
	calls     int
	perCall   []time.Duration
	rx        int64 // reply bytes read
	serverCPU time.Duration
	clientCPU time.Duration
}

// drain reads the whole log of name and checks that the windows add up to
// exactly n bytes.
func drain(c *client, name, enc string, n int64) (drainStats, error) {
	var st drainStats
	cpu0, self0 := cpuOf(c.pid()), selfCPU()
	rx0 := c.Received()
	t0 := time.Now()
	var off int64
	for {
		var t tailInfo
		d, err := c.call("tail_log", map[string]any{"name": name, "offset": off, "max_bytes": maxTailBytes, "encoding": enc}, &t)
		if err != nil {
			return st, err
		}
		st.calls++
		st.perCall = append(st.perCall, d)
		got := int64(len(t.Content))
		if enc == "base64" {
			got = int64(len(t.Content))/4*3 - int64(len(t.Content)-len(strings.TrimRight(t.Content, "=")))
		}
		if t.Offset != off || t.EndOffset-t.Offset != got {
			return st, fmt.Errorf("window at %d: offset %d, end %d, but %d bytes of content", off, t.Offset, t.EndOffset, got)
		}
		off = t.EndOffset
		if t.EOF {
			break
		}
		if got == 0 {
			return st, fmt.Errorf("no progress at offset %d before eof", off)
		}
	}
	st.elapsed = time.Since(t0)
	st.serverCPU = cpuOf(c.pid()) - cpu0
	st.clientCPU = selfCPU() - self0
	st.rx = c.Received() - rx0
	if off != n {
		return st, fmt.Errorf("drained %d bytes, the log has %d", off, n)
	}
	return st, nil
}

// catBaseline times cat of path to /dev/null.
func catBaseline(path string) (time.Duration, error) {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return 0, err
	}
	defer null.Close()
	cmd := exec.Command("cat", path)
	cmd.Stdout = null
	t0 := time.Now()
	err = cmd.Run()
	return time.Since(t0), err
}

// selfCPU is the CPU time this process (the benchmark's client side) has
// used: decoding replies is part of what a client pays.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
