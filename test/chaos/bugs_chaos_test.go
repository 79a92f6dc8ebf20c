//go:build chaos

package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/internal/abtest"
	"github.com/agent-box/agent-box/runrecord"
)

// TestStartFailsFastWhenSupervisorDies SIGKILLs a supervisor the moment its
// record names the child, before it has sent its start report, while the
// child lives on: process_start must answer promptly that the supervisor
// died, not wait out its whole StartTimeout.
//
// It failed (in about 15 s) while the child inherited the write end of the
// report pipe (the leak TestChildInheritsOnlyItsStdio pins): agent-box
// never saw EOF on it and answered only at the timeout ("did not report
// within 15s"), with the child running unknown to the agent that was told
// the start failed. Slow, so behind the tag.
func TestStartFailsFastWhenSupervisorDies(t *testing.T) {
	bin := agentBox(t)
	dir := t.TempDir()
	t.Cleanup(func() { reap(t, dir) })
	if _, _, err := runrecord.Open(dir); err != nil {
		t.Fatal(err)
	}
	s := connect(t, bin, dir)
	store := &runrecord.Store{Root: dir}
	for attempt := range 20 {
		name := fmt.Sprintf("early%02d", attempt)
		nameDir := filepath.Join(dir, "runs", name)
		if err := os.Mkdir(nameDir, 0o700); err != nil {
			t.Fatal(err)
		}
		w, err := newWatcher()
		if err != nil {
			t.Fatal(err)
		}
		nameWD, _ := w.add(nameDir, unix.IN_CREATE|unix.IN_ONLYDIR)
		p := childParams{Tag: token + ".early", Hold: time.Minute}
		type answer struct {
			res abtest.Result
			err error
			at  time.Time
		}
		answered := make(chan answer, 1)
		go func() {
			r, err := s.call("process_start", map[string]any{"name": name, "argv": p.argv(self(t)), "cwd": dir}, 2*time.Minute)
			answered <- answer{r, err, time.Now()}
		}()
		var rec *runrecord.Record
		runWD, runID := -1, ""
		for rec == nil {
			ev, err := w.next(time.Now().Add(20 * time.Second))
			if err != nil {
				t.Fatalf("waiting for the pid record: %v", err)
			}
			switch {
			case ev.wd == nameWD && ev.mask&unix.IN_ISDIR != 0 && runWD < 0:
				// The run dir is made as .new-<run id> and renamed into
				// place; the watch follows it across the rename.
				runID = strings.TrimPrefix(ev.name, ".new-")
				runWD, _ = w.add(filepath.Join(nameDir, ev.name), unix.IN_MOVED_TO)
			case ev.wd == runWD && ev.name == "record.json":
				if r, err := store.Read(name, runID); err == nil && r.PID > 0 {
					rec = r
				}
			}
		}
		w.close()
		killed := time.Now()
		signalIfSame(rec.SupervisorPID, rec.SupervisorStartTime, false, unix.SIGKILL)
		a := <-answered
		if a.err != nil {
			t.Fatal(a.err)
		}
		signalIfSame(rec.PID, rec.PIDStartTime, true, unix.SIGKILL)
		if !a.res.IsError {
			continue // the report was out before the kill: try again
		}
		took := a.at.Sub(killed)
		t.Logf("attempt %d: process_start answered %s after the supervisor's death: %s", attempt, took.Round(time.Millisecond), a.res.Text)
		if took > 5*time.Second {
			t.Errorf("process_start took %s to notice that the supervisor died before reporting (the live child holds the report pipe; see TestChildInheritsOnlyItsStdio)", took.Round(time.Millisecond))
		}
		return
	}
	t.Skip("no kill landed between the pid record and the start report in 20 attempts")
}
