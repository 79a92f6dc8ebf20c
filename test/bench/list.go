package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
	"github.com/agent-box/agent-box/runs"
)

// runsPerName is how many runs each name of the generated store has: an
// agent reuses a few names ("build", "test") many times.
const runsPerName = 10

// genRecords writes finished runs from..to-1 into store, in the layout
// agent-box uses, with the bytes runrecord.Encode produces. With durable
// set it goes through Store.Create (two directory fsyncs and a file fsync
// per run, as agent-box itself creates runs); otherwise it writes the same
// files without fsync, which is what the reader sees either way.
func genRecords(store *runrecord.Store, from, to int, durable bool) error {
	boot, err := proc.BootID()
	if err != nil {
		return err
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	// Record creation is fsync- and metadata-bound, not CPU-bound:
	// several workers keep the disk's queue full.
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= to {
					return
				}
				if err := genRecord(store, boot, base, i, durable); err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

func genRecord(store *runrecord.Store, boot string, base time.Time, i int, durable bool) error {
	name := fmt.Sprintf("job-%05d", i/runsPerName)
	started := base.Add(time.Duration(i) * time.Minute)
	finished := started.Add(42 * time.Second)
	code := i % 3 // a mix of exit codes, as real runs have
	id := runrecord.NewRunID(started)
	r := &runrecord.Record{
		Version:   runrecord.Version,
		Name:      name,
		RunID:     id,
		LogFormat: "raw",
		BootID:    boot, // this boot: List probes the pids, as for real runs
		StartedAt: started,
		LogPath:   store.LogPath(name, id),
		// Pids of processes long gone; on a busy box some are reused by
		// now, which the start times tell apart.
		SupervisorPID:       1000 + (2*i)%30000,
		SupervisorStartTime: uint64(100 + i),
		PID:                 1001 + (2*i)%30000,
		PIDStartTime:        uint64(101 + i),
		Exit:                &runrecord.Exit{Code: &code, At: finished},
		FinishedAt:          &finished,
		OutputClosed:        true,
		LogBytes:            int64(1000 + i),
		Spec:                runrecord.Spec{Command: "go test -race -count=1 ./...", Cwd: "/home/agent/src/project", Env: map[string]string{"GOFLAGS": "-mod=mod"}, CaptureMode: "combined", Stdin: "null", MaxLogBytes: 1 << 30},
	}
	if durable {
		return store.Create(r)
	}
	data, err := runrecord.Encode(r)
	if err != nil {
		return err
	}
	dir := store.RunDir(name, id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "record.json"), data, 0o600)
}

// benchList times process_list {all: true} as the store grows to each of
// cfg.listSizes finished runs.
func (b *bench) benchList() []metric {
	var out []metric
	root := filepath.Join(b.work, "list-state")
	store, _, err := runrecord.Open(root)
	if err != nil {
		return []metric{failed("process_list", err)}
	}
	have := 0
	for _, n := range b.cfg.listSizes {
		name := fmt.Sprintf("process_list all=true, %s finished runs", countLabel(n))
		t0 := time.Now()
		if err := genRecords(store, have, n, b.listDurable); err != nil {
			return append(out, failed(name, err))
		}
		gen, added := time.Since(t0), n-have
		have = n
		// The default call answers the newest runs.DefaultListLimit runs (and the total);
		// limit=n asks for every run.
		m, err := b.timeList(root, n, 0)
		if err != nil {
			return append(out, failed(name, err))
		}
		m.Name = name + ", default limit, median"
		if n == 10000 {
			m.Target = "≤ 100 ms"
			m.setMet(m.Value <= 100)
		}
		m.Note += fmt.Sprintf("; %d records added in %.1f s", added, gen.Seconds())
		out = append(out, m)
		full, err := b.timeList(root, n, n)
		if err != nil {
			return append(out, failed(name, err))
		}
		full.Name = name + ", limit=all, median"
		out = append(out, full)
		for _, whole := range []bool{true, false} {
			m, err := b.timeChanges(root, n, whole)
			if err != nil {
				return append(out, failed(name, err))
			}
			out = append(out, m)
		}
	}
	return out
}

// timeChanges times process_list {changed_since} when nothing changed, with
// the cursor of a listing of every run (it knows every running run, so only
// those and the recent ones are read) or of a default listing (every record
// is read).
func (b *bench) timeChanges(root string, n int, whole bool) (metric, error) {
	name := fmt.Sprintf("process_list changed_since, %s finished runs, cursor of a default listing, median", countLabel(n))
	args := map[string]any{}
	if whole {
		name = fmt.Sprintf("process_list changed_since, %s finished runs, cursor of a listing of all, median", countLabel(n))
		args = map[string]any{"all": true, "limit": n}
	}
	c, err := b.connect(root)
	if err != nil {
		return metric{}, err
	}
	defer c.close()
	var res struct {
		Runs   []json.RawMessage `json:"runs"`
		Cursor string            `json:"cursor"`
	}
	if _, err := c.call("process_list", args, &res); err != nil {
		return metric{}, err
	}
	cursor := res.Cursor
	var ds []time.Duration
	for i := -1; i < b.cfg.listReps; i++ {
		d, err := c.call("process_list", map[string]any{"changed_since": cursor}, &res)
		if err != nil {
			return metric{}, err
		}
		if len(res.Runs) != 0 {
			return metric{}, fmt.Errorf("changed_since listed %d runs of a store where nothing changed", len(res.Runs))
		}
		if i >= 0 {
			ds = append(ds, d)
		}
	}
	return metric{Name: name, Unit: "ms", Value: ms(median(ds)), Samples: len(ds), Note: "on a warm server; nothing changed"}, nil
}

// timeList times process_list as an agent does after a reconnect: the
// first call of a fresh server (page cache warm, server cold). Each
// server then answers a second call, reported in the note, which shows what
// a server-side cache could win.
func (b *bench) timeList(root string, n, limit int) (metric, error) {
	args := map[string]any{"all": true}
	want := min(n, runs.DefaultListLimit)
	if limit > 0 {
		args["limit"] = limit
		want = min(n, limit)
	}
	var first, second []time.Duration
	var rx int64
	var cpu time.Duration
	var hwm int64
	for i := -1; i < b.cfg.listReps; i++ {
		c, err := b.connect(root)
		if err != nil {
			return metric{}, err
		}
		cpu0, rx0 := cpuOf(c.pid()), c.Received()
		var ds [2]time.Duration
		for k := range ds {
			var res struct {
				Runs []struct {
					State string `json:"state"`
				} `json:"runs"`
				Total int `json:"total"`
			}
			d, err := c.call("process_list", args, &res)
			if err != nil {
				c.close()
				return metric{}, err
			}
			if len(res.Runs) != want || res.Total != n {
				c.close()
				return metric{}, fmt.Errorf("process_list returned %d runs of %d, want %d of %d", len(res.Runs), res.Total, want, n)
			}
			for _, r := range res.Runs {
				if r.State != "exited" {
					c.close()
					return metric{}, fmt.Errorf("a generated run is %q, want exited", r.State)
				}
			}
			ds[k] = d
			if k == 0 {
				rx = c.Received() - rx0
				cpu = cpuOf(c.pid()) - cpu0
			}
		}
		mem, _ := readMem(c.pid())
		hwm = max(hwm, mem.HWM)
		c.close()
		// The first server warms the page cache and is not counted.
		if i >= 0 {
			first, second = append(first, ds[0]), append(second, ds[1])
		}
	}
	m := metric{Unit: "ms", Value: ms(median(first)), Samples: len(first)}
	m.Note = fmt.Sprintf("first call of a fresh server; second call on the same server %.0f ms; reply %.1f MB; server CPU %.0f ms for the first call; server VmHWM %.0f MiB",
		ms(median(second)), float64(rx)/1e6, ms(cpu), mib(hwm))
	return m, nil
}

// countLabel writes 10000 as "10k".
func countLabel(n int) string {
	if n >= 1000 && n%1000 == 0 {
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}
