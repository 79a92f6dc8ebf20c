package chaos

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/outcome"
)

// chaosTag begins the tag of every child the chaos rounds start, and only
// theirs: the children a block leaves behind are swept by it.
var chaosTag = token + ".chaos."

// TestChaosSmoke is a few rounds of TestChaos for plain go test ./....
func TestChaosSmoke(t *testing.T) {
	t.Parallel()
	if chaosBuild {
		t.Skip("the chaos build runs TestChaos instead")
	}
	rounds := 4
	if testing.Short() {
		rounds = 2
	}
	runChaos(t, rounds, 2, seed(t))
}

func seed(t *testing.T) uint64 {
	s := uint64(*seedFlag)
	if s == 0 {
		s = uint64(envInt("CHAOS_SEED", 0))
	}
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay the plan with -chaos.seed=%d or CHAOS_SEED=%d)", s, s, s)
	return s
}

type kind int

const (
	short   kind = iota // exits by itself after a random short time
	stopped             // killed with process_kill at a random moment
	long                // outlives its round
)

func (k kind) String() string { return [...]string{"short", "stopped", "long"}[k] }

// runPlan is one run a round starts, and what happened to it.
type runPlan struct {
	name  string
	kind  kind
	mode  string // capture mode
	p     childParams
	delay time.Duration // from the round's start to its process_start
	stop  time.Duration // from its start to process_kill (stopped runs)

	mu          sync.Mutex
	calling     bool   // its process_start is in flight
	interrupted bool   // the server was killed while it was
	startOK     bool   // process_start answered with a run
	startErr    string // process_start failed (tool error or transport error)
	runID       string
	supKilled   bool // this test SIGKILLed its supervisor
	stopSent    bool // process_kill answered
}

type event int

const (
	evNone event = iota
	evServer
	evSupervisor
	evBoth
)

// chaos is one run of the chaos suite.
type chaos struct {
	t     *testing.T
	bin   string
	self  string
	rng   *rand.Rand
	boot  string
	plans map[string]*runPlan // the current block's, by name

	rounds, runs, stops, startsOK, startsFailed int
	events                                      [4]int
	serverKills, supKills, orphans, temps       int
	restarts                                    int
	finals                                      map[string]int
	violations                                  []string
}

func (c *chaos) violate(round int, format string, args ...any) {
	msg := fmt.Sprintf("round %d: ", round) + fmt.Sprintf(format, args...)
	c.violations = append(c.violations, msg)
	if len(c.violations) <= 60 {
		c.t.Error(msg)
	}
}

// runChaos runs rounds rounds, with a fresh state dir every block rounds.
func runChaos(t *testing.T, rounds, block int, seed uint64) {
	c := &chaos{t: t, bin: agentBox(t), self: self(t), rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		boot: bootID(), finals: map[string]int{}}
	began := time.Now()
	var dirs []string
	t.Cleanup(func() { reap(t, dirs...) })
	var dir string
	for r := range rounds {
		if r%block == 0 {
			if dir != "" {
				c.finishBlock(r-1, dir)
			}
			dir = t.TempDir()
			dirs = append(dirs, dir)
			c.plans = map[string]*runPlan{}
		}
		c.round(r, dir, r%block != block-1 && r != rounds-1)
		c.rounds++
		if c.rounds%10 == 0 {
			t.Logf("after %d rounds (%s): %d server kills, %d supervisor kills, %d violations",
				c.rounds, time.Since(began).Round(time.Millisecond), c.serverKills, c.supKills, len(c.violations))
		}
		if t.Failed() && len(c.violations) == 0 {
			break // a harness failure, not a finding: stop early
		}
	}
	c.finishBlock(rounds-1, dir)

	states := make([]string, 0, len(c.finals))
	for s, n := range c.finals {
		states = append(states, fmt.Sprintf("%s:%d", s, n))
	}
	sort.Strings(states)
	summary := fmt.Sprintf("chaos: rounds=%d kills=server:%d,supervisor:%d (events server:%d,supervisor:%d,both:%d,none:%d) stops=%d runs=%d starts_ok=%d starts_failed=%d restarts=%d orphans=%d temp_leftovers=%d violations=%d seed=%d elapsed=%s",
		c.rounds, c.serverKills, c.supKills, c.events[evServer], c.events[evSupervisor], c.events[evBoth], c.events[evNone],
		c.stops, c.runs, c.startsOK, c.startsFailed, c.restarts, c.orphans, c.temps, len(c.violations), seed, time.Since(began).Round(time.Millisecond))
	t.Log(summary)
	t.Logf("final states: %s", strings.Join(states, " "))
	fmt.Println(summary)
	if len(c.violations) > 0 {
		t.Errorf("%d violations", len(c.violations))
	}
}

func (c *chaos) newPlan(round, i int, allowLong bool) *runPlan {
	rng := c.rng
	p := &runPlan{name: fmt.Sprintf("r%03d-%d", round, i), mode: "combined"}
	if rng.IntN(2) == 0 {
		p.mode = "framed"
	}
	switch x := rng.IntN(100); {
	case x < 20 && allowLong:
		p.kind = long
	case x < 45:
		p.kind = stopped
	default:
		p.kind = short
	}
	p.p = childParams{Tag: fmt.Sprintf("%s%d.%d", chaosTag, round, i), Code: rng.IntN(8)}
	switch p.kind {
	case short:
		p.p.N = 5 + rng.IntN(40)
		p.p.Gap = time.Duration(1000+rng.IntN(5000)) * time.Microsecond
		if rng.IntN(4) == 0 {
			// Done writing but still alive: a supervisor killed now
			// leaves a live child that exits normally, unrecorded.
			p.p.Hold = time.Duration(50+rng.IntN(250)) * time.Millisecond
		}
	case stopped:
		p.p.N = 400
		p.p.Gap = 3 * time.Millisecond
		p.stop = time.Duration(20+rng.IntN(300)) * time.Millisecond
	case long:
		p.p.N = 150 + rng.IntN(150)
		p.p.Gap = 8 * time.Millisecond
	}
	p.delay = time.Duration(rng.IntN(200)) * time.Millisecond
	return p
}

// round starts a few runs through one server and injects one fault
// somewhere among them, then checks the store with a fresh server.
func (c *chaos) round(r int, dir string, allowLong bool) {
	t, rng := c.t, c.rng
	n := 3 + rng.IntN(3)
	plans := make([]*runPlan, n)
	for i := range plans {
		plans[i] = c.newPlan(r, i, allowLong)
		c.plans[plans[i].name] = plans[i]
	}
	var ev event
	switch x := rng.IntN(100); {
	case x < 10:
		ev = evNone
	case x < 40:
		ev = evServer
	case x < 70:
		ev = evSupervisor
	default:
		ev = evBoth
	}
	c.events[ev]++
	at := time.Duration(rng.IntN(350)) * time.Millisecond
	gap := time.Duration(rng.IntN(20)) * time.Millisecond
	supFirst := rng.IntN(2) == 0
	nSup := 1 + rng.IntN(2)
	pick := rng.Uint64()
	// Everything random is drawn above, in this goroutine, so that the seed
	// replays the plan; only the timing differs between replays.

	var mu sync.Mutex
	cur := connect(t, c.bin, dir)
	var dead []*server
	current := func(p *runPlan) *server {
		mu.Lock()
		defer mu.Unlock()
		if p != nil {
			p.mu.Lock()
			p.calling = true
			p.mu.Unlock()
		}
		return cur
	}
	killServer := func() {
		mu.Lock()
		s := cur
		for _, p := range plans {
			p.mu.Lock()
			if p.calling {
				p.interrupted = true
			}
			p.mu.Unlock()
		}
		dead = append(dead, s)
		mu.Unlock()
		s.kill()
		c.serverKills++ // only this goroutine counts kills while the round runs
		ns := connect(t, c.bin, dir)
		mu.Lock()
		cur = ns
		mu.Unlock()
	}
	var supKilled int
	killSupervisors := func() {
		deadline := time.Now().Add(300 * time.Millisecond)
		for {
			cands := c.liveSupervisors(dir)
			if len(cands) > 0 || time.Now().After(deadline) {
				for i := 0; i < nSup && len(cands) > 0; i++ {
					j := int((pick >> (8 * i)) % uint64(len(cands)))
					d := cands[j]
					cands = slices.Delete(cands, j, j+1)
					if signalIfSame(d.Rec.SupervisorPID, d.Rec.SupervisorStartTime, false, unix.SIGKILL) {
						p := c.plans[d.Name]
						p.mu.Lock()
						p.supKilled = true
						p.mu.Unlock()
						supKilled++
						waitGone(d.Rec.SupervisorPID, d.Rec.SupervisorStartTime)
					}
				}
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	var wg sync.WaitGroup
	start := time.Now()
	for _, p := range plans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Until(start.Add(p.delay)))
			s := current(p)
			res, err := s.call("process_start", map[string]any{
				"name": p.name, "argv": p.p.argv(c.self), "capture_mode": p.mode, "cwd": dir,
			}, 30*time.Second)
			p.mu.Lock()
			p.calling = false
			switch {
			case err != nil:
				p.startErr = "transport: " + err.Error()
			case res.IsError:
				p.startErr = res.Text
			default:
				p.startOK = true
				p.runID, _ = res.Run()["run_id"].(string)
			}
			ok := p.startOK
			p.mu.Unlock()
			if !ok || p.kind != stopped {
				return
			}
			time.Sleep(p.stop)
			res, err = current(nil).call("process_kill", map[string]any{"name": p.name, "signal": "TERM"}, 30*time.Second)
			if err == nil && !res.IsError {
				p.mu.Lock()
				p.stopSent = true
				p.mu.Unlock()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(time.Until(start.Add(at)))
		switch ev {
		case evServer:
			killServer()
		case evSupervisor:
			killSupervisors()
		case evBoth:
			if supFirst {
				killSupervisors()
				time.Sleep(gap)
				killServer()
			} else {
				killServer()
				time.Sleep(gap)
				killSupervisors()
			}
		}
	}()
	wg.Wait()
	c.supKills += supKilled
	for _, s := range append(dead, cur) {
		if line := s.badStderr(); line != "" {
			c.violate(r, "server pid %d: %s", s.pid, line)
		}
	}
	cur.close()

	for _, p := range plans {
		if p.startOK {
			c.startsOK++
		} else {
			c.startsFailed++
		}
		if p.stopSent {
			c.stops++
		}
	}
	var settle []*runPlan
	for _, p := range c.plans {
		if p.kind != long || p.supKilled {
			settle = append(settle, p)
		}
	}
	c.settle(r, dir, settle)
	c.verify(r, dir, false)
}

// liveSupervisors are the runs of dir whose recorded supervisor is alive.
func (c *chaos) liveSupervisors(dir string) []*disk {
	snap, _ := snapshot(dir)
	var out []*disk
	for _, d := range snap {
		if d.Rec != nil && d.Rec.SupervisorPID > 0 && d.Sup == same && c.plans[d.Name] != nil {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key() < out[j].key() })
	return out
}

func waitGone(pid int, start uint64) {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if probe(pid, start) != same {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// settled reports whether nothing will change d any more: its output is
// closed, or none of its recorded processes is alive.
func settled(d *disk, quiet time.Duration) bool {
	switch {
	case d.Rec == nil:
		// No record.json: the server was killed between creating the run
		// dir and writing into it, and nobody else writes there.
		return true
	case d.Rec.OutputClosed:
		return true
	case d.Rec.SupervisorPID == 0:
		// The supervisor never recorded itself: it read a cut spec, or is
		// about to; give it a moment.
		return quiet > 500*time.Millisecond
	}
	return d.Sup != same && (d.Rec.PID == 0 || d.Child != same)
}

// settle waits (bounded) until the runs of plans are settled.
func (c *chaos) settle(r int, dir string, plans []*runPlan) {
	began := time.Now()
	for {
		snap, err := snapshot(dir)
		if err != nil {
			c.violate(r, "snapshot: %v", err)
			return
		}
		var waiting []string
		for _, p := range plans {
			for _, d := range snap {
				if d.Name == p.name && !settled(d, time.Since(began)) {
					waiting = append(waiting, fmt.Sprintf("%s (%s, supervisor %s, child %s)", d.key(), p.kind, d.Sup, d.Child))
				}
			}
		}
		if len(waiting) == 0 {
			return
		}
		if time.Since(began) > 20*time.Second {
			c.violate(r, "runs still not finished after 20s: %s", strings.Join(waiting, ", "))
			return
		}
		// Runs end on their own; no event tells this test when.
		time.Sleep(20 * time.Millisecond)
	}
}

// verify lists the store with a fresh server and checks every run; with
// final, every run of the block must have settled.
func (c *chaos) verify(r int, dir string, final bool) {
	before, err := snapshot(dir)
	if err != nil {
		c.violate(r, "snapshot: %v", err)
		return
	}
	s := connect(c.t, c.bin, dir)
	res, err := s.call("process_list", map[string]any{"all": true}, time.Minute)
	s.close()
	if line := s.badStderr(); line != "" {
		c.violate(r, "verifying server: %s", line)
	}
	if err != nil || res.IsError {
		c.violate(r, "process_list failed: %v %s", err, res.Text)
		return
	}
	after, err := snapshot(dir)
	if err != nil {
		c.violate(r, "snapshot: %v", err)
		return
	}
	list := parseList(res)
	for _, v := range checkStore(list, before, after, c.boot) {
		c.violate(r, "%s", v)
	}
	byName := map[string][]listed{}
	for _, l := range list {
		byName[l.Name] = append(byName[l.Name], l)
	}
	for _, d := range after {
		if data, err := os.ReadFile(filepath.Join(d.Dir, "supervisor.log")); err == nil {
			if line := crashLine(string(data)); line != "" {
				c.violate(r, "%s supervisor.log: %s", d.key(), line)
			}
		}
	}
	for name, p := range c.plans {
		ls := byName[name]
		p.mu.Lock()
		c.checkPlan(r, p, ls, after, final)
		p.mu.Unlock()
	}
	if final {
		for _, d := range after {
			c.temps += d.Temps
		}
		for _, l := range list {
			c.finals[l.State+"/"+string(l.Code)]++
		}
		c.runs += len(after)
	}
}

// checkPlan holds one run to what was done to it: with its supervisor
// left alone, the supervisor must not be lost, the exit must be recorded
// once the run had time to end (code exactness and log completeness are
// checked by checkLog), and a start that answered must be in the store.
func (c *chaos) checkPlan(r int, p *runPlan, ls []listed, after map[string]*disk, final bool) {
	bad := func(format string, args ...any) {
		c.violate(r, "%s (%s, %s, start ok=%v err=%q interrupted=%v, supervisor killed=%v): %s", p.name, p.kind, p.mode,
			p.startOK, p.startErr, p.interrupted, p.supKilled, fmt.Sprintf(format, args...))
	}
	if len(ls) > 1 {
		bad("one process_start made %d runs", len(ls))
		return
	}
	if len(ls) == 0 {
		if p.startOK {
			bad("process_start answered run %s, but no server lists it", p.runID)
		}
		return
	}
	l := ls[0]
	d := after[l.Name+"/"+l.RunID]
	if p.startOK && l.RunID != p.runID {
		bad("process_start answered run %s, the store holds %s", p.runID, l.RunID)
	}
	if p.supKilled {
		return // everything the matrix allows was checked by checkStore
	}
	switch l.Code {
	case outcome.ReasonUnsupervised, outcome.ReasonSupervisorLost:
		bad("%s/%s, but nobody killed its supervisor", l.State, l.Code)
	case outcome.ReasonStartInterrupted, outcome.ReasonCorrupt:
		if !p.interrupted && p.startErr == "" {
			bad("%s/%s, but its start was not interrupted", l.State, l.Code)
		}
	}
	if d == nil || d.Rec == nil || d.Rec.PID == 0 {
		return
	}
	if (p.kind != long || final) && (d.Rec.Exit == nil || !d.Rec.OutputClosed) {
		bad("should have ended by now: exit recorded=%v output_closed=%v (listed %s/%s)", d.Rec.Exit != nil, d.Rec.OutputClosed, l.State, l.Code)
	}
	if e := d.Rec.Exit; e != nil && e.Signal != "" && (p.kind != stopped || e.Signal != "SIGTERM") {
		bad("killed by %s, but this test only sent SIGTERM to stopped runs", e.Signal)
	}
}

// finishBlock lets every run of the block end, checks the store one last
// time and clears up whatever is left.
func (c *chaos) finishBlock(r int, dir string) {
	c.settle(r, dir, mapValues(c.plans))
	c.verify(r, dir, true)
	c.restart(r, dir)
	reap(c.t, dir)
	c.orphans += sweepChildren(chaosTag)
}

// restart starts again every name whose start was interrupted or whose
// supervisor was killed: nothing of those runs is alive any more, and a
// killed server's name lock died with it, so each name must be free.
func (c *chaos) restart(r int, dir string) {
	s := connect(c.t, c.bin, dir)
	defer s.close()
	names := make([]string, 0, len(c.plans))
	for name, p := range c.plans {
		if p.interrupted || p.supKilled {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		p := childParams{Tag: chaosTag + "again." + name, N: 1}
		res, err := s.call("process_start", map[string]any{"name": name, "argv": p.argv(c.self), "cwd": dir}, time.Minute)
		if err != nil || res.IsError {
			c.violate(r, "%s: starting the name again after its run ended: %v %s", name, err, res.Text)
		}
		c.restarts++
	}
}

func mapValues(m map[string]*runPlan) []*runPlan {
	out := make([]*runPlan, 0, len(m))
	for _, p := range m {
		out = append(out, p)
	}
	return out
}
