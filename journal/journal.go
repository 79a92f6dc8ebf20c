// Package journal keeps what agent-box answered to each mutation a caller
// gave a request id (wire.RequestMeta), so that a repeat of the call is
// applied at most once and gets the first answer. connect re-sends the
// calls that were in flight when its SSH link dropped, to a new agent-box
// process: the one that took the first try may be dead, so the journal is
// on disk, under the state dir, and liveness comes from the kernel.
//
// Caveats: every file under the state dir may be planted by a run (a
// planted entry makes a repeat of its id fail, never follow, block or
// crash); a claim is not fsynced, so after a crash of the machine a repeat
// may apply its call again (the runs it would have acted on died with the
// machine); entries go a day after they were written.
//
// One file per id, STATE/requests/ID.json, in one of two states:
//   - a claim: the first try is being applied. Its claimant holds an
//     exclusive flock(2) on it from before it is visible (it is made under
//     a temp name, locked, and renamed into place with RENAME_NOREPLACE,
//     which is the claim: one rename wins) until the answer replaces it.
//     The kernel drops the lock when the claimant dies, so a claim whose
//     lock is free and that is still in place was left by a dead one.
//   - an answer: the claim's facts and the full tools/call result,
//     written atomically over the claim (runrecord.WriteFileAtomic). An
//     answer whose wait its client's going away cut short is marked cut,
//     with what a repeat needs to do that wait again (Answer.Cut): the
//     repeat does, and settles the entry with its own answer (Settle).
package journal

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
	"github.com/agent-box/agent-box/wire"
)

// Dir is the journal's directory under the state dir.
const Dir = "requests"

// MaxAge is how long an entry is kept: a repeat comes within the minutes
// connect takes to redial.
const MaxAge = 24 * time.Hour

// MaxEntryBytes bounds an entry: an answer is at most a process_write's
// output window, twice (text and structured), escaped. A larger file is
// not one of ours, and is not read.
const MaxEntryBytes = 16 << 20

const (
	suffix     = ".json"
	tempPrefix = ".claim-" // ends without suffix, so never an entry's name
	version    = 1
)

// Errors of Do.
var (
	// ErrOtherCall: the id names an earlier call of another tool or with
	// other arguments.
	ErrOtherCall = errors.New("the request id was used for another call")
	// ErrInProgress: the first try still runs after the repeat's wait.
	ErrInProgress = errors.New("the first try of the request is still in progress")
	// ErrForeign: the id's entry is not the journal's (a symlink, a FIFO,
	// a huge file, garbage): nothing tells what became of the id.
	ErrForeign = errors.New("the request's journal entry is not agent-box's")
)

// LostError is Do's error for a first try whose agent-box died (or failed
// to store the answer) before it answered: whether it was applied is not
// known.
type LostError struct {
	ID, Tool string
	PID      int       // the claimant
	At       time.Time // when it claimed the id
}

func (e *LostError) Error() string {
	return fmt.Sprintf("the agent-box (pid %d) that took %s with request %s at %s is gone and left no answer",
		e.PID, e.Tool, e.ID, e.At.UTC().Format(time.RFC3339))
}

// Call is one tools/call with a request id.
type Call struct {
	ID   string
	Tool string
	// Fingerprint stands for the call's arguments: a repeat must bring
	// the same.
	Fingerprint string
}

// Fingerprint is a digest of a call's arguments as JSON.
func Fingerprint(args []byte) string {
	sum := sha256.Sum256(args)
	return hex.EncodeToString(sum[:])
}

// Answer is a call's answer as the journal keeps it.
type Answer struct {
	Body []byte // the tools/call result, a JSON object
	// Cut, when not nil, marks an answer that is not final: the call's
	// wait was cut short by its client going away. It holds what a repeat
	// needs to do that wait again, a JSON object the journal keeps but
	// does not read.
	Cut json.RawMessage
}

// Result is Do's answer.
type Result struct {
	Answer
	// Repeat: the answer is an earlier try's, not apply's.
	Repeat bool
	// Began is when the first try claimed the id, on this machine's
	// clock: a repeat that waits again reckons its call's bound from it.
	Began time.Time
}

// entry is an ID.json file.
type entry struct {
	Version      int    `json:"version"`
	ID           string `json:"id"`
	Tool         string `json:"tool"`
	Fingerprint  string `json:"fingerprint"`
	PID          int    `json:"pid"`
	PIDStartTime uint64 `json:"pid_start_time"`
	BootID       string `json:"boot_id"`
	// At is when the first try claimed the id, in the claim and in the
	// answer alike.
	At     time.Time       `json:"at"`
	Answer json.RawMessage `json:"answer,omitempty"` // absent: a claim
	Cut    json.RawMessage `json:"cut,omitempty"`    // an answer's Cut
}

// Journal is the journal of one state dir.
type Journal struct {
	dir string
	// Poll is how often a repeat looks again at a claim whose claimant
	// lives; Wait bounds how long it looks.
	Poll, Wait time.Duration
	// Logf reports what the caller cannot act on (an answer that could
	// not be stored); nil drops it.
	Logf func(format string, args ...any)

	self entry // this process's facts, for its claims
	now  func() time.Time
	// waiting, a test's, is called each time a repeat waits for a live
	// claimant.
	waiting func()
}

// Open opens the journal under stateDir, making its directory if missing.
// A directory that is a symlink or not a directory is refused.
func Open(stateDir string) (*Journal, error) {
	dir := filepath.Join(stateDir, Dir)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("request journal: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, fmt.Errorf("request journal: %w", err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, fmt.Errorf("request journal: %s is a symlink, which is never followed: %w", dir, runrecord.ErrSymlink)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("request journal: %s is not a directory (%v)", dir, fi.Mode().Type())
	}
	st, err := proc.ReadStat(os.Getpid())
	if err != nil {
		return nil, fmt.Errorf("request journal: %w", err)
	}
	boot, err := proc.BootID()
	if err != nil {
		return nil, fmt.Errorf("request journal: %w", err)
	}
	return &Journal{
		dir: dir, Poll: 20 * time.Millisecond, Wait: 50 * time.Second,
		self: entry{PID: st.PID, PIDStartTime: st.StartTime, BootID: boot},
		now:  time.Now,
	}, nil
}

func (j *Journal) path(id string) string { return filepath.Join(j.dir, id+suffix) }

func (j *Journal) logf(format string, args ...any) {
	if j.Logf != nil {
		j.Logf(format, args...)
	}
}

// Do applies c at most once: the first Do of c.ID claims it, runs apply
// and stores its answer, which it returns; a later Do (in this process or
// another) returns that answer with Repeat set, waiting (up to Wait, or
// ctx) while the first try runs in a live process. apply's answer is
// stored before Do returns, so before the caller replies: a reply lost
// with the connection is on disk for the repeat. A cut answer is returned
// as any other: the caller decides what to do again (Settle).
func (j *Journal) Do(ctx context.Context, c Call, apply func() Answer) (Result, error) {
	if !wire.ValidRequestID(c.ID) {
		return Result{}, fmt.Errorf("request id %q is not 1..%d bytes of [A-Za-z0-9._-]", c.ID, wire.MaxRequestID)
	}
	deadline := time.NewTimer(j.Wait)
	defer deadline.Stop()
	for try := true; ; {
		if try {
			claim, began, err := j.claim(c)
			if err != nil {
				return Result{}, err
			}
			if claim != nil {
				return Result{Answer: j.applied(c, claim, began, apply), Began: began}, nil
			}
		}
		found, alive, err := j.look(c)
		switch {
		case err != nil:
			return Result{Repeat: true}, err
		case found != nil:
			return *found, nil
		case !alive:
			try = true // pruned between the claim and the look: claim again
			continue
		}
		try = false
		if j.waiting != nil {
			j.waiting()
		}
		select {
		case <-time.After(j.Poll):
		case <-deadline.C:
			return Result{Repeat: true}, fmt.Errorf("%w (after %s)", ErrInProgress, j.Wait)
		case <-ctx.Done():
			return Result{Repeat: true}, fmt.Errorf("%w: %w", ErrInProgress, ctx.Err())
		}
	}
}

// claim makes c's claim, locked, and says when: nil when the id has an
// entry already.
func (j *Journal) claim(c Call) (_ *os.File, at time.Time, err error) {
	tmp := filepath.Join(j.dir, tempPrefix+randomHex())
	f, err := runrecord.OpenFile(tmp, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL, 0o600, "request claim")
	if err != nil {
		return nil, at, fmt.Errorf("request journal: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	// Locked before it has its name: a claim nobody holds is a dead
	// claimant's.
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return nil, at, fmt.Errorf("request journal: locking a claim: %w", err)
	}
	at = j.now().UTC()
	e := j.self
	e.Version, e.ID, e.Tool, e.Fingerprint, e.At = version, c.ID, c.Tool, c.Fingerprint, at
	b, err := json.Marshal(&e)
	if err != nil {
		return nil, at, err
	}
	if _, err := f.Write(b); err != nil {
		return nil, at, fmt.Errorf("request journal: %w", err)
	}
	err = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, j.path(c.ID), unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EEXIST) {
		return nil, at, nil
	}
	if err != nil {
		return nil, at, fmt.Errorf("request journal: claiming %s: %w", c.ID, err)
	}
	ok = true
	return f, at, nil
}

// applied runs apply under the claim and stores its answer over it; the
// claim's lock goes only after, so that a repeat that finds the lock free
// and the claim still in place knows the claimant died.
func (j *Journal) applied(c Call, claim *os.File, began time.Time, apply func() Answer) Answer {
	defer claim.Close()
	a := apply()
	if err := j.store(c, began, a); err != nil {
		// The call was applied and is answered; a repeat of it will say
		// its answer was lost.
		j.logf("%s with request %s: storing its answer: %v", c.Tool, c.ID, err)
	}
	return a
}

// Settle stores a over c's answer, whose first try began then (Result's
// Began): the answer of a repeat that did again the wait a cut answer
// left undone. It is final unless a is cut too. Concurrent repeats of a
// cut answer each settle it, the last one's stays: each only observed.
func (j *Journal) Settle(c Call, began time.Time, a Answer) error {
	if !wire.ValidRequestID(c.ID) {
		return fmt.Errorf("request id %q is not 1..%d bytes of [A-Za-z0-9._-]", c.ID, wire.MaxRequestID)
	}
	return j.store(c, began, a)
}

// store writes a as c's answer, atomically over its entry. An entry that
// is stored but not durable is no error: only a crash of the machine
// loses it.
func (j *Journal) store(c Call, began time.Time, a Answer) error {
	e := j.self
	e.Version, e.ID, e.Tool, e.Fingerprint, e.At, e.Answer, e.Cut = version, c.ID, c.Tool, c.Fingerprint, began, a.Body, a.Cut
	b, err := json.Marshal(&e)
	if err == nil && len(b) > MaxEntryBytes {
		err = fmt.Errorf("the answer is %d bytes, over %d", len(b), MaxEntryBytes)
	}
	if err == nil {
		err = runrecord.WriteFileAtomic(j.dir, c.ID+suffix, b)
	}
	if errors.Is(err, runrecord.ErrNotDurable) {
		return nil
	}
	return err
}

// found is the Result of a repeat that found e's answer.
func found(e entry) *Result {
	return &Result{Answer: Answer{Body: e.Answer, Cut: e.Cut}, Repeat: true, Began: e.At}
}

// look reads c's entry: its answer, or whether its claimant is alive.
// alive false with no error: the entry is gone.
func (j *Journal) look(c Call) (answer *Result, alive bool, err error) {
	f, e, err := j.read(c.ID)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	if e.Tool != c.Tool || e.Fingerprint != c.Fingerprint {
		what := "other arguments"
		if e.Tool != c.Tool {
			what = "tool " + e.Tool
		}
		return nil, false, fmt.Errorf("%w: request %s was first used with %s", ErrOtherCall, c.ID, what)
	}
	if e.Answer != nil {
		return found(e), true, nil
	}
	if j.claimantLives(f, e) {
		return nil, true, nil
	}
	// The lock is free: the claimant is dead, or it has just put the
	// answer in place (the lock goes after that) and f is the claim it
	// replaced. The file in place tells.
	g, again, err := j.read(c.ID)
	if err == nil {
		defer g.Close()
		if again.Answer != nil && again.Tool == c.Tool && again.Fingerprint == c.Fingerprint {
			return found(again), true, nil
		}
	}
	return nil, false, &LostError{ID: c.ID, Tool: c.Tool, PID: e.PID, At: e.At}
}

// claimantLives says whether the claim f, of e, is held: its lock is
// taken, and the process it names is alive, the one that started then.
// The lock is the kernel's word that some process holds the claim; the
// pid, that it is not a planter's.
func (j *Journal) claimantLives(f *os.File, e entry) bool {
	err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
	if err == nil {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		return false
	}
	if !errors.Is(err, unix.EWOULDBLOCK) || e.BootID != j.self.BootID || e.PID <= 1 {
		return false
	}
	live, _ := proc.ProbeStat(e.PID, e.PIDStartTime)
	return live == outcome.Same
}

// read opens and decodes the entry of id, defensively: never through a
// symlink, never blocking on a FIFO, a regular file of at most
// MaxEntryBytes that decodes as an entry of id.
func (j *Journal) read(id string) (*os.File, entry, error) {
	var e entry
	f, err := runrecord.OpenFile(j.path(id), unix.O_RDONLY, 0, "journal entry of request "+id)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, e, err
	}
	if err != nil {
		return nil, e, fmt.Errorf("%w: %w", ErrForeign, err)
	}
	fi, err := f.Stat()
	if err == nil && fi.Size() > MaxEntryBytes {
		err = fmt.Errorf("it is %d bytes, over %d", fi.Size(), MaxEntryBytes)
	}
	var b []byte
	if err == nil {
		b, err = io.ReadAll(io.LimitReader(f, MaxEntryBytes+1))
	}
	if err == nil && len(b) > MaxEntryBytes {
		err = fmt.Errorf("it is over %d bytes", MaxEntryBytes)
	}
	if err == nil {
		d := json.NewDecoder(bytes.NewReader(b))
		d.DisallowUnknownFields()
		err = d.Decode(&e)
	}
	if err == nil && (e.Version != version || e.ID != id) {
		err = fmt.Errorf("version %d, id %q", e.Version, e.ID)
	}
	if err == nil && e.Answer != nil && !bytes.HasPrefix(e.Answer, []byte("{")) {
		err = errors.New("its answer is not an object")
	}
	if err == nil && e.Cut != nil && (e.Answer == nil || !bytes.HasPrefix(e.Cut, []byte("{"))) {
		err = errors.New("its cut is not an object of an answer")
	}
	if err != nil {
		f.Close()
		return nil, e, fmt.Errorf("%w: journal entry of request %s: %w", ErrForeign, id, err)
	}
	return f, e, nil
}

// Prune removes the entries (and temp files left by a killed claimant)
// last written before now-MaxAge. Best effort: what cannot be removed
// stays; directories and other things that are not files are left alone.
func (j *Journal) Prune() {
	d, err := os.Open(j.dir)
	if err != nil {
		return
	}
	defer d.Close()
	cut := j.now().Add(-MaxAge)
	for {
		names, err := d.Readdirnames(1024)
		for _, n := range names {
			if !strings.HasSuffix(n, suffix) && !strings.HasPrefix(n, tempPrefix) && !strings.HasPrefix(n, ".") {
				continue
			}
			var st unix.Stat_t
			if unix.Fstatat(int(d.Fd()), n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT == unix.S_IFDIR {
				continue
			}
			if time.Unix(st.Mtim.Unix()).Before(cut) {
				unix.Unlinkat(int(d.Fd()), n, 0)
			}
		}
		if err != nil {
			return
		}
	}
}

func randomHex() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
