package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/agent-box/agent-box/internal/rawmcp"
	"github.com/agent-box/agent-box/proc"
)

// benchConnect measures agent-box connect, the local side's relay, with
// --exec 'agent-box --state-dir D' as its transport (ssh on loopback would
// need an sshd; its own cost is ssh's, not connect's):
//   - the extra hop: the same cheap tool call through connect and on a
//     direct pipe to a server, alternating;
//   - a redial: from the transport's SIGKILL to the answer of the call that
//     was in flight, re-sent on the new transport, against a server's own
//     spawn → initialize, alternating;
//   - connect's memory and open files after the hop's calls, and again
//     after all the drops and connectCalls calls in all.
func (b *bench) benchConnect() []metric {
	const (
		hopTitle    = "connect: extra hop of a tool call"
		redialTitle = "connect: redial, transport SIGKILL → in-flight call answered"
		memTitle    = "connect VmRSS"
	)
	fail := func(err error) []metric {
		return []metric{failed(hopTitle, err), failed(redialTitle, err), failed(memTitle, err)}
	}
	fifo := filepath.Join(b.files, "connect.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		return fail(err)
	}
	defer os.Remove(fifo)
	direct, err := b.connect(b.stateDir)
	if err != nil {
		return fail(err)
	}
	defer direct.close()
	relay, err := b.relay(b.stateDir)
	if err != nil {
		return fail(err)
	}
	defer relay.close()
	// The run the redial's tail_log follows, and the one run the hop's
	// process_list lists: a small answer, given at once.
	e, err := b.startEcho(direct, fifo)
	if err != nil {
		return fail(err)
	}
	defer e.close()
	list := func(c *client) (time.Duration, error) {
		return c.call("process_list", map[string]any{"name": e.name}, nil)
	}
	pid := relay.pid()

	// The hop: calls alternate between connect and the direct server.
	calls := 0
	var via, base []time.Duration
	for i := -10; i < b.cfg.connectHopN; i++ {
		d, err := list(relay)
		if err != nil {
			return fail(err)
		}
		calls++
		db, err := list(direct)
		if err != nil {
			return fail(err)
		}
		if i >= 0 {
			via, base = append(via, d), append(base, db)
		}
	}
	early, err := connectFacts(pid, calls, 0)
	if err != nil {
		return fail(err)
	}

	// The redial, alternating with a server's start-up.
	var redial, startup []time.Duration
	e.c = relay
	drops := 0
	for i := -1; i < b.cfg.connectDrops; i++ {
		d, err := e.drop(pid, i)
		if err != nil {
			return fail(err)
		}
		calls, drops = calls+1, drops+1
		db, err := b.startup()
		if err != nil {
			return fail(err)
		}
		if i >= 0 {
			redial, startup = append(redial, d), append(startup, db)
		}
	}

	// More calls, up to connectCalls in all; connect's CPU over them is
	// its parse, re-encode and relay of each message.
	cpu0, more := cpuOf(pid), b.cfg.connectCalls-calls
	for ; calls < b.cfg.connectCalls; calls++ {
		if _, err := list(relay); err != nil {
			return fail(err)
		}
	}
	cpu := cpuOf(pid) - cpu0
	late, err := connectFacts(pid, calls, drops)
	if err != nil {
		return fail(err)
	}
	e.c = direct
	if err := e.finish(); err != nil {
		return fail(err)
	}

	rows := hopRows(hopTitle, via, base, 0.3)
	if more > 0 {
		rows[0].Note += fmt.Sprintf("; connect's CPU %.0f µs a call (over %d calls)",
			float64(cpu/time.Duration(more))/float64(time.Microsecond), more)
	}
	rows = append(rows, redialRows(redialTitle, redial, startup, 50)...)
	return append(rows, memRows(memTitle, early, late)...)
}

// connectState is what connect holds at one point of the scenario.
type connectState struct {
	calls, drops int
	mem          memInfo
	files        int
}

func (s connectState) String() string {
	if s.drops == 0 {
		return fmt.Sprintf("after %d calls", s.calls)
	}
	return fmt.Sprintf("after %d calls and %d drops", s.calls, s.drops)
}

func connectFacts(pid, calls, drops int) (connectState, error) {
	mem, err := readMem(pid)
	if err != nil {
		return connectState{}, err
	}
	files, _, err := openFiles(pid)
	return connectState{calls: calls, drops: drops, mem: mem, files: files}, err
}

// memRows are connect's VmRSS, VmHWM and open files late in the scenario
// against early: flat is at most 1.5× the memory, no more files.
func memRows(rssTitle string, early, late connectState) []metric {
	mem := func(name string, v, v0 int64) metric {
		m := metric{Name: name + " " + late.String(), Unit: "MiB", Value: mib(v), Target: "≤ 1.5× (flat)"}
		m.setBaseline(early.String(), mib(v0))
		m.setMet(m.Ratio != nil && *m.Ratio <= 1.5)
		return m
	}
	rss := mem(rssTitle, late.mem.RSS, early.mem.RSS)
	hwm := mem("connect VmHWM", late.mem.HWM, early.mem.HWM)
	files := metric{Name: "open files of connect " + late.String(), Unit: "files", Value: float64(late.files), Target: "no more than before"}
	files.setBaseline(early.String(), float64(early.files))
	files.setMet(late.files <= early.files)
	return []metric{rss, hwm, files}
}

// relay starts agent-box connect with a server on stateDir as its
// transport, initializes it, and remembers it for cleanup (relayFleet of
// one box, its cache under the work dir).
func (b *bench) relay(stateDir string) (*client, error) {
	transport := shellQuote(b.binary) + " --state-dir " + shellQuote(stateDir)
	return b.relayFleet([]string{transport}, filepath.Join(b.files, "connect-cache"), nil)
}

// startup times a fresh server from fork/exec to its initialize reply, as
// benchSpawn does: what a transport costs before it carries anything.
func (b *bench) startup() (time.Duration, error) {
	t0 := time.Now()
	c, err := spawn(b.binary, b.stateDir)
	if err != nil {
		return 0, err
	}
	err = c.withStderr(c.Request("initialize", rawmcp.InitializeParams(clientName, rawmcp.ProtocolVersion), nil))
	d := time.Since(t0)
	c.close()
	return d, err
}

// drop times round i of the redial: a tail_log with wait_ms parked on the
// log's end through connect (e.c), its transport SIGKILLed, a line written
// to the child, until the answer. The line is in the log long before the
// new transport is up, so the re-sent call answers at once: the figure is
// connect's noticing the death, its dial (spawn, initialize) and the
// re-send.
func (e *echoRun) drop(connect, i int) (time.Duration, error) {
	id, err := e.c.sendTool("tail_log", map[string]any{"name": e.name, "offset": e.off, "wait_ms": 10000})
	if err != nil {
		return 0, err
	}
	time.Sleep(parkDelay) // no event says the call is parked; see parkDelay
	transport, err := onlyChild(connect)
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	if err := killChild(connect, transport); err != nil {
		return 0, err
	}
	if _, err := fmt.Fprintf(e.w, "drop %d\n", i); err != nil {
		return 0, err
	}
	var t tailInfo
	if err := e.c.awaitTool("tail_log", id, &t); err != nil {
		return 0, err
	}
	d := time.Since(t0)
	if t.EndOffset <= e.off {
		return 0, fmt.Errorf("tail_log returned no output after the redial (%s, offset %d)", d, e.off)
	}
	e.off = t.EndOffset
	return d, nil
}

// onlyChild is connect's one live child: its transport.
func onlyChild(parent int) (proc.Stat, error) {
	kids, err := proc.Children(parent)
	if err != nil {
		return proc.Stat{}, err
	}
	var live []proc.Stat
	for _, k := range kids {
		if st, err := proc.ReadStat(k); err == nil && !st.Dead() {
			live = append(live, st)
		}
	}
	if len(live) != 1 {
		return proc.Stat{}, fmt.Errorf("connect (pid %d) has %d live children, want its one transport", parent, len(live))
	}
	return live[0], nil
}

// killChild SIGKILLs st after checking that its pid is still parent's
// child of the same start time: never a pid reused since.
func killChild(parent int, st proc.Stat) error {
	now, err := proc.ReadStat(st.PID)
	if err != nil || now.Dead() || now.PPID != parent || now.StartTime != st.StartTime {
		return fmt.Errorf("pid %d is no longer connect's transport", st.PID)
	}
	return syscall.Kill(st.PID, syscall.SIGKILL)
}

// hopRows are the p50 and p99 of a call through connect against the same
// call on a direct pipe; the p50 row's target is at most addedMS more.
func hopRows(title string, via, direct []time.Duration, addedMS float64) []metric {
	row := func(p float64) metric {
		m := metric{Name: fmt.Sprintf("%s, p%.0f", title, p), Unit: "ms", Value: ms(percentile(via, p)), Samples: len(via)}
		m.setBaseline("the same call on a direct pipe", ms(percentile(direct, p)))
		return m
	}
	p50, p99 := row(50), row(99)
	p50.Target = fmt.Sprintf("≤ direct + %g ms", addedMS)
	p50.setMet(p50.Value-*p50.Baseline <= addedMS)
	p50.Note = fmt.Sprintf("process_list of one name, one run; added %.3f ms at p50, %.3f ms at p99; calls alternate with the direct ones",
		p50.Value-*p50.Baseline, p99.Value-*p99.Baseline)
	p99.Note = fmt.Sprintf("min %.3f ms, max %.2f ms; direct min %.3f ms, max %.2f ms",
		ms(percentile(via, 0)), ms(percentile(via, 100)), ms(percentile(direct, 0)), ms(percentile(direct, 100)))
	return []metric{p50, p99}
}

// redialRows are the p50 and p99 of the redial against those of a
// transport's start-up, each with a target of at most addedMS more.
func redialRows(title string, redial, startup []time.Duration, addedMS float64) []metric {
	row := func(p float64) metric {
		m := metric{Name: fmt.Sprintf("%s, p%.0f", title, p), Unit: "ms", Value: ms(percentile(redial, p)), Samples: len(redial)}
		m.setBaseline("spawn → initialize reply, direct", ms(percentile(startup, p)))
		m.Target = fmt.Sprintf("≤ start-up + %g ms", addedMS)
		m.setMet(m.Value-*m.Baseline <= addedMS)
		return m
	}
	p50, p99 := row(50), row(99)
	p50.Note = "the transport is the box's agent-box itself (--exec); the call in flight is a tail_log parked with wait_ms, re-sent on the new transport; rounds alternate with the baseline"
	p99.Note = fmt.Sprintf("min %.2f ms, max %.2f ms; baseline min %.2f ms, max %.2f ms",
		ms(percentile(redial, 0)), ms(percentile(redial, 100)), ms(percentile(startup, 0)), ms(percentile(startup, 100)))
	return []metric{p50, p99}
}
