package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/agent-box/agent-box/journal"
	"github.com/agent-box/agent-box/runrecord"
	"github.com/agent-box/agent-box/wire"
)

// Repeatable is a mutation a caller gave a request id (wire.RequestMeta),
// so that a repeat of it, sent again after a dropped connection to
// another agent-box, is applied at most once and gets the first answer.
type Repeatable struct {
	ID   string
	Tool string // the call's tool, for the journal and the messages
	// Args are the call's arguments as decoded from the wire: a repeat
	// must bring the same (secret_env's values are left out of the
	// comparison, which the journal keeps a digest of).
	Args map[string]any
}

// CheckRequestID is the rule for a request id: 1..wire.MaxRequestID
// bytes of [A-Za-z0-9._-].
func CheckRequestID(id string) error {
	if !wire.ValidRequestID(id) {
		if len(id) > wire.MaxRequestID {
			id = id[:wire.MaxRequestID] + "..."
		}
		return invalid("request id %q (_meta %s) must be 1..%d characters of A-Z a-z 0-9 . _ -", id, wire.RequestMeta, wire.MaxRequestID)
	}
	return nil
}

// requests is the request journal of a Manager, opened at the first
// call that carries a request id (a server that never gets one makes no
// directory for it), and the error opening it gave, which sticks.
type requests struct {
	j   *journal.Journal
	err error
}

// requestsMu guards the opening of Manager.requests: a Manager is a
// plain struct its users build, with no constructor to open it in.
var requestsMu sync.Mutex

func (m *Manager) journal() (*journal.Journal, error) {
	requestsMu.Lock()
	defer requestsMu.Unlock()
	if m.requests != nil {
		return m.requests.j, m.requests.err
	}
	j, err := journal.Open(m.Store.Root)
	m.requests = &requests{j: j, err: err}
	if err != nil {
		return nil, err
	}
	j.Logf = m.Logf
	// A repeat waits for a first try that is still running as long as a
	// wait without progress may block (clients time calls out at 60 s).
	j.Wait = m.waitPolicy().Unwatched
	// Pruned once per server, out of the way of its first answer.
	go j.Prune()
	return j, nil
}

// Once applies, under r's request id, the mutation apply (which returns
// the call's whole answer) at most once, also across agent-box processes:
// the first call applies it and stores the answer before Once returns (so
// before the reply that a dropped connection may lose); a repeat returns
// that answer, waiting for a first try that still runs. ran says whether
// apply made the answer returned, in this call. Errors: ErrInvalid (a bad
// id, an id used for another call), ErrBusy (the first try is still
// running), ErrUnknownOutcome (its agent-box died before it answered, or
// its entry is not agent-box's).
//
// apply gets ctx, carrying the try (see try): a call that waits after it
// applied (Start's ready probe, Write's wait for output) says there when
// ctx cut its wait, and the answer is stored as cut. A repeat that finds
// a cut answer of such a call runs apply again, told by its ctx to apply
// nothing and only do the wait again, for the time left of the call's
// bound; that answer is stored in place of the cut one.
func (m *Manager) Once(ctx context.Context, r Repeatable, apply func(context.Context) []byte) (answer []byte, ran bool, err error) {
	if err := CheckRequestID(r.ID); err != nil {
		return nil, false, err
	}
	j, err := m.journal()
	if err != nil {
		return nil, false, err
	}
	args, err := json.Marshal(withoutSecrets(r.Args))
	if err != nil {
		return nil, false, fmt.Errorf("%w: arguments: %w", ErrInvalid, err)
	}
	call := journal.Call{ID: r.ID, Tool: r.Tool, Fingerprint: journal.Fingerprint(args)}
	res, err := j.Do(ctx, call, func() journal.Answer { return (&try{}).run(ctx, apply) })
	var lost *journal.LostError
	switch {
	case err == nil:
	case errors.Is(err, journal.ErrOtherCall):
		return nil, false, invalid("%v; give each call its own request id", err)
	case errors.Is(err, journal.ErrInProgress):
		return nil, false, fmt.Errorf("%w: %s with request %s: %w; call again with the same request id for its answer", ErrBusy, r.Tool, r.ID, err)
	case errors.As(err, &lost):
		if again := m.lostStart(r, lost); again != nil {
			return again.run(ctx, apply).Body, true, nil
		}
		return nil, false, fmt.Errorf("%w: %s with request %s was sent but its answer was lost when the connection dropped (%v); whether it was applied is unknown: read the run's log or %s before doing it again",
			ErrUnknownOutcome, r.Tool, r.ID, err, m.words().List)
	case errors.Is(err, journal.ErrForeign):
		return nil, false, fmt.Errorf("%w: %s with request %s: %v; whether it was applied is unknown", ErrUnknownOutcome, r.Tool, r.ID, err)
	default:
		return nil, false, err
	}
	if !res.Repeat {
		return res.Body, true, nil
	}
	again := waitAgain(r.Tool, res)
	if again == nil {
		return res.Body, false, nil
	}
	a := again.run(ctx, apply)
	if err := j.Settle(call, res.Began, a); err != nil {
		// Answered all the same; a later repeat does the wait again.
		m.logf("%s with request %s: storing the answer of its repeat: %v", r.Tool, r.ID, err)
	}
	return a.Body, true, nil
}

// waitsAgain are the tools whose repeat does a cut wait again: those
// whose call goes to Start or Write, which honour try.again. Any other
// tool's cut answer (a planted one: no other call is ever cut) is kept
// as it is, so that nothing but these is ever run twice.
var waitsAgain = map[string]bool{"process_start": true, "process_write": true}

// waitAgain is the try that does again the wait of res, a repeat's
// answer, if it is cut: nil when it is final.
func waitAgain(tool string, res journal.Result) *try {
	if res.Cut == nil || !waitsAgain[tool] {
		return nil
	}
	var c cut
	if err := json.Unmarshal(res.Cut, &c); err != nil {
		return nil // not ours: the answer stays as it is
	}
	return &try{again: &c, began: res.Began}
}

// lostStart is, for a process_start whose first try's agent-box died
// before it answered, the try that answers for it as a cut one would:
// from the run whose record carries the id (StartedBy), probed again if
// the call has a ready probe. nil: another tool, or no run carries it.
// Its answer is not stored: the dead claim stays, and each repeat looks
// again.
func (m *Manager) lostStart(r Repeatable, lost *journal.LostError) *try {
	if r.Tool != "process_start" {
		return nil
	}
	name, _ := r.Args["name"].(string)
	res, ok := m.StartedBy(name, r.ID)
	if !ok {
		return nil
	}
	return &try{again: &cut{RunID: res.Run.RunID}, began: lost.At}
}

// A try is one go of a repeatable call (Once) at the runs call that
// applies it (Start, Write), which the call's ctx carries through the
// front end's handler. It goes both ways: the call says there that a
// wait of its was cut, and a repeat tells it there to apply nothing and
// wait again.
type try struct {
	// again, on a repeat whose first try's wait was cut, is what that try
	// did; began, when it began (the journal's claim, the box's clock).
	again *cut
	began time.Time
	// cut is set by the call when ctx cut its wait short.
	cut *cut
}

// cut is what a call whose wait was cut did before it, all that a repeat
// needs to wait again and answer as the whole call would have. It is
// stored in the journal (journal.Answer.Cut).
type cut struct {
	RunID  string `json:"run_id"`           // the run started, or written to
	Reused bool   `json:"reused,omitempty"` // Start: the run was reused (IfRunning)
	// Write: where its output begins (the log's end before the write),
	// and what it wrote.
	From    int64 `json:"from,omitempty"`
	Written int   `json:"written,omitempty"`
	Closed  bool  `json:"closed,omitempty"`
}

type tryKey struct{}

// tryOf is the try ctx carries, or nil.
func tryOf(ctx context.Context) *try {
	t, _ := ctx.Value(tryKey{}).(*try)
	return t
}

// run runs apply as t, and gives its answer, marked cut when the call's
// wait was.
func (t *try) run(ctx context.Context, apply func(context.Context) []byte) journal.Answer {
	a := journal.Answer{Body: apply(context.WithValue(ctx, tryKey{}, t))}
	if t.cut != nil {
		a.Cut, _ = json.Marshal(t.cut)
	}
	return a
}

// cutShort notes on ctx's try, if any, that the call's wait was cut by
// ctx, after the call did c.
func cutShort(ctx context.Context, c cut) {
	if t := tryOf(ctx); t != nil {
		t.cut = &c
	}
}

// resumed is, for a repeat that waits again, what the cut try did and
// when it began, no later than now (the clock may have been set back);
// nil for any other call.
func resumed(ctx context.Context) (*cut, time.Time) {
	t := tryOf(ctx)
	if t == nil || t.again == nil {
		return nil, time.Time{}
	}
	if now := time.Now(); t.began.After(now) {
		return t.again, now
	}
	return t.again, t.began
}

// timeLeft is what is left at now of a wait of bound that began then:
// never below 0, nor above bound.
func timeLeft(bound time.Duration, began, now time.Time) time.Duration {
	return min(bound, max(0, bound-now.Sub(began)))
}

// withoutSecrets is args with secret_env's values blanked: the journal
// keeps a digest of the arguments, which must not let a run that reads it
// test guesses of another run's secrets.
func withoutSecrets(args map[string]any) map[string]any {
	se, ok := args["secret_env"].(map[string]any)
	if !ok {
		return args
	}
	out := maps.Clone(args)
	blank := make(map[string]any, len(se))
	for k := range se {
		blank[k] = ""
	}
	out["secret_env"] = blank
	return out
}

// StartedBy is the answer process_start would have given for the run of
// name that the start with request id started, found by its record
// (runrecord.Record.RequestID): for a repeat whose first try's agent-box
// died before it answered. false: no run of name carries id.
func (m *Manager) StartedBy(name, id string) (StartResult, bool) {
	if id == "" || runrecord.ValidName(name) != nil {
		return StartResult{}, false
	}
	ents, err := m.Store.List(name, nil)
	if err != nil {
		return StartResult{}, false
	}
	for _, e := range ents {
		if e.Record == nil || e.Record.RequestID != id {
			continue
		}
		run, err := m.Get(name, e.RunID)
		if err != nil {
			return StartResult{}, false
		}
		return StartResult{Run: run}, true
	}
	return StartResult{}, false
}
