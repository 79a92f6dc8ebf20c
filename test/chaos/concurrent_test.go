package chaos

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent-box/agent-box/internal/abtest"
)

// TestConcurrentStart: eight agent-box processes (eight connections, eight
// sessions) race process_start with one name, released together by a
// barrier. Exactly one run starts; the other seven are told "name in use";
// the store holds exactly that run (and the exited one before it, in the
// trials that start one first), its log whole. Bounded here; the chaos
// build runs TestConcurrentStartMany.
func TestConcurrentStart(t *testing.T) {
	t.Parallel()
	if chaosBuild {
		t.Skip("the chaos build runs TestConcurrentStartMany instead")
	}
	trials := 20
	if testing.Short() {
		trials = 6
	}
	runConcurrentStart(t, trials)
}

const racers = 8

type raceStats struct {
	trials, exitedFirst, wins, inUse, lockTimeout, other int
}

func runConcurrentStart(t *testing.T, trials int) {
	bin, me := agentBox(t), self(t)
	dir := t.TempDir()
	t.Cleanup(func() { reap(t, dir) })
	began := time.Now()
	ss := make([]*server, racers)
	var wg sync.WaitGroup
	for i := range ss {
		wg.Add(1)
		go func() {
			// Connecting one by one costs a second each with -race on a
			// loaded box. A failed connect ends only this goroutine, and
			// the test fails below.
			defer wg.Done()
			ss[i] = connect(t, bin, dir)
		}()
	}
	wg.Wait()
	if t.Failed() || slices.Contains(ss, nil) {
		t.Fatal("could not connect every server")
	}
	var st raceStats
	for trial := range trials {
		if !raceTrial(t, ss, dir, me, trial, &st) {
			break
		}
		st.trials++
	}
	for _, s := range ss {
		if line := s.badStderr(); line != "" {
			t.Errorf("server pid %d: %s", s.pid, line)
		}
	}
	summary := fmt.Sprintf("concurrent start: trials=%d (%d with an exited run first) servers=%d started=%d name_in_use=%d (lock timeouts %d) other_errors=%d elapsed=%s",
		st.trials, st.exitedFirst, racers, st.wins, st.inUse, st.lockTimeout, st.other, time.Since(began).Round(time.Millisecond))
	t.Log(summary)
	fmt.Println(summary)
}

// raceTrial runs one race; false stops the test (a harness failure).
func raceTrial(t *testing.T, ss []*server, dir, me string, trial int, st *raceStats) bool {
	name := fmt.Sprintf("race%04d", trial)
	mode := []string{"combined", "framed"}[trial%2]
	var oldRunID string
	if trial%4 == 3 {
		// The name was used before, by a run that has exited: it must not
		// block the name, and must be kept.
		st.exitedFirst++
		old := childParams{Tag: fmt.Sprintf("%s.race.%d.old", token, trial), N: 10, Code: 3}
		res, err := ss[0].call("process_start", map[string]any{"name": name, "argv": old.argv(me), "capture_mode": mode, "cwd": dir}, time.Minute)
		if err != nil || res.IsError {
			t.Errorf("trial %d: starting the first run: %v %s", trial, err, res.Text)
			return false
		}
		oldRunID = abtest.Str(res.Run()["run_id"])
		w, err := ss[1].call("process_wait", map[string]any{"name": name, "timeout_ms": 30000}, time.Minute)
		if err != nil || w.IsError || abtest.Num(waitRun(w)["exit_code"]) != 3 {
			t.Errorf("trial %d: waiting for the first run: %v %s", trial, err, w.Text)
			return false
		}
	}

	p := childParams{Tag: fmt.Sprintf("%s.race.%d", token, trial), N: 20, Hold: time.Minute}
	args := map[string]any{"name": name, "argv": p.argv(me), "capture_mode": mode, "cwd": dir}
	type answer struct {
		res abtest.Result
		err error
	}
	answers := make([]answer, len(ss))
	barrier := make(chan struct{})
	var ready, done sync.WaitGroup
	for i, s := range ss {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-barrier
			answers[i].res, answers[i].err = s.call("process_start", args, time.Minute)
		}()
	}
	ready.Wait()
	close(barrier)
	done.Wait()

	var winner abtest.Result
	wins := 0
	for i, a := range answers {
		switch {
		case a.err != nil:
			st.other++
			t.Errorf("trial %d: server %d: protocol error: %v", trial, i, a.err)
		case !a.res.IsError:
			wins++
			winner = a.res
		case strings.Contains(a.res.Text, "name in use"):
			st.inUse++
			if strings.Contains(a.res.Text, "starting a run named") {
				st.lockTimeout++
			}
		default:
			st.other++
			t.Errorf("trial %d: server %d: want \"name in use\", got: %s", trial, i, a.res.Text)
		}
	}
	st.wins += wins
	if wins != 1 {
		t.Errorf("trial %d: %d of %d racing process_start calls started a run, want exactly 1", trial, wins, len(ss))
		return false
	}
	runID := abtest.Str(winner.Run()["run_id"])
	for i, a := range answers {
		// A loser that got past the lock saw the winner's record: it must
		// name the winner's run, not some other.
		if a.err == nil && a.res.IsError && strings.Contains(a.res.Text, "run id") && !strings.Contains(a.res.Text, runID) {
			t.Errorf("trial %d: server %d was refused for a run other than the winner %s: %s", trial, i, runID, a.res.Text)
		}
	}

	ents, err := recordsOf(dir, name)
	if err != nil {
		t.Errorf("trial %d: listing the store: %v", trial, err)
		return false
	}
	want := 1
	if oldRunID != "" {
		want = 2
	}
	if len(ents) != want {
		ids := []string{}
		for _, e := range ents {
			ids = append(ids, e.RunID)
		}
		t.Errorf("trial %d: the store holds %d runs of %s (%v), want %d", trial, len(ents), name, ids, want)
		return false
	}
	for _, e := range ents {
		if e.Err != nil {
			t.Errorf("trial %d: %s/%s: %v", trial, e.Name, e.RunID, e.Err)
		}
	}
	if ents[len(ents)-1].RunID != runID {
		t.Errorf("trial %d: the newest run is %s, the winner was told %s", trial, ents[len(ents)-1].RunID, runID)
	}
	if oldRunID != "" {
		if old := ents[0]; old.RunID != oldRunID || old.Record == nil || old.Record.Exit == nil || old.Record.Exit.Code == nil || *old.Record.Exit.Code != 3 {
			t.Errorf("trial %d: the exited run %s was not kept as it was: %+v", trial, oldRunID, old)
		}
	}

	// The winner's log fills up and stays whole through its kill.
	logOf := func() (*disk, logCheck) {
		snap, _ := snapshot(dir)
		d := snap[name+"/"+runID]
		if d == nil {
			return nil, logCheck{problems: []string{"run dir gone"}}
		}
		return d, checkLog(d)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, c := logOf()
		if len(c.problems) > 0 {
			t.Errorf("trial %d: %s", trial, strings.Join(c.problems, "; "))
			return false
		}
		if c.complete {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("trial %d: the winner's log did not fill up in 20s", trial)
			return false
		}
		// The supervisor writes the log; no event says when it is done.
		time.Sleep(5 * time.Millisecond)
	}
	k := ss[trial%len(ss)]
	if res, err := k.call("process_kill", map[string]any{"name": name, "signal": "KILL"}, time.Minute); err != nil || res.IsError {
		t.Errorf("trial %d: process_kill: %v %s", trial, err, res.Text)
		return false
	}
	w, err := ss[(trial+1)%len(ss)].call("process_wait", map[string]any{"name": name, "timeout_ms": 30000}, time.Minute)
	if err != nil || w.IsError || abtest.Str(waitRun(w)["signal"]) != "SIGKILL" {
		t.Errorf("trial %d: process_wait after the kill: %v %s", trial, err, w.Text)
		return false
	}
	abtest.WaitFor(t, "output_closed", 10*time.Second, func() bool {
		d, _ := logOf()
		return d != nil && d.Rec != nil && d.Rec.OutputClosed
	})
	if d, c := logOf(); !c.complete || len(c.problems) > 0 || d.Rec.Exit == nil || d.Rec.Exit.Signal != "SIGKILL" {
		t.Errorf("trial %d: after the kill: complete=%v %s exit=%+v", trial, c.complete, strings.Join(c.problems, "; "), d.Rec.Exit)
	}
	return true
}

// waitRun is the run of a process_wait answer.
func waitRun(r abtest.Result) map[string]any {
	m, _ := r.Data["run"].(map[string]any)
	return m
}
