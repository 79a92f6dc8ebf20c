package main

import (
	"fmt"
	"os/exec"
	"time"

	"github.com/agent-box/agent-box/internal/rawmcp"
)

// benchSpawn times a fresh server from fork/exec to its initialize reply,
// which is what every SSH connection pays before its first tool call,
// against fork/exec/wait of /bin/true.
func (b *bench) benchSpawn() []metric {
	const name = "spawn → initialize reply"
	n := b.cfg.spawnN
	var ours, base []time.Duration
	// One unmeasured round of each first, so neither side pays for a cold
	// page cache; then the two interleave, so drift hits both alike.
	for i := -1; i < n; i++ {
		t0 := time.Now()
		if err := exec.Command("/bin/true").Run(); err != nil {
			return []metric{failed(name, err)}
		}
		dt := time.Since(t0)

		t0 = time.Now()
		c, err := spawn(b.binary, b.stateDir)
		if err != nil {
			return []metric{failed(name, err)}
		}
		err = c.withStderr(c.Request("initialize", rawmcp.InitializeParams(clientName, rawmcp.ProtocolVersion), nil))
		d := time.Since(t0)
		c.close()
		if err != nil {
			return []metric{failed(name, err)}
		}
		if i >= 0 {
			ours, base = append(ours, d), append(base, dt)
		}
	}
	m := metric{Name: name + ", median", Unit: "ms", Value: ms(median(ours)), Samples: n,
		Target: "≤ 8 ms and ≤ 5× /bin/true"}
	m.setBaseline("exec /bin/true", ms(median(base)))
	m.setMet(m.Value <= 8 && *m.Ratio <= 5)
	m.Note = fmt.Sprintf("p90 %.2f ms, min %.2f ms; /bin/true p90 %.2f ms", ms(percentile(ours, 90)), ms(percentile(ours, 0)), ms(percentile(base, 90)))
	return []metric{m}
}

// benchStart times process_start on one connection: the reply comes once
// the supervisor has started the child and reported its pid. The child is
// a long-running one (sleep), killed and waited for (untimed) before the
// next start, so that one run's supervisor finishing does not compete with
// the next start. The baseline, in the rounds between, is this process
// starting the same child itself (fork, exec, pid known: exec.Cmd.Start).
// An instantly exiting child (/bin/true) is timed too, for the note:
// process_start then also waits for its exit to be recorded.
func (b *bench) benchStart() []metric {
	const title = "process_start reply latency"
	fail := func(err error) []metric { return []metric{failed(title, err)} }
	c, err := b.connect(b.stateDir)
	if err != nil {
		return fail(err)
	}
	defer c.close()
	one := func(argv []string, kill bool) (time.Duration, error) {
		run, d, err := c.start(map[string]any{"name": b.name("start"), "argv": argv, "cwd": b.work})
		if err != nil {
			return 0, err
		}
		if kill {
			if _, err := c.call("process_kill", map[string]any{"name": run.Name, "signal": "KILL"}, nil); err != nil {
				return 0, err
			}
		}
		var w waitInfo
		if _, err := c.call("process_wait", map[string]any{"name": run.Name, "timeout_ms": 30000}, &w); err != nil {
			return 0, err
		}
		if w.TimedOut || w.Run.State != "exited" {
			return 0, fmt.Errorf("run %s did not end: %s (%s)", run.Name, w.Run.State, w.Run.Reason)
		}
		return d, nil
	}
	baseline := func() (time.Duration, error) {
		cmd := exec.Command("sleep", "60")
		cmd.Dir = b.work
		t0 := time.Now()
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		d := time.Since(t0)
		cmd.Process.Kill()
		cmd.Wait()
		return d, nil
	}
	var ds, base, instant []time.Duration
	var cpu0 time.Duration
	for i := -1; i < b.cfg.startN; i++ {
		if i == 0 {
			cpu0 = cpuWithChildren(c.pid())
		}
		d, err := one([]string{"sleep", "60"}, true)
		if err != nil {
			return fail(err)
		}
		db, err := baseline()
		if err != nil {
			return fail(err)
		}
		if i >= 0 {
			ds, base = append(ds, d), append(base, db)
		}
	}
	// The server reaps each supervisor (and each supervisor its child)
	// before the next start, so their CPU is in the server's cutime (the
	// baseline's sleeps are ours, not the server's).
	cpu := (cpuWithChildren(c.pid()) - cpu0) / time.Duration(len(ds))
	for range max(3, b.cfg.startN/10) {
		d, err := one([]string{"/bin/true"}, false)
		if err != nil {
			return fail(err)
		}
		instant = append(instant, d)
	}
	rows := latencyRows(title, ds, base, "fork and exec of the same child here", 5, 15)
	rows[0].Note = fmt.Sprintf("child sleep 60; CPU per start+kill+wait (server + supervisor + child) %.1f ms; a child that exits at once (/bin/true): median %.2f ms",
		ms(cpu), ms(median(instant)))
	return rows
}
