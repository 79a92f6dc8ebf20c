package chaos

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/internal/abtest"
	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/runrecord"
)

// TestKillMidRecordWriteSmoke is a few trials of TestKillMidRecordWrite.
func TestKillMidRecordWriteSmoke(t *testing.T) {
	t.Parallel()
	if chaosBuild {
		t.Skip("the chaos build runs TestKillMidRecordWrite instead")
	}
	trials := 12
	if testing.Short() {
		trials = 4
	}
	runMidWrite(t, trials, seed(t))
}

// runMidWrite starts runs whose child is `exit 5` and SIGKILLs their
// supervisor at a random microsecond offset around the writing of the exit
// record: after the child's exit (seen through a pidfd), after the temp
// file of a record write appears (inotify), or after the child's pid is
// recorded. Whatever the offset, the record must decode, and either have
// no exit (unknown/supervisor_lost) or exit code 5 (exited); and the name
// must be free again.
//
// The offsets after the child's exit are drawn from [0, 2 W], W being
// the longest time from the child's exit to the exit record's rename that
// three unkilled calibration runs took, so that the kills spread
// over before, during and after that write however fast this machine (or
// a -race build) is.
func runMidWrite(t *testing.T, trials int, seed uint64) {
	bin := agentBox(t)
	dir := t.TempDir()
	t.Cleanup(func() { reap(t, dir) })
	if _, _, err := runrecord.Open(dir); err != nil {
		t.Fatal(err)
	}
	s := connect(t, bin, dir)
	rng := rand.New(rand.NewPCG(seed, 5))
	boot := bootID()
	began := time.Now()

	var windows []time.Duration
	for i := 0; len(windows) < 3; i++ {
		if i == 10 {
			t.Fatalf("calibration: the exit's write was timed in %d of %d runs", len(windows), i)
		}
		res, ok := midWriteTrial(t, s, dir, fmt.Sprintf("mwcal%d", i), "calibrate", 0, boot)
		if !ok {
			return
		}
		if res.window >= 0 { // else it was missed: see midWriteTrial
			windows = append(windows, res.window)
		}
	}
	window := max(slices.Max(windows), 100*time.Microsecond)

	hist := map[string]int{}
	done := 0
	startErr := ""
	for trial := range trials {
		name := fmt.Sprintf("mw%04d", trial)
		mode := "exit"
		switch x := rng.IntN(100); {
		case x < 25:
			mode = "temp"
		case x < 40:
			mode = "pid"
		}
		u := rng.Float64()
		var off time.Duration
		switch mode {
		case "exit":
			off = time.Duration(u * 2 * float64(window))
		case "temp":
			off = time.Duration(u*150) * time.Microsecond
		case "pid":
			off = time.Duration(u * float64(window))
		}
		res, ok := midWriteTrial(t, s, dir, name, mode, off, boot)
		if !ok {
			break
		}
		if startErr == "" {
			startErr = res.startErr
		}
		hist[res.label]++
		done++
		if trial%4 == 3 {
			// Whatever the kill left, nothing of the run is alive once its
			// child is gone: the name is free. The child (exit 5) may not
			// have run yet when its supervisor died, on a busy machine.
			waitGone(res.childPID, res.childStart)
			r, err := s.call("process_start", map[string]any{"name": name, "command": "exit 0", "cwd": dir}, time.Minute)
			if err != nil || r.IsError {
				t.Errorf("%s: restarting the name after the kill: %v %s", name, err, r.Text)
			}
		}
	}
	if line := s.badStderr(); line != "" {
		t.Errorf("server: %s", line)
	}
	keys := make([]string, 0, len(hist))
	for k, n := range hist {
		keys = append(keys, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(keys)
	summary := fmt.Sprintf("mid-write kills: trials=%d window=%s %s elapsed=%s", done, window, strings.Join(keys, " "), time.Since(began).Round(time.Millisecond))
	t.Log(summary)
	if startErr != "" {
		t.Logf("process_start answered, for a supervisor killed before its report: %s", startErr)
	}
	fmt.Println(summary)
}

// midWrite is how one trial ended.
type midWrite struct {
	label      string        // e.g. "no_exit,temp_left": what the record says
	startErr   string        // process_start's error, if it failed
	window     time.Duration // calibration: from the child's exit to the exit record
	childPID   int           // the run's child, as recorded
	childStart uint64
}

// midWriteTrial runs one trial and returns how the record ended up; in mode
// "calibrate" it kills nothing and returns the time from the child's exit
// to the rename of the record that holds it.
func midWriteTrial(t *testing.T, s *server, dir, name, mode string, off time.Duration, boot string) (res midWrite, ok bool) {
	nameDir := filepath.Join(dir, "runs", name)
	// Made here so that it can be watched before the run dir appears in it;
	// the store takes an existing name dir as it is.
	if err := os.Mkdir(nameDir, 0o700); err != nil {
		t.Fatal(err)
	}
	w, err := newWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	nameWD, err := w.add(nameDir, unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_ONLYDIR)
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		res abtest.Result
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		r, err := s.call("process_start", map[string]any{"name": name, "command": "exit 5", "cwd": dir}, time.Minute)
		answered <- answer{r, err}
	}()

	store := &runrecord.Store{Root: dir}
	var runDir string
	var rec *runrecord.Record
	var exitAt time.Time
	var window time.Duration
	deadline := time.Now().Add(20 * time.Second)
	runWD := -1
	var recheck bool // look at the record once, as if it had been written
	for stop := false; !stop; {
		var ev inEvent
		if recheck {
			ev, recheck = inEvent{wd: runWD, name: "record.json"}, false
		} else if ev, err = w.next(deadline); err != nil {
			t.Errorf("%s: waiting for the supervisor's writes: %v", name, err)
			return res, false
		}
		switch {
		case ev.wd == nameWD && ev.mask&unix.IN_ISDIR != 0 && runrecord.ValidRunID(ev.name) == nil && runWD < 0:
			runDir = filepath.Join(nameDir, ev.name)
			if runWD, err = w.add(runDir, unix.IN_CREATE|unix.IN_MOVED_TO); err != nil {
				t.Fatal(err)
			}
			// Writes made before the watch was added send no event.
			recheck = true
		case ev.wd == runWD && ev.name == "record.json" && rec == nil:
			r, err := store.Read(name, filepath.Base(runDir))
			if err != nil || r.PID == 0 {
				continue
			}
			rec = r
			if r.Exit != nil {
				// The watch on the run dir came after the writes before
				// the exit's (this goroutine was descheduled between the
				// dir's rename and adding the watch, on a loaded machine):
				// the exit is written, there is no write left to kill in
				// or to time. Kill now (late), or calibrate again.
				if mode == "calibrate" {
					window = -1
				}
				stop = true
				break
			}
			if mode == "pid" {
				spin(time.Now(), off)
				stop = true
				break
			}
			if mode == "temp" {
				break // kill at the next temp file
			}
			exitAt = time.Now()
			if fd, err := unix.PidfdOpen(r.PID, 0); err == nil {
				// Readable once the child has exited.
				_, _ = unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 5000)
				exitAt = time.Now()
				unix.Close(fd)
			}
			if mode == "exit" {
				spin(exitAt, off)
				stop = true
			}
		case ev.wd == runWD && ev.name == "record.json" && mode == "calibrate":
			if r, err := store.Read(name, filepath.Base(runDir)); err == nil && r.Exit != nil {
				window = time.Since(exitAt)
				stop = true
			}
		case ev.wd == runWD && mode == "temp" && rec != nil && strings.HasPrefix(ev.name, ".record.json"):
			spin(time.Now(), off)
			stop = true
		}
	}
	result := ""
	if mode != "calibrate" && !signalIfSame(rec.SupervisorPID, rec.SupervisorStartTime, false, unix.SIGKILL) {
		result = "late,"
	}
	var a answer
	select {
	case a = <-answered:
	case <-time.After(30 * time.Second):
		t.Errorf("%s: process_start did not answer within 30s of its supervisor's death", name)
		return res, false
	}
	if a.err != nil {
		t.Errorf("%s: process_start: %v", name, a.err)
		return res, false
	}
	if a.res.IsError {
		result += "start_error,"
		res.startErr = a.res.Text
	}
	if mode == "calibrate" {
		abtest.WaitFor(t, "the supervisor to finish", 10*time.Second, func() bool {
			return probe(rec.SupervisorPID, rec.SupervisorStartTime) != same
		})
	} else {
		waitGone(rec.SupervisorPID, rec.SupervisorStartTime)
	}

	before, err := snapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	lr, err := s.call("process_list", map[string]any{"name": name, "all": true}, time.Minute)
	if err != nil || lr.IsError {
		t.Errorf("%s: process_list: %v %s", name, err, lr.Text)
		return res, false
	}
	after, err := snapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	list := parseList(lr)
	if len(list) != 1 {
		t.Errorf("%s: %d runs listed, want 1", name, len(list))
		return res, false
	}
	l := list[0]
	k := name + "/" + l.RunID
	for _, v := range checkListed(l, before[k], after[k], boot) {
		t.Error(v)
	}
	d := after[k]
	if d == nil || d.Rec == nil {
		t.Errorf("%s: record unreadable after the kill: %+v", name, d)
		return res, false
	}
	switch e := d.Rec.Exit; {
	case e == nil:
		result += "no_exit"
		if l.Code != outcome.ReasonSupervisorLost && l.Code != outcome.ReasonUnsupervised {
			t.Errorf("%s: no exit recorded and the supervisor is dead, but listed %s (%s)", name, l.State, l.Reason)
		}
	case e.Code == nil || *e.Code != 5 || e.Signal != "":
		t.Errorf("%s: recorded exit %+v, want code 5", name, e)
	case d.Rec.OutputClosed:
		result += "exit5_closed"
	default:
		result += "exit5_open"
	}
	if d.Rec.Exit != nil && (l.State != string(outcome.Exited) || l.ExitCode == nil || *l.ExitCode != 5) {
		t.Errorf("%s: exit 5 recorded, but listed %s (%s)", name, l.State, l.Reason)
	}
	if d.Temps > 0 {
		result += ",temp_left"
	}
	res.label, res.window = result, window
	res.childPID, res.childStart = rec.PID, rec.PIDStartTime
	return res, true
}

// spin returns off after from: it sleeps for all but the last 200µs, which
// it busy-waits, since time.Sleep cannot hit a microsecond offset and a
// long busy wait would take a core from the supervisor it is timing.
func spin(from time.Time, off time.Duration) {
	if d := off - 200*time.Microsecond; d > 0 {
		time.Sleep(time.Until(from.Add(d)))
	}
	for time.Since(from) < off {
	}
}

// watcher reads inotify(7) events.
type watcher struct {
	fd      int
	f       *os.File
	buf     []byte
	pending []inEvent
}

type inEvent struct {
	wd   int
	mask uint32
	name string
}

func newWatcher() (*watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	// Non-blocking, so the runtime poller serves it and deadlines work.
	return &watcher{fd: fd, f: os.NewFile(uintptr(fd), "inotify"), buf: make([]byte, 64<<10)}, nil
}

func (w *watcher) add(path string, mask uint32) (int, error) {
	return unix.InotifyAddWatch(w.fd, path, mask)
}

func (w *watcher) close() { w.f.Close() }

func (w *watcher) next(deadline time.Time) (inEvent, error) {
	for len(w.pending) == 0 {
		if err := w.f.SetReadDeadline(deadline); err != nil {
			return inEvent{}, err
		}
		n, err := w.f.Read(w.buf)
		if err != nil {
			return inEvent{}, err
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			b := w.buf[off:]
			ev := inEvent{wd: int(int32(binary.NativeEndian.Uint32(b[0:]))), mask: binary.NativeEndian.Uint32(b[4:])}
			l := int(binary.NativeEndian.Uint32(b[12:]))
			ev.name = strings.TrimRight(string(b[unix.SizeofInotifyEvent:unix.SizeofInotifyEvent+l]), "\x00")
			off += unix.SizeofInotifyEvent + l
			if ev.mask&unix.IN_Q_OVERFLOW != 0 {
				return inEvent{}, errors.New("inotify queue overflow")
			}
			w.pending = append(w.pending, ev)
		}
	}
	ev := w.pending[0]
	w.pending = w.pending[1:]
	return ev, nil
}
