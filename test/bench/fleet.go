package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/agent-box/agent-box/internal/rawmcp"
	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
)

// fleetWarmup is how many rounds of a fleet's listing go uncounted: the
// first calls meet boxes still dialling and servers not yet warm.
const fleetWarmup = 5

// fleetTargetBoxes is the fleet size issue 35's target is set for: "20
// boxes list in ≤ 4× the time of one".
const fleetTargetBoxes = 20

// benchFleet measures agent-box connect over many boxes, two ways:
//   - boxes on this machine: each an exec transport 'agent-box --state-dir
//     D_i', a state dir of its own holding cfg.fleetRuns exited runs;
//   - canned boxes (canned.go): each answers with what one of those boxes
//     said, at almost no cost, so that the figure is connect's own: its
//     fan-out, its reading of every box's answer and its merge. On real
//     boxes, each on a machine of its own, that is what the box count
//     adds; here the real boxes' servers share this machine's cores, and
//     their CPU is most of what the first measure shows.
//
// For each: process_list (default arguments: every box's runs, merged)
// through a connect of each of cfg.fleetSizes boxes, against the same call
// through a connect of one box (relayed unchanged), calls alternating
// between the two; and connect's CPU a call. Then the memory and open
// files of the largest fleet's connect (real boxes) after its calls,
// against the one box's, per box.
func (b *bench) benchFleet() []metric {
	fail := func(err error) []metric { return []metric{failed("fleet", err)} }
	if len(b.cfg.fleetSizes) == 0 {
		return nil
	}
	most := b.cfg.fleetSizes[len(b.cfg.fleetSizes)-1]
	dirs := make([]string, most)
	for i := range dirs {
		dirs[i] = filepath.Join(b.files, fmt.Sprintf("fleet-%03d", i))
	}
	t0 := time.Now()
	if err := b.seedFleet(dirs); err != nil {
		return fail(err)
	}
	seeded := time.Since(t0)
	canned := filepath.Join(b.files, "canned-box.json")
	if err := b.captureCanned(dirs[0], canned); err != nil {
		return fail(fmt.Errorf("capturing a box's answers for the canned boxes: %w", err))
	}
	return append(b.fleetOnMachine(dirs, seeded), b.fleetCanned(canned)...)
}

// boxTransports are connect's --exec transports, one a state dir.
func (b *bench) boxTransports(dirs []string) []string {
	var ts []string
	for _, d := range dirs {
		ts = append(ts, shellQuote(b.binary)+" --state-dir "+shellQuote(d))
	}
	return ts
}

// fleetOnMachine is the fleet scenario with boxes on this machine, over
// dirs.
func (b *bench) fleetOnMachine(dirs []string, seeded time.Duration) []metric {
	most := len(dirs)
	cache := filepath.Join(b.work, "cache")
	one, err := b.relayFleet(b.boxTransports(dirs[:1]), cache, nil)
	if err != nil {
		return []metric{failed("fleet", err)}
	}
	defer one.close()
	var rows []metric
	var oneState, mostState connectState
	for _, n := range b.cfg.fleetSizes {
		title := fmt.Sprintf("fleet: process_list over %d boxes on this machine, median", n)
		fleet, err := b.relayFleet(b.boxTransports(dirs[:n]), cache, nil)
		if err != nil {
			return append(rows, failed(title, err))
		}
		t, err := b.timeFleet(one, fleet, n, b.cfg.fleetCalls)
		fleet.close()
		if err != nil {
			return append(rows, failed(title, err))
		}
		m := t.metric(title)
		// No target: see the note, and the canned boxes' rows for the
		// issue's.
		cores := runtime.NumCPU()
		m.Note = fmt.Sprintf("no target: CPU-bound, %d box servers on %d cores (real boxes each have their own; the canned boxes' rows are connect's own cost). "+
			"CPU a call: connect %.2f ms, its boxes' servers %.2f ms in all, sum ÷ %d cores %.2f ms; "+
			"one box's connect %.2f ms, its server %.2f ms. "+
			"process_list with no arguments, %d exited runs a box; calls alternate with the baseline's. p90 %.2f ms (baseline %.2f ms)",
			n, cores,
			ms(t.cpu.connect), ms(t.cpu.boxes), cores, ms(t.cpu.connect+t.cpu.boxes)/float64(cores),
			ms(t.cpu.oneConnect), ms(t.cpu.oneBox),
			b.cfg.fleetRuns, ms(percentile(t.via, 90)), ms(percentile(t.base, 90)))
		if n == most {
			m.Note += fmt.Sprintf("; %d state dirs of %d exited runs started in %.1f s", most, b.cfg.fleetRuns, seeded.Seconds())
			mostState = t.facts
			if oneState, err = connectFacts(one.pid(), 0, 0); err != nil {
				return append(rows, failed(title, err))
			}
		}
		rows = append(rows, m)
	}
	return append(rows, fleetMemRows(most, oneState, mostState)...)
}

// fleetCanned is the fleet scenario with canned boxes answering from
// file: process_list through a connect of each of cfg.fleetSizes, against
// one canned box through connect, with issue 35's target; and connect's
// CPU a call.
func (b *bench) fleetCanned(file string) []metric {
	exe, err := os.Executable()
	if err != nil {
		return []metric{failed("fleet, canned boxes", err)}
	}
	transports := func(n int) []string {
		var ts []string
		for i := range n {
			ts = append(ts, fmt.Sprintf("%s %d", shellQuote(exe), i))
		}
		return ts
	}
	cache := filepath.Join(b.work, "cache-canned")
	env := []string{cannedEnv + "=" + file}
	one, err := b.relayFleet(transports(1), cache, env)
	if err != nil {
		return []metric{failed("fleet, canned boxes", err)}
	}
	defer one.close()
	var rows, cpuRows []metric
	for _, n := range b.cfg.fleetSizes {
		title := fmt.Sprintf("fleet: process_list over %d canned boxes (connect's own cost), median", n)
		cpuTitle := fmt.Sprintf("fleet: connect's CPU a process_list over %d canned boxes", n)
		fleet, err := b.relayFleet(transports(n), cache, env)
		if err != nil {
			return append(rows, failed(title, err))
		}
		t, err := b.timeFleet(one, fleet, n, b.cfg.fleetCannedCalls)
		fleet.close()
		if err != nil {
			return append(rows, failed(title, err))
		}
		m := t.metric(title)
		if n == fleetTargetBoxes {
			m.Target = "≤ 4× one box"
			m.setMet(m.Ratio != nil && *m.Ratio <= 4)
		}
		m.Note = fmt.Sprintf("each box answers a real box's process_list of %d exited runs (run ids its own) from memory; connect fans out, reads and merges. "+
			"CPU a call: connect %.2f ms, its canned boxes %.2f ms in all. p90 %.2f ms (baseline %.2f ms); calls alternate with the baseline's",
			b.cfg.fleetRuns, ms(t.cpu.connect), ms(t.cpu.boxes), ms(percentile(t.via, 90)), ms(percentile(t.base, 90)))
		rows = append(rows, m)
		c := metric{Name: cpuTitle, Unit: "ms", Value: ms(t.cpu.connect), Samples: len(t.via)}
		c.setBaseline("connect of one canned box", ms(t.cpu.oneConnect))
		c.Note = fmt.Sprintf("utime+stime of connect's process (/proc/PID/stat, 10 ms ticks) over %d calls, a call; %.3f ms a box past the first",
			len(t.via), (ms(t.cpu.connect)-ms(t.cpu.oneConnect))/float64(max(1, n-1)))
		cpuRows = append(cpuRows, c)
	}
	return append(rows, cpuRows...)
}

// fleetMemRows are connect's VmRSS and open files over most boxes, and
// what each box past the first adds, against a connect of one box.
func fleetMemRows(most int, one, fleet connectState) []metric {
	if most < 2 {
		return nil
	}
	rss := metric{Name: fmt.Sprintf("fleet: connect VmRSS over %d boxes", most), Unit: "MiB", Value: mib(fleet.mem.RSS)}
	rss.setBaseline("connect of one box", mib(one.mem.RSS))
	rss.Note = fmt.Sprintf("after their calls; VmHWM %.1f MiB (one box %.1f MiB)", mib(fleet.mem.HWM), mib(one.mem.HWM))
	perBox := metric{Name: fmt.Sprintf("fleet: connect VmRSS per box, (%d boxes − one) / %d", most, most-1), Unit: "KiB",
		Value: float64(fleet.mem.RSS-one.mem.RSS) / 1024 / float64(most-1)}
	files := metric{Name: fmt.Sprintf("fleet: open files of connect per box, (%d boxes − one) / %d", most, most-1), Unit: "files",
		Value: float64(fleet.files-one.files) / float64(most-1),
		Note:  fmt.Sprintf("%d files over %d boxes, %d for one box", fleet.files, most, one.files)}
	return []metric{rss, perBox, files}
}

// fleetTiming is process_list through a fleet's connect and through one
// box's, alternating: the times, the CPU a call, and the fleet's connect's
// memory and open files after the calls.
type fleetTiming struct {
	via, base []time.Duration
	cpu       fleetCPU // a call
	facts     connectState
}

func (t fleetTiming) metric(title string) metric {
	m := metric{Name: title, Unit: "ms", Value: ms(median(t.via)), Samples: len(t.via)}
	m.setBaseline("one box through connect", ms(median(t.base)))
	return m
}

// timeFleet times calls process_list through fleet, a connect of boxes
// boxes, against the same call through one, alternating, after
// fleetWarmup rounds.
func (b *bench) timeFleet(one, fleet *client, boxes, calls int) (fleetTiming, error) {
	wantFleet, wantOne := boxes*b.cfg.fleetRuns, b.cfg.fleetRuns
	var t fleetTiming
	var cpu0 fleetCPU
	var err error
	for i := -fleetWarmup; i < calls; i++ {
		if i == 0 {
			if cpu0, err = cpuOfFleet(fleet.pid(), one.pid()); err != nil {
				return t, err
			}
		}
		db, err := listFleet(one, wantOne, 1)
		if err != nil {
			return t, fmt.Errorf("connect of one box: %w", err)
		}
		d, err := listFleet(fleet, wantFleet, boxes)
		if err != nil {
			return t, fmt.Errorf("connect of %d boxes: %w", boxes, err)
		}
		if i >= 0 {
			t.via, t.base = append(t.via, d), append(t.base, db)
		}
	}
	cpu1, err := cpuOfFleet(fleet.pid(), one.pid())
	if err != nil {
		return t, err
	}
	if t.facts, err = connectFacts(fleet.pid(), 0, 0); err != nil {
		return t, err
	}
	n := time.Duration(max(1, len(t.via)))
	t.cpu = fleetCPU{connect: (cpu1.connect - cpu0.connect) / n, boxes: (cpu1.boxes - cpu0.boxes) / n,
		oneConnect: (cpu1.oneConnect - cpu0.oneConnect) / n, oneBox: (cpu1.oneBox - cpu0.oneBox) / n}
	return t, nil
}

// fleetCPU is the CPU used so far by a fleet's connect and by its boxes'
// servers (its children), and by the one box's connect and server.
type fleetCPU struct {
	connect, boxes, oneConnect, oneBox time.Duration
}

func cpuOfFleet(fleet, one int) (fleetCPU, error) {
	children := func(pid int) (time.Duration, error) {
		kids, err := proc.Children(pid)
		if err != nil {
			return 0, err
		}
		var sum time.Duration
		for _, k := range kids {
			sum += cpuOf(k)
		}
		return sum, nil
	}
	boxes, err := children(fleet)
	if err != nil {
		return fleetCPU{}, err
	}
	oneBox, err := children(one)
	if err != nil {
		return fleetCPU{}, err
	}
	return fleetCPU{connect: cpuOf(fleet), boxes: boxes, oneConnect: cpuOf(one), oneBox: oneBox}, nil
}

// listFleet times one process_list with no arguments through c, and
// checks that every box answered with all its runs, merged newest first
// (every box's runs are its own: no run id twice):
// a box that is unreachable, a connect that took fewer boxes than it was
// given, or runs left unmerged is an error, not a faster figure.
func listFleet(c *client, want, boxes int) (time.Duration, error) {
	var res struct {
		Runs []struct {
			RunID string `json:"run_id"`
		} `json:"runs"`
		Total       int `json:"total"`
		Unreachable []struct {
			Box    string `json:"box"`
			Reason string `json:"reason"`
		} `json:"unreachable"`
	}
	d, err := c.call("process_list", map[string]any{}, &res)
	switch {
	case err != nil:
		return 0, err
	case len(res.Unreachable) > 0:
		return 0, fmt.Errorf("%d of %d boxes unreachable (first: %s, %s)", len(res.Unreachable), boxes, res.Unreachable[0].Box, res.Unreachable[0].Reason)
	case res.Total != want:
		return 0, fmt.Errorf("process_list counts %d runs, want %d over %d boxes (does this agent-box connect take several --exec?)", res.Total, want, boxes)
	case len(res.Runs) == 0:
		return 0, errors.New("process_list lists no run")
	}
	for i := 1; i < len(res.Runs); i++ {
		if res.Runs[i-1].RunID <= res.Runs[i].RunID {
			return 0, fmt.Errorf("process_list lists run %s before %s: not merged newest first, or a run id twice", res.Runs[i-1].RunID, res.Runs[i].RunID)
		}
	}
	return d, nil
}

// relayFleet starts agent-box connect with one --exec box per transport
// (named b000, b001, …; a single one is given as connect's one box, with
// no name) and env added to its environment (its boxes inherit it),
// initializes it, and remembers it for cleanup. Its cache dir is cache,
// under the work dir: a hundred boxes' tool lists are not left in the
// user's cache.
func (b *bench) relayFleet(transports []string, cache string, env []string) (*client, error) {
	args := []string{"connect"}
	for i, t := range transports {
		if len(transports) > 1 {
			t = fmt.Sprintf("b%03d=%s", i, t)
		}
		args = append(args, "--exec", t)
	}
	cmd := exec.Command(b.binary, args...)
	cmd.Env = append(append(os.Environ(), "XDG_CACHE_HOME="+cache), env...)
	stderr := &tailBuffer{max: 8 << 10}
	cmd.Stderr = stderr
	conn, err := rawmcp.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("starting %s connect: %w", b.binary, err)
	}
	c := &client{Conn: conn, stderr: stderr}
	b.mu.Lock()
	b.clients = append(b.clients, c)
	b.mu.Unlock()
	if _, err := c.Initialize(clientName); err != nil {
		c.close()
		return nil, c.withStderr(err)
	}
	return c, nil
}

// seedFleet gives each state dir of dirs cfg.fleetRuns exited runs of
// /bin/true, each started and waited for through a server of its own, a
// few dirs at a time.
func (b *bench) seedFleet(dirs []string) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(dirs))
	next := make(chan string)
	for range 4 {
		wg.Go(func() {
			for d := range next {
				if err := b.seedBox(d); err != nil {
					errs <- fmt.Errorf("%s: %w", d, err)
				}
			}
		})
	}
	for _, d := range dirs {
		next <- d
	}
	close(next)
	wg.Wait()
	close(errs)
	return <-errs // nil when none failed
}

func (b *bench) seedBox(dir string) error {
	store, _, err := runrecord.Open(dir)
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.extraStores = append(b.extraStores, store)
	b.mu.Unlock()
	c, err := b.connect(dir)
	if err != nil {
		return err
	}
	defer c.close()
	var names []string
	for k := range b.cfg.fleetRuns {
		name := fmt.Sprintf("job-%d", k)
		if _, _, err := c.start(map[string]any{"name": name, "cwd": b.work, "command": "true"}); err != nil {
			return err
		}
		names = append(names, name)
	}
	var w struct {
		TimedOut bool     `json:"wait_timed_out"`
		Running  []string `json:"running"`
	}
	if _, err := c.call("process_wait", map[string]any{"names": names, "all": true, "timeout_ms": 30000}, &w); err != nil {
		return err
	}
	if w.TimedOut || len(w.Running) > 0 {
		return fmt.Errorf("runs %s still running after 30 s", strings.Join(w.Running, ", "))
	}
	return nil
}
