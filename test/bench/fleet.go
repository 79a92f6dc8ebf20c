package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// benchFleet measures agent-box connect over many boxes, each an exec
// transport 'agent-box --state-dir D_i' with state dir of its own holding
// cfg.fleetRuns exited runs:
//   - process_list (default arguments: every box's runs, merged) through a
//     connect of each of cfg.fleetSizes boxes, against the same call
//     through a connect of one box (relayed unchanged), calls alternating
//     between the two;
//   - the memory and open files of the largest fleet's connect after its
//     calls, against the one box's, per box.
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
	one, err := b.relayFleet(dirs[:1])
	if err != nil {
		return fail(err)
	}
	defer one.close()

	var rows []metric
	var oneState, mostState connectState
	for _, n := range b.cfg.fleetSizes {
		title := fmt.Sprintf("fleet: process_list over %d boxes, median", n)
		m, facts, err := b.timeFleet(one, dirs[:n])
		if err != nil {
			return append(rows, failed(title, err))
		}
		m.Name = title
		if n == fleetTargetBoxes {
			m.Target = "≤ 4× one box"
			m.setMet(m.Ratio != nil && *m.Ratio <= 4)
		}
		if n == most {
			m.Note += fmt.Sprintf("; %d state dirs of %d exited runs started in %.1f s", most, b.cfg.fleetRuns, seeded.Seconds())
			mostState = facts
			if oneState, err = connectFacts(one.pid(), 0, 0); err != nil {
				return append(rows, failed(title, err))
			}
		}
		rows = append(rows, m)
	}
	return append(rows, fleetMemRows(most, oneState, mostState)...)
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

// timeFleet times process_list through a connect of the boxes of dirs
// against the same call through one, alternating, and returns connect's
// memory and open files after the calls; the connect is closed before it
// returns, and its boxes with it.
func (b *bench) timeFleet(one *client, dirs []string) (metric, connectState, error) {
	fleet, err := b.relayFleet(dirs)
	if err != nil {
		return metric{}, connectState{}, err
	}
	defer fleet.close()
	wantFleet, wantOne := len(dirs)*b.cfg.fleetRuns, b.cfg.fleetRuns
	var via, base []time.Duration
	var cpu0 fleetCPU
	for i := -fleetWarmup; i < b.cfg.fleetCalls; i++ {
		if i == 0 {
			if cpu0, err = cpuOfFleet(fleet.pid(), one.pid()); err != nil {
				return metric{}, connectState{}, err
			}
		}
		db, err := listFleet(one, wantOne, 1)
		if err != nil {
			return metric{}, connectState{}, fmt.Errorf("connect of one box: %w", err)
		}
		d, err := listFleet(fleet, wantFleet, len(dirs))
		if err != nil {
			return metric{}, connectState{}, fmt.Errorf("connect of %d boxes: %w", len(dirs), err)
		}
		if i >= 0 {
			via, base = append(via, d), append(base, db)
		}
	}
	cpu1, err := cpuOfFleet(fleet.pid(), one.pid())
	if err != nil {
		return metric{}, connectState{}, err
	}
	facts, err := connectFacts(fleet.pid(), 0, 0)
	if err != nil {
		return metric{}, connectState{}, err
	}
	m := metric{Unit: "ms", Value: ms(median(via)), Samples: len(via)}
	m.setBaseline("one box through connect", ms(median(base)))
	calls := time.Duration(len(via))
	perCall := func(d time.Duration) float64 { return ms(d / calls) }
	m.Note = fmt.Sprintf("process_list with no arguments, %d exited runs a box; calls alternate with the baseline's. "+
		"CPU a call: connect %.2f ms, its boxes' servers %.2f ms in all; one box's connect %.2f ms, its server %.2f ms. "+
		"p90 %.2f ms (baseline %.2f ms)",
		b.cfg.fleetRuns,
		perCall(cpu1.connect-cpu0.connect), perCall(cpu1.boxes-cpu0.boxes),
		perCall(cpu1.oneConnect-cpu0.oneConnect), perCall(cpu1.oneBox-cpu0.oneBox),
		ms(percentile(via, 90)), ms(percentile(base, 90)))
	return m, facts, nil
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
// checks that every box answered with all its runs, merged newest first:
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
		if res.Runs[i-1].RunID < res.Runs[i].RunID {
			return 0, fmt.Errorf("process_list lists run %s before the newer %s: not merged newest first", res.Runs[i-1].RunID, res.Runs[i].RunID)
		}
	}
	return d, nil
}

// relayFleet starts agent-box connect with one --exec box per state dir
// (named b000, b001, …; a single one is given as connect's one box, with
// no name), initializes it, and remembers it for cleanup. Its cache dir is
// under the work dir: a hundred boxes' tool lists are not left in the
// user's cache.
func (b *bench) relayFleet(dirs []string) (*client, error) {
	args := []string{"connect"}
	for i, d := range dirs {
		transport := shellQuote(b.binary) + " --state-dir " + shellQuote(d)
		if len(dirs) > 1 {
			transport = fmt.Sprintf("b%03d=%s", i, transport)
		}
		args = append(args, "--exec", transport)
	}
	cmd := exec.Command(b.binary, args...)
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+filepath.Join(b.work, "cache"))
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
