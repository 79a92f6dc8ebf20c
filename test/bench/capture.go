package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// captureChild is the writer of the capture scenarios and of their
// baseline: GNU head copies /dev/zero in 8 KiB writes (BUFSIZ), a typical
// stdio-buffered program writing as fast as it can.
func captureChild(n int64) []string {
	return []string{"head", "-c", strconv.FormatInt(n, 10), "/dev/zero"}
}

// memWatch samples the server's and the supervisor's memory and CPU while a
// run writes.
type memWatch struct {
	stop chan struct{}
	done chan struct{}

	mu        sync.Mutex
	serverRSS int64 // peak VmRSS seen
	supHWM    int64 // last VmHWM read while the supervisor lived
	supRSS    int64 // largest VmRSS seen (after process_start answered)
	supCPU    time.Duration
	samples   int
}

// sampleEvery is fine enough to see a transient RSS peak of the server;
// VmHWM catches the supervisor's anyway.
const sampleEvery = 10 * time.Millisecond

func watchMem(serverPID, supPID int) *memWatch {
	w := &memWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(sampleEvery)
		defer t.Stop()
		for {
			w.sample(serverPID, supPID)
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
		}
	}()
	return w
}

func (w *memWatch) sample(serverPID, supPID int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.samples++
	if m, err := readMem(serverPID); err == nil {
		w.serverRSS = max(w.serverRSS, m.RSS)
	}
	if m, err := readMem(supPID); err == nil {
		w.supHWM = max(w.supHWM, m.HWM)
		w.supRSS = max(w.supRSS, m.RSS)
		w.supCPU = cpuOf(supPID)
	}
}

func (w *memWatch) finish() {
	close(w.stop)
	<-w.done
}

// captureResult is one run of a capture scenario.
type captureResult struct {
	elapsed   time.Duration
	logBytes  int64
	serverCPU time.Duration // CPU the server used from start to the wait's reply
	supCPU    time.Duration
	supHWM    int64
	supRSS    int64
	serverRSS int64 // peak while the run wrote
}

// captureRun starts the child under agent-box, waits for it with
// process_wait, and checks that the whole output is in the log: the time
// runs from the process_start request to the process_wait reply, which
// comes only once the supervisor has drained the pipe (output_closed).
func (b *bench) captureRun(c *client, mode string, n int64) (captureResult, error) {
	name := b.name("cap-" + mode)
	quiesce()
	cpu0 := cpuOf(c.pid())
	t0 := time.Now()
	run, _, err := c.start(map[string]any{
		"name": name, "argv": captureChild(n), "capture_mode": mode, "cwd": b.work,
		// The default cap is 1 GiB; a framed log of 1 GiB of output is
		// about 1.4 GiB.
		"max_log_bytes": 4 * n,
	})
	if err != nil {
		return captureResult{}, err
	}
	rec, err := b.store.Read(run.Name, run.RunID)
	if err != nil {
		return captureResult{}, err
	}
	mw := watchMem(c.pid(), rec.SupervisorPID)
	var w waitInfo
	_, err = c.call("process_wait", map[string]any{"name": name, "timeout_ms": 600000}, &w)
	elapsed := time.Since(t0)
	mw.finish()
	if err != nil {
		return captureResult{}, err
	}
	if err := w.exitedOK(); err != nil {
		return captureResult{}, err
	}
	rec, err = b.store.Read(run.Name, run.RunID)
	if err != nil {
		return captureResult{}, err
	}
	fi, err := os.Stat(rec.LogPath)
	if err != nil {
		return captureResult{}, err
	}
	switch {
	case !rec.OutputClosed:
		return captureResult{}, errors.New("process_wait answered before the output was closed")
	case rec.LogDropped != 0 || rec.LogCapped || rec.LogError != "":
		return captureResult{}, fmt.Errorf("log incomplete: dropped %d, capped %v, error %q", rec.LogDropped, rec.LogCapped, rec.LogError)
	case fi.Size() != rec.LogBytes || w.Run.LogBytes != rec.LogBytes:
		return captureResult{}, fmt.Errorf("log is %d bytes, record says %d, process_wait %d", fi.Size(), rec.LogBytes, w.Run.LogBytes)
	case mode == "combined" && rec.LogBytes != n:
		return captureResult{}, fmt.Errorf("combined log is %d bytes, the child wrote %d", rec.LogBytes, n)
	case mode == "framed" && rec.LogBytes < n:
		return captureResult{}, fmt.Errorf("framed log is %d bytes, less than the %d the child wrote", rec.LogBytes, n)
	}
	res := captureResult{
		elapsed: elapsed, logBytes: rec.LogBytes, serverCPU: cpuOf(c.pid()) - cpu0,
		supCPU: mw.supCPU, supHWM: mw.supHWM, supRSS: mw.supRSS, serverRSS: mw.serverRSS,
	}
	// Free the disk and the page cache before the next run.
	if _, err := c.call("process_remove", map[string]any{"name": name, "run_id": run.RunID}, nil); err != nil {
		return res, err
	}
	return res, nil
}

// quiesce writes back the dirty pages of earlier runs before a measured
// one, so that no run pays for its predecessor's writeback: the framed run
// follows 1 GiB of combined output, and read far slower while that was
// still being written back (docs/architecture/performance.md, "How each
// figure is taken").
func quiesce() { unix.Sync() }

// captureBaseline runs the same child with its stdout on a file in the
// same filesystem as the state dir.
func (b *bench) captureBaseline(n int64) (time.Duration, error) {
	path := filepath.Join(b.files, "baseline-out")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	defer os.Remove(path)
	defer f.Close()
	argv := captureChild(n)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout = f
	quiesce()
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, err
	}
	d := time.Since(t0)
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if fi.Size() != n {
		return 0, fmt.Errorf("baseline wrote %d bytes, want %d", fi.Size(), n)
	}
	return d, nil
}

// benchCapture measures both capture modes against the baseline, and the
// memory of the server and of the supervisor while the runs write.
func (b *bench) benchCapture() []metric {
	n := b.cfg.captureBytes
	size := fmt.Sprintf("%d MiB", n>>20)
	if n >= 1<<30 {
		size = fmt.Sprintf("%d GiB", n>>30)
	}
	nameC := "capture combined, " + size + " to stdout"
	nameF := "capture framed, " + size + " to stdout"
	fail := func(err error) []metric {
		return []metric{failed(nameC, err), failed(nameF, err)}
	}

	c, err := b.connect(b.stateDir)
	if err != nil {
		return fail(err)
	}
	defer c.close()
	// One small run first, so that "before" is a server that has already
	// served a start and a wait, not one that has never allocated.
	if _, err := b.captureRun(c, "combined", 1<<20); err != nil {
		return fail(err)
	}
	before, err := readMem(c.pid())
	if err != nil {
		return fail(err)
	}
	base, runs, err := b.captureRounds(c, n)
	if err != nil {
		return fail(err)
	}
	after, err := readMem(c.pid())
	if err != nil {
		return fail(err)
	}
	out := []metric{
		captureRow(nameC, n, 0.8, base, runs["combined"]),
		captureRow(nameF, n, 0.5, base, runs["framed"]),
		serverRSSRow("server RSS growth while a run writes "+size, before, after, runs),
	}
	for _, x := range []struct{ name, mode string }{
		{"supervisor peak RSS (VmHWM), combined", "combined"},
		{"supervisor peak RSS (VmHWM), framed", "framed"},
	} {
		out = append(out, supervisorRow(x.name, runs[x.mode]))
	}
	return out
}

// captureRounds runs captureReps rounds of the baseline and of each capture
// mode, interleaved so that drift hits them alike.
func (b *bench) captureRounds(c *client, n int64) (base []time.Duration, runs map[string][]captureResult, err error) {
	runs = map[string][]captureResult{}
	for range b.cfg.captureReps {
		d, err := b.captureBaseline(n)
		if err != nil {
			return nil, nil, fmt.Errorf("baseline: %w", err)
		}
		base = append(base, d)
		for _, mode := range []string{"combined", "framed"} {
			r, err := b.captureRun(c, mode, n)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", mode, err)
			}
			runs[mode] = append(runs[mode], r)
		}
	}
	return base, runs, nil
}

// captureRow is the throughput row of one capture mode's runs rs of n
// bytes, against the baseline's durations base.
func captureRow(name string, n int64, target float64, base []time.Duration, rs []captureResult) metric {
	var ds, srv []time.Duration
	var logBytes int64
	for _, r := range rs {
		ds = append(ds, r.elapsed)
		srv = append(srv, r.serverCPU)
		logBytes = r.logBytes
	}
	d := median(ds)
	m := metric{Name: name, Unit: "MiB/s", Value: mibPerSec(n, d), Samples: len(rs),
		Target: fmt.Sprintf("≥ %.1f× baseline", target)}
	m.setBaseline("same child > file", mibPerSec(n, median(base)))
	m.setMet(*m.Ratio >= target)
	r := rs[len(rs)-1]
	m.Note = fmt.Sprintf("median %.2f s vs baseline %.2f s; log %d bytes (%.2f× output); last run: supervisor CPU %.2f s, server CPU %.2f s while waiting (median %.2f s)",
		d.Seconds(), median(base).Seconds(), logBytes, float64(logBytes)/float64(n), r.supCPU.Seconds(), r.serverCPU.Seconds(), median(srv).Seconds())
	return m
}

// serverRSSRow is how much the server's RSS grew from before the runs to
// its peak while they wrote or after them.
func serverRSSRow(name string, before, after memInfo, runs map[string][]captureResult) metric {
	var peak int64
	for _, rs := range runs {
		for _, r := range rs {
			peak = max(peak, r.serverRSS)
		}
	}
	m := metric{Name: name, Unit: "MiB", Value: mib(max(peak, after.RSS) - before.RSS), Target: "≤ 5 MiB (flat)"}
	m.setMet(m.Value <= 5)
	m.Note = fmt.Sprintf("VmRSS before %.1f MiB, peak %.1f MiB, after %.1f MiB; VmHWM after %.1f MiB (the process's lifetime peak)",
		mib(before.RSS), mib(peak), mib(after.RSS), mib(after.HWM))
	return m
}

// supervisorRow is the supervisors' largest peak RSS over runs rs.
func supervisorRow(name string, rs []captureResult) metric {
	var hwm, rss int64
	for _, r := range rs {
		hwm, rss = max(hwm, r.supHWM), max(rss, r.supRSS)
	}
	m := metric{Name: name, Unit: "MiB", Value: mib(hwm), Samples: len(rs), Target: "≤ 10 MiB"}
	m.setMet(m.Value <= 10)
	m.Note = fmt.Sprintf("largest VmHWM over the runs, from /proc/PID/status of supervisor_pid (record.json) while it lived; the peak includes start-up; largest VmRSS while writing %.1f MiB", mib(rss))
	return m
}
