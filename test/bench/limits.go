package main

import (
	"fmt"
	"slices"
	"time"
)

// benchLimits measures what a cgroup cap does and costs. A busy loop runs
// for loopSeconds under cpu_percent 20 and, alternating, with no cap; the
// share of one core each got is its CPU time (recorded by its supervisor
// from the cgroup, or rusage) over the wall time. And process_start with
// limits (its group made, the child started in it) against without.
func (b *bench) benchLimits() []metric {
	const title = "cpu_percent 20: share of one core a busy loop gets"
	fail := func(err error) []metric { return []metric{failed(title, err)} }
	c, err := b.connect(b.stateDir)
	if err != nil {
		return fail(err)
	}
	defer c.close()
	loopSeconds, reps := 2, b.cfg.captureReps
	share := func(limits map[string]any) (float64, error) {
		args := map[string]any{"name": b.name("busy"), "cwd": b.work, "timeout_s": loopSeconds,
			"argv": []string{"sh", "-c", "while :; do :; done"}}
		if limits != nil {
			args["limits"] = limits
		}
		run, _, err := c.start(args)
		if err != nil {
			return 0, err
		}
		var w waitInfo
		if _, err := c.call("process_wait", map[string]any{"name": run.Name, "timeout_ms": 30000}, &w); err != nil {
			return 0, err
		}
		rec, err := b.store.Read(run.Name, run.RunID)
		if err != nil || rec.Exit == nil || rec.FinishedAt == nil {
			return 0, fmt.Errorf("run %s: no exit recorded (%v)", run.Name, err)
		}
		wall := rec.FinishedAt.Sub(rec.StartedAt)
		return 100 * float64(rec.Exit.CPUMS) / float64(wall.Milliseconds()), nil
	}
	var capped, free []float64
	for range reps {
		p, err := share(map[string]any{"cpu_percent": 20})
		if err != nil {
			return fail(err)
		}
		q, err := share(nil)
		if err != nil {
			return fail(err)
		}
		capped, free = append(capped, p), append(free, q)
	}
	m := metric{Name: title + ", median", Unit: "%", Value: medianOf(capped), Samples: reps,
		Target: "20 ± 2 % of one core"}
	m.setBaseline("the same loop uncapped", medianOf(free))
	m.setMet(m.Value >= 18 && m.Value <= 22)
	m.Note = fmt.Sprintf("%d s loops; capped %v, uncapped %v", loopSeconds, rounded(capped), rounded(free))
	return append([]metric{m}, b.limitedStart(c)...)
}

// limitedStart times process_start of a run with all three caps against
// one without, alternating.
func (b *bench) limitedStart(c *client) []metric {
	const title = "process_start with limits, median"
	var with, without []time.Duration
	limits := map[string]any{"memory_mb": 256, "cpu_percent": 100, "pids": 64}
	for i := -1; i < b.cfg.startN; i++ {
		for _, l := range []map[string]any{limits, nil} {
			args := map[string]any{"name": b.name("lim"), "cwd": b.work, "argv": []string{"sleep", "60"}}
			if l != nil {
				args["limits"] = l
			}
			run, d, err := c.start(args)
			if err != nil {
				return []metric{failed(title, err)}
			}
			if _, err := c.call("process_kill", map[string]any{"name": run.Name, "signal": "KILL"}, nil); err != nil {
				return []metric{failed(title, err)}
			}
			if _, err := c.call("process_wait", map[string]any{"name": run.Name, "timeout_ms": 30000}, nil); err != nil {
				return []metric{failed(title, err)}
			}
			if i < 0 {
				continue
			}
			if l != nil {
				with = append(with, d)
			} else {
				without = append(without, d)
			}
		}
	}
	m := metric{Name: title, Unit: "ms", Value: ms(median(with)), Samples: len(with), Target: "≤ 1.5× without"}
	m.setBaseline("process_start without limits", ms(median(without)))
	m.setMet(m.Ratio != nil && *m.Ratio <= 1.5)
	m.Note = fmt.Sprintf("p90 %.2f ms against %.2f ms", ms(percentile(with, 90)), ms(percentile(without, 90)))
	return []metric{m}
}

func medianOf(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func rounded(v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(int(x*10+0.5)) / 10
	}
	return out
}
