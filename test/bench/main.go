// Command bench measures agent-box end to end, the way an MCP client over
// SSH sees it: it starts the real binary, speaks newline-delimited JSON-RPC
// to it over pipes, and times each figure against a baseline measured in
// the same run on the same machine (exec of /bin/true, the same child
// writing to a file, cat of the same log).
//
//	go run ./test/bench --binary bin/agent-box           full run
//	go run ./test/bench --binary bin/agent-box --quick   tiny sizes, for CI
//	go run ./test/bench --binary OLD --only tokens       bytes a model reads per task (tokens.go)
//
// It prints a Markdown table and writes the figures as JSON (test/bench/results.json
// by default). It asserts nothing about timings: a missed target is a row
// that says "no", and the exit status is non-zero only when a measurement
// could not be made at all. docs/architecture/performance.md explains what
// bounds each figure.
//
// Everything it creates lives in one temporary directory (state dir and
// baseline files on the same filesystem, so the baselines write to the same
// disk as the supervisor), which is removed at the end; runs still alive
// then are killed by process group after their pid is re-identified.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
)

// config is the size of every scenario.
type config struct {
	spawnN       int   // fresh servers for spawn → initialize
	startN       int   // process_start calls
	captureBytes int64 // what the capture child writes
	captureReps  int   // runs per capture mode (and baseline)
	drainBytes   int64 // log size for the tail_log drain
	listSizes    []int // process_list is timed at each of these run counts
	listReps     int   // timed process_list calls per size
	followN      int   // tail_log wait_ms wake-ups
	waitN        int   // process_wait exits
	soakN        int   // follow calls of the fd soak
	connectHopN  int   // calls through connect (and as many direct) for the hop
	connectDrops int   // transports killed under a call in flight
	connectCalls int   // calls through connect in all, for its memory
	fleetSizes   []int // connects over this many boxes, ascending; the last is measured for memory
	fleetRuns    int   // exited runs on each box
	fleetCalls   int   // timed process_list calls per fleet (and as many through one box)
	// fleetCannedCalls is fleetCalls for canned boxes: more, as they
	// cost little, for connect's CPU a call in 10 ms ticks.
	fleetCannedCalls int
}

var (
	fullConfig = config{
		spawnN: 30, startN: 100,
		captureBytes: 1 << 30, captureReps: 5,
		drainBytes: 256 << 20,
		listSizes:  []int{1000, 10000, 50000}, listReps: 5,
		followN: 100, waitN: 100, soakN: 10000,
		connectHopN: 1000, connectDrops: 100, connectCalls: 10000,
		fleetSizes: []int{20, 100}, fleetRuns: 5, fleetCalls: 100, fleetCannedCalls: 500,
	}
	quickConfig = config{
		spawnN: 10, startN: 10,
		captureBytes: 64 << 20, captureReps: 2,
		drainBytes: 16 << 20,
		listSizes:  []int{1000}, listReps: 3,
		followN: 20, waitN: 5, soakN: 1000,
		connectHopN: 200, connectDrops: 10, connectCalls: 1000,
		fleetSizes: []int{20, 50}, fleetRuns: 5, fleetCalls: 20, fleetCannedCalls: 100,
	}
)

type bench struct {
	cfg      config
	mode     string // "full" or "quick", the sizes of cfg
	binary   string
	work     string // temporary root of everything below
	files    string // baseline output files
	stateDir string
	store    *runrecord.Store
	// extraStores are the state dirs of scenarios that keep their runs
	// apart (tokens), for killLeftovers.
	extraStores []*runrecord.Store
	seq         int // makes run names unique
	// listDurable creates the process_list records with Store.Create
	// (fsynced) instead of plain writes of the same bytes.
	listDurable bool
	keep        bool // leave the work dir behind
	// transcript, if set, is where the token scenario writes every
	// counted call and its reply, to see where the bytes go.
	transcript string

	mu          sync.Mutex
	clients     []*client
	cleanupOnce sync.Once
	res         results
}

// options are the command line's.
type options struct {
	binary, out, parent, only, listSizes, transcript string
	quick, keep, durable                             bool
}

func parseFlags() options {
	var o options
	flag.StringVar(&o.binary, "binary", "bin/agent-box", "agent-box executable to measure")
	flag.BoolVar(&o.quick, "quick", false, "tiny sizes (64 MiB capture, 16 MiB drain, 1k runs): finishes in under a minute")
	flag.StringVar(&o.out, "out", "test/bench/results.json", "where to write the results as JSON")
	flag.StringVar(&o.parent, "work-dir", "", "directory for the temporary state dir and baseline files (default: $TMPDIR); pick the filesystem to measure")
	flag.StringVar(&o.only, "only", "", "comma-separated scenarios to run (startup,start,follow,wait,capture,drain,list,decode,limits,connect,fleet,tokens); default all (but tokens in --quick)")
	flag.StringVar(&o.listSizes, "list-sizes", "", "comma-separated run counts for process_list, overriding the mode's (e.g. 10000)")
	flag.BoolVar(&o.keep, "keep", false, "keep the work dir (state dirs, generated records) for profiling; runs are still killed")
	flag.BoolVar(&o.durable, "durable-records", false, "create process_list's records with runrecord.Store.Create (fsync per record: minutes for 50k) instead of plain writes of the same bytes")
	flag.StringVar(&o.transcript, "transcript", "", "write the token scenario's calls and the replies a model reads to this file")
	flag.Parse()
	return o
}

func main() {
	if file := os.Getenv(cannedEnv); file != "" {
		os.Exit(cannedBoxMain(file, os.Args[1:]))
	}
	o := parseFlags()
	b, err := newBench(o)
	if err != nil {
		fatal(err)
	}
	if err := b.setup(o.parent); err != nil {
		fatal(err)
	}
	b.cleanupOnSignal()
	started := time.Now()
	b.describe(started)
	fmt.Fprintf(os.Stderr, "bench: %s mode, %s, work dir %s\n", b.mode, b.res.Version, b.work)

	want := map[string]bool{}
	for s := range strings.SplitSeq(o.only, ",") {
		if s != "" {
			want[s] = true
		}
	}
	b.res.Metrics = b.runScenarios(want)
	failed := slices.ContainsFunc(b.res.Metrics, func(m metric) bool { return m.Error != "" })
	b.res.Seconds = time.Since(started).Seconds()
	b.res.LoadAfter = loadavg()
	b.cleanup()

	if err := b.report(o.out); err != nil {
		fmt.Fprintf(os.Stderr, "bench: writing %s: %v\n", o.out, err)
		failed = true
	}
	if failed {
		os.Exit(1)
	}
}

// newBench is a benchmark of the sizes o asks for.
func newBench(o options) (*bench, error) {
	abs, err := filepath.Abs(o.binary)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("%v (run make build first)", err)
	}
	b := &bench{cfg: fullConfig, binary: abs, listDurable: o.durable, keep: o.keep, transcript: o.transcript}
	b.mode = "full"
	if o.quick {
		b.cfg, b.mode = quickConfig, "quick"
	}
	if o.listSizes != "" {
		b.cfg.listSizes = nil
		for f := range strings.SplitSeq(o.listSizes, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("--list-sizes: %q is not a positive count", f)
			}
			b.cfg.listSizes = append(b.cfg.listSizes, n)
		}
		slices.Sort(b.cfg.listSizes)
	}
	return b, nil
}

// cleanupOnSignal cleans up and exits on SIGINT or SIGTERM: an interrupted
// benchmark must not leave a 1 GiB writer behind.
func (b *bench) cleanupOnSignal() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sigs
		fmt.Fprintf(os.Stderr, "bench: %v, cleaning up\n", s)
		b.cleanup()
		os.Exit(130)
	}()
}

// describe fills in what the results say about the machine, the binary and
// the command, as of started.
func (b *bench) describe(started time.Time) {
	b.res = results{
		Mode: b.mode, Binary: b.binary, GoVersion: runtime.Version(), CPUs: runtime.NumCPU(),
		Started: started.UTC().Format(time.RFC3339), WorkDir: b.work,
		Command: strings.Join(os.Args, " "), LoadBefore: loadavg(),
	}
	if v, err := exec.Command(b.binary, "version").Output(); err == nil {
		b.res.Version = strings.TrimSpace(string(v))
	}
	if k, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		b.res.Kernel = strings.TrimSpace(string(k))
	}
}

// report prints the table and a summary line, and writes the results as
// JSON to path.
func (b *bench) report(path string) error {
	printTable(os.Stdout, &b.res)
	fmt.Printf("\n%s mode, %d CPUs, Linux %s, %s, %.0f s, loadavg %s before, %s after; JSON in %s\n",
		b.res.Mode, b.res.CPUs, b.res.Kernel, b.res.Version, b.res.Seconds, b.res.LoadBefore, b.res.LoadAfter, path)
	return writeJSON(path, &b.res)
}

// loadavg is the first three fields of /proc/loadavg.
func loadavg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(data))
	return strings.Join(f[:min(3, len(f))], " ")
}

func fatal(err error) {
	fmt.Fprintf(os.Stderr, "bench: %v\n", err)
	os.Exit(1)
}

func (b *bench) setup(parent string) error {
	work, err := os.MkdirTemp(parent, "agent-box-bench-")
	if err != nil {
		return err
	}
	b.work = work
	b.files = filepath.Join(work, "files")
	b.stateDir = filepath.Join(work, "state")
	if err := os.Mkdir(b.files, 0o700); err != nil {
		return err
	}
	store, _, err := runrecord.Open(b.stateDir)
	if err != nil {
		return err
	}
	b.store = store
	return nil
}

// runScenarios runs the scenarios selected by want and returns their rows;
// a scenario that fails returns rows with Error set and the others still
// run.
func (b *bench) runScenarios(want map[string]bool) []metric {
	var out []metric
	for _, s := range b.scenarios() {
		if !b.selected(s.name, want) {
			continue
		}
		t0 := time.Now()
		fmt.Fprintf(os.Stderr, "bench: %s ...\n", s.name)
		ms := s.fn()
		for _, m := range ms {
			if m.Error != "" {
				fmt.Fprintf(os.Stderr, "bench: %s: %s\n", m.Name, m.Error)
			}
		}
		out = append(out, ms...)
		fmt.Fprintf(os.Stderr, "bench: %s done in %s\n", s.name, time.Since(t0).Round(time.Millisecond))
	}
	return out
}

// selected: want names the scenario, or want is empty and the mode runs
// it (quick mode not the fullOnly ones).
func (b *bench) selected(name string, want map[string]bool) bool {
	if len(want) > 0 {
		return want[name]
	}
	return b.mode != "quick" || !fullOnly[name]
}

// scenario is one of --only's names and what it measures.
type scenario struct {
	name string
	fn   func() []metric
}

// fullOnly are the scenarios quick mode (CI's make bench-quick) runs only
// when --only names them. The token scenario's figures are bytes, the
// same in both modes, and it needs go and python3 on the machine.
var fullOnly = map[string]bool{"tokens": true}

// scenarios are all of them, in the order they run.
func (b *bench) scenarios() []scenario {
	return []scenario{
		{"startup", b.benchSpawn},
		{"start", b.benchStart},
		{"follow", b.benchFollow},
		{"wait", b.benchWait},
		{"capture", b.benchCapture},
		{"drain", b.benchDrain},
		{"limits", b.benchLimits},
		{"list", b.benchList},
		{"decode", b.benchDecode},
		{"connect", b.benchConnect},
		{"fleet", b.benchFleet},
		{"tokens", b.benchTokens},
	}
}

// connect dials a server on stateDir and remembers it for cleanup.
func (b *bench) connect(stateDir string) (*client, error) {
	c, err := dial(b.binary, stateDir)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.clients = append(b.clients, c)
	b.mu.Unlock()
	return c, nil
}

// name returns a run name not used before in this benchmark.
func (b *bench) name(prefix string) string {
	b.seq++
	return fmt.Sprintf("%s-%04d", prefix, b.seq)
}

// cleanup ends every server, kills every run of the state dir still alive,
// and removes the work dir.
func (b *bench) cleanup() {
	b.cleanupOnce.Do(func() {
		b.mu.Lock()
		clients := b.clients
		b.clients = nil
		b.mu.Unlock()
		for _, c := range clients {
			c.close()
		}
		b.killLeftovers()
		if b.keep {
			fmt.Fprintf(os.Stderr, "bench: work dir kept: %s\n", b.work)
			return
		}
		if err := os.RemoveAll(b.work); err != nil {
			fmt.Fprintf(os.Stderr, "bench: removing %s: %v\n", b.work, err)
		}
	})
}

// killLeftovers SIGKILLs the process group of every run whose child is
// still alive, and every supervisor still alive, after checking that the
// pid still belongs to the recorded process (its start time): a pid may
// have been reused by now. Only the real state dirs are visited (the
// bench's and the token scenario's); the process_list store holds made-up
// pids.
func (b *bench) killLeftovers() {
	b.mu.Lock()
	stores := append([]*runrecord.Store{b.store}, b.extraStores...)
	b.mu.Unlock()
	for _, s := range stores {
		if s != nil {
			b.killLeftoversIn(s)
		}
	}
}

func (b *bench) killLeftoversIn(store *runrecord.Store) {
	ents, err := store.List("", nil)
	if err != nil {
		return
	}
	same := func(pid int, start uint64) bool {
		st, err := proc.ReadStat(pid)
		return err == nil && !st.Dead() && st.StartTime == start
	}
	for _, e := range ents {
		r := e.Record
		if r == nil {
			continue
		}
		if r.PID > 0 && same(r.PID, r.PIDStartTime) {
			fmt.Fprintf(os.Stderr, "bench: killing leftover run %s (pgid %d)\n", r.Name, r.PID)
			_ = syscall.Kill(-r.PID, syscall.SIGKILL)
		}
		if r.SupervisorPID > 0 && same(r.SupervisorPID, r.SupervisorStartTime) {
			_ = syscall.Kill(r.SupervisorPID, syscall.SIGKILL)
		}
	}
}

// failed is a metric whose measurement could not be made.
func failed(name string, err error) metric {
	return metric{Name: name, Error: err.Error()}
}
