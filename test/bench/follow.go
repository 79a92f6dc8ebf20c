package main

import (
	"fmt"
	"os"
	"os/exec"
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
	e, err := b.startEcho(c, fifo)
	if err != nil {
		return fail(err)
	}
	defer e.close()
	var lat, base []time.Duration
	for i := -1; i < b.cfg.followN; i++ {
		d, err := e.follow(i)
		if err != nil {
			return fail(err)
		}
		db, err := e.watched(i)
		if err != nil {
			return fail(err)
		}
		if i >= 0 {
			lat, base = append(lat, d), append(base, db)
		}
	}
	if err := e.finish(); err != nil {
		return fail(err)
	}
	rows := latencyRows(title, lat, base, "the child's write reaching the log (inotify in the benchmark)", 1, 3)
	rows[0].Note = "from the child's write (fifo → echo) to the tail_log reply; rounds alternate with the baseline"
	return append(rows, b.followSoak(c)...)
}

// echoRun is the follow scenario's run: a child that echoes each line
// written to its fifo into its log, which the server follows with tail_log
// and the benchmark, for the baseline, with an inotify watch.
type echoRun struct {
	c     *client
	name  string
	w     *os.File // the fifo's writing end
	watch *fileWatch
	off   int64 // how far the log has been read
}

// startEcho starts the echo child on fifo, opens the fifo for writing and
// watches the run's log.
func (b *bench) startEcho(c *client, fifo string) (*echoRun, error) {
	e := &echoRun{c: c, name: b.name("follow")}
	if _, err := c.call("process_start", map[string]any{
		"name": e.name, "cwd": b.work,
		"command": `while IFS= read -r l; do printf '%s\n' "$l"; done < ` + shellQuote(fifo),
	}, nil); err != nil {
		return nil, err
	}
	w, err := openWriter(fifo, 10*time.Second)
	if err != nil {
		return nil, err
	}
	e.w = w
	logPath, err := b.logPath(c, e.name)
	if err == nil {
		// The baseline is the floor under any follow: the same write seen
		// by an inotify watch of the log, from this process, in the rounds
		// between.
		e.watch, err = newFileWatch(logPath)
	}
	if err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

// openWriter opens a fifo for writing, which blocks until a reader opens
// it, for at most limit.
func openWriter(fifo string, limit time.Duration) (*os.File, error) {
	type opened struct {
		f   *os.File
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		ch <- opened{f, err}
	}()
	select {
	case o := <-ch:
		return o.f, o.err
	case <-time.After(limit):
		return nil, fmt.Errorf("the child never opened %s", fifo)
	}
}

// follow times round i of the scenario: a tail_log with wait_ms parked on
// the log's end, then a line written to the child, until the reply.
func (e *echoRun) follow(i int) (time.Duration, error) {
	id, err := e.c.sendTool("tail_log", map[string]any{"name": e.name, "offset": e.off, "wait_ms": 10000})
	if err != nil {
		return 0, err
	}
	time.Sleep(parkDelay)
	t0 := time.Now()
	if _, err := fmt.Fprintf(e.w, "line %d\n", i); err != nil {
		return 0, err
	}
	var t tailInfo
	if err := e.c.awaitTool("tail_log", id, &t); err != nil {
		return 0, err
	}
	d := time.Since(t0)
	if t.EndOffset <= e.off {
		return 0, fmt.Errorf("tail_log returned no output after %s (offset %d)", d, e.off)
	}
	// The line may come in more than one window only if the supervisor's
	// copy splits it; then the rest is read next round.
	e.off = t.EndOffset
	return d, nil
}

// watched times round i of the baseline: a line written to the child,
// until the inotify watch sees the log grow.
func (e *echoRun) watched(i int) (time.Duration, error) {
	e.watch.drain()
	time.Sleep(parkDelay)
	t0 := time.Now()
	if _, err := fmt.Fprintf(e.w, "base %d\n", i); err != nil {
		return 0, err
	}
	size, err := e.watch.grown(e.off, 10*time.Second)
	if err != nil {
		return 0, err
	}
	d := time.Since(t0)
	e.off = size
	return d, nil
}

// finish closes the fifo, which ends the child, and waits for it.
func (e *echoRun) finish() error {
	e.w.Close()
	e.w = nil
	_, err := e.c.call("process_wait", map[string]any{"name": e.name, "timeout_ms": 30000}, nil)
	return err
}

// close lets go of the fifo and the watch.
func (e *echoRun) close() {
	if e.w != nil {
		e.w.Close()
	}
	if e.watch != nil {
		e.watch.close()
	}
}

// logPath is the log of the newest run of name.
func (b *bench) logPath(c *client, name string) (string, error) {
	var w waitInfo
	if _, err := c.call("process_wait", map[string]any{"name": name, "timeout_ms": 0}, &w); err != nil {
		return "", err
	}
	if w.Run.LogPath == "" {
		return "", fmt.Errorf("run %s has no log_path", name)
	}
	return w.Run.LogPath, nil
}

// followSoak makes soakN follow calls that each time out after 5 ms on a
// silent run, each making and letting go of a watch, and counts the
// server's open files and the inotify watches the kernel holds for it
// before and after: a leaked watch shows in the second, not the first.
func (b *bench) followSoak(c *client) []metric {
	const title = "open files of the server after the follow soak"
	const wtitle = "inotify watches of the server after the follow soak"
	const waitMS = 5
	fail := func(err error) []metric { return []metric{failed(title, err), failed(wtitle, err)} }
	name := b.name("soak")
	if _, err := c.call("process_start", map[string]any{"name": name, "cwd": b.work, "argv": []string{"sleep", "600"}}, nil); err != nil {
		return fail(err)
	}
	defer c.call("process_kill", map[string]any{"name": name, "signal": "KILL"}, nil)
	before, wbefore, err := openFiles(c.pid())
	if err != nil {
		return fail(err)
	}
	t0 := time.Now()
	for range b.cfg.soakN {
		var t tailInfo
		if _, err := c.call("tail_log", map[string]any{"name": name, "offset": 0, "wait_ms": waitMS}, &t); err != nil {
			return fail(err)
		}
	}
	per := time.Since(t0) / time.Duration(max(1, b.cfg.soakN))
	after, wafter, err := openFiles(c.pid())
	if err != nil {
		return fail(err)
	}
	m := metric{Name: title, Unit: "files", Value: float64(after), Samples: b.cfg.soakN, Target: "no more than before"}
	m.setBaseline("before the soak", float64(before))
	m.setMet(after <= before)
	m.Note = fmt.Sprintf("%d tail_log calls with wait_ms %d on a silent run, %.2f ms each", b.cfg.soakN, waitMS, ms(per))
	w := metric{Name: wtitle, Unit: "watches", Value: float64(wafter), Samples: b.cfg.soakN, Target: "no more than before"}
	w.setBaseline("before the soak", float64(wbefore))
	w.setMet(wafter <= wbefore)
	w.Note = "the \"inotify wd:\" lines of /proc/PID/fdinfo"
	return []metric{m, w}
}

// openFiles counts the open files of process pid and the inotify watches
// they hold.
func openFiles(pid int) (files, watches int, err error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, err
	}
	for _, e := range ents {
		info, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, e.Name()))
		if err != nil {
			continue // closed since the listing
		}
		watches += strings.Count(string(info), "inotify wd:")
	}
	return len(ents), watches, nil
}

// benchWait measures process_wait's answer latency: the child is exec'd
// date, which prints the time in ns and exits at once; the latency is the
// reply's arrival minus that time (one clock, CLOCK_REALTIME, on one box).
// The baseline, in the rounds between, is the same command as this
// process's own child: the time from its print to wait(2) returning.
func (b *bench) benchWait() []metric {
	const title = "process_wait latency after exit"
	const command = "sleep 0.1; exec date +%s%N"
	fail := func(err error) []metric { return []metric{failed(title, err)} }
	c, err := b.connect(b.stateDir)
	if err != nil {
		return fail(err)
	}
	defer c.close()
	var lat, base []time.Duration
	for i := -1; i < b.cfg.waitN; i++ {
		name := b.name("wait")
		if _, err := c.call("process_start", map[string]any{
			"name": name, "cwd": b.work,
			// exec: date is the run's process itself, so the time it
			// prints is its last act before exit.
			"command": command,
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
		d, err := sincePrinted(wi.OutputTail, got)
		if err != nil {
			return fail(err)
		}

		out, err := exec.Command("/bin/sh", "-c", command).Output()
		gotBase := time.Now()
		if err != nil {
			return fail(err)
		}
		db, err := sincePrinted(string(out), gotBase)
		if err != nil {
			return fail(err)
		}
		if i >= 0 {
			lat, base = append(lat, d), append(base, db)
		}
	}
	rows := latencyRows(title, lat, base, "the same command as the benchmark's own child, to wait(2)", 2, 0)
	rows[0].Note = "from the child's last write before exit to the process_wait reply; rounds alternate with the baseline"
	return rows
}

func sincePrinted(out string, at time.Time) (time.Duration, error) {
	ns, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("output %q is not the child's exit time: %w", out, err)
	}
	return at.Sub(time.Unix(0, ns)), nil
}

// latencyRows are the p50 and p99 of lat against those of base, each with
// its target in ms (0: none).
func latencyRows(title string, lat, base []time.Duration, baseName string, p50Target, p99Target float64) []metric {
	row := func(p float64, target float64) metric {
		m := metric{Name: fmt.Sprintf("%s, p%.0f", title, p), Unit: "ms", Value: ms(percentile(lat, p)), Samples: len(lat)}
		m.setBaseline(baseName, ms(percentile(base, p)))
		if target > 0 {
			m.Target = fmt.Sprintf("≤ %g ms", target)
			m.setMet(m.Value <= target)
		}
		return m
	}
	p50, p99 := row(50, p50Target), row(99, p99Target)
	p99.Note = fmt.Sprintf("min %.2f ms, max %.2f ms; baseline min %.2f ms, max %.2f ms",
		ms(percentile(lat, 0)), ms(percentile(lat, 100)), ms(percentile(base, 0)), ms(percentile(base, 100)))
	return []metric{p50, p99}
}

// shellQuote quotes s for /bin/sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
