package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// parkDelay is how long the benchmark waits after sending a tail_log with
// wait_ms before it makes the child write. There is no event that says the
// server is now blocked in its wait, so a sleep it is: long enough for the
// server to have read the log once, set up its watch and re-read (well
// under a millisecond each), short enough to keep the scenario quick.
const parkDelay = 20 * time.Millisecond

// benchFollow measures tail_log's follow mode: how long after the child
// writes a line the waiting tail_log call returns with it. The child
// echoes each line it reads from a fifo; the clock starts when the
// benchmark writes the line into the fifo and stops when the reply is read,
// so the figure includes the child's read and write (microseconds), the
// supervisor's copy into the log, the server's wake-up and its reply.
func (b *bench) benchFollow() []metric {
	const title = "tail_log wait_ms follow latency"
	fail := func(err error) []metric { return []metric{failed(title, err)} }
	fifo := filepath.Join(b.files, "follow.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		return fail(err)
	}
	defer os.Remove(fifo)

	c, err := b.connect(b.stateDir)
	if err != nil {
		return fail(err)
	}
	defer c.close()
	name := b.name("follow")
	if _, err := c.call("process_start", map[string]any{
		"name": name, "cwd": b.work,
		"command": `while IFS= read -r l; do printf '%s\n' "$l"; done < ` + shellQuote(fifo),
	}, nil); err != nil {
		return fail(err)
	}
	// Opening a fifo for writing blocks until the child opens it to read.
	opened := make(chan error, 1)
	var w *os.File
	go func() {
		var err error
		w, err = os.OpenFile(fifo, os.O_WRONLY, 0)
		opened <- err
	}()
	select {
	case err := <-opened:
		if err != nil {
			return fail(err)
		}
	case <-time.After(10 * time.Second):
		return fail(fmt.Errorf("the child never opened %s", fifo))
	}
	defer func() {
		if w != nil {
			w.Close()
		}
	}()

	var lat []time.Duration
	var off int64
	for i := -1; i < b.cfg.followN; i++ {
		id, err := c.sendTool("tail_log", map[string]any{"name": name, "offset": off, "wait_ms": 10000})
		if err != nil {
			return fail(err)
		}
		time.Sleep(parkDelay)
		line := fmt.Sprintf("line %d\n", i)
		t0 := time.Now()
		if _, err := w.WriteString(line); err != nil {
			return fail(err)
		}
		var t tailInfo
		if err := c.awaitTool("tail_log", id, &t); err != nil {
			return fail(err)
		}
		d := time.Since(t0)
		if t.EndOffset <= off {
			return fail(fmt.Errorf("tail_log returned no output after %s (offset %d)", d, off))
		}
		// The line may come in more than one window only if the
		// supervisor's copy splits it; then the rest is read next round.
		off = t.EndOffset
		if i >= 0 {
			lat = append(lat, d)
		}
	}
	w.Close()
	w = nil
	var wi waitInfo
	if _, err := c.call("process_wait", map[string]any{"name": name, "timeout_ms": 30000}, &wi); err != nil {
		return fail(err)
	}
	return latencyRows(title, lat, "from the child's write (fifo → echo) to the tail_log reply")
}

// benchWait measures process_wait's answer latency: the child is exec'd
// date, which prints the time in ns and exits at once; the latency is the
// reply's arrival minus that time (one clock, CLOCK_REALTIME, on one box).
func (b *bench) benchWait() []metric {
	const title = "process_wait latency after exit"
	fail := func(err error) []metric { return []metric{failed(title, err)} }
	c, err := b.connect(b.stateDir)
	if err != nil {
		return fail(err)
	}
	defer c.close()
	var lat []time.Duration
	for i := -1; i < b.cfg.waitN; i++ {
		name := b.name("wait")
		if _, err := c.call("process_start", map[string]any{
			"name": name, "cwd": b.work,
			// exec: date is the run's process itself, so the time it
			// prints is its last act before exit.
			"command": "sleep 0.3; exec date +%s%N",
		}, nil); err != nil {
			return fail(err)
		}
		var wi waitInfo
		_, err := c.call("process_wait", map[string]any{"name": name, "timeout_ms": 30000}, &wi)
		got := time.Now()
		if err != nil {
			return fail(err)
		}
		if err := wi.exitedOK(); err != nil {
			return fail(err)
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(wi.OutputTail), 10, 64)
		if err != nil {
			return fail(fmt.Errorf("output_tail %q is not the child's exit time: %v", wi.OutputTail, err))
		}
		if i >= 0 {
			lat = append(lat, got.Sub(time.Unix(0, ns)))
		}
	}
	return latencyRows(title, lat, "from the child's last write before exit to the process_wait reply")
}

func latencyRows(title string, lat []time.Duration, what string) []metric {
	p50 := metric{Name: title + ", p50", Unit: "ms", Value: ms(percentile(lat, 50)), Samples: len(lat), Note: what}
	p99 := metric{Name: title + ", p99", Unit: "ms", Value: ms(percentile(lat, 99)), Samples: len(lat),
		Note: fmt.Sprintf("min %.2f ms, max %.2f ms", ms(percentile(lat, 0)), ms(percentile(lat, 100)))}
	return []metric{p50, p99}
}

// shellQuote quotes s for /bin/sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
