package supervisor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// signalCall is one signal the escalation sent.
type signalCall struct {
	sig          unix.Signal
	leaderReaped bool
}

// testEscalation is an escalation whose signals reach no process: each is
// told on the returned channel, and reaches the group (group: true).
func testEscalation(t *testing.T, graceMS int) (e *escalation, expired chan struct{}, reaped chan leaderExit, calls chan signalCall) {
	t.Helper()
	expired, reaped, calls = make(chan struct{}), make(chan leaderExit, 1), make(chan signalCall, 8)
	s := &supervisor{spec: Spec{KillGraceMS: graceMS}}
	e = s.newEscalation(4242, expired, reaped)
	e.signal = func(sig unix.Signal, leaderReaped bool) (bool, []int) {
		calls <- signalCall{sig, leaderReaped}
		return true, nil
	}
	return e, expired, reaped, calls
}

// A leader reaped as the timeout comes exited on its own: whichever of the
// two select takes, the exit is taken first, says no timeout, and the TERM
// goes out as to a run whose leader is reaped (its pid may be reused).
func TestEscalationTakesTheExitBeforeTheTimeout(t *testing.T) {
	t.Parallel()
	for range 50 {
		e, expired, reaped, calls := testEscalation(t, 0)
		reaped <- leaderExit{}
		close(expired)
		go e.execute()
		le := <-e.exits
		assert.False(t, le.timedOut, "an exit that came with the timeout")
		c := <-calls
		assert.Equal(t, signalCall{unix.SIGTERM, true}, c)
		e.interrupt(nil)
	}
}

// The timeout's TERM before the leader's exit: the exit says the timeout
// came, and the SIGKILL at the grace's end goes out as to a run whose
// leader is reaped.
func TestEscalationTimeoutThenExit(t *testing.T) {
	t.Parallel()
	// The grace is long enough for the exit to be told before it ends.
	e, expired, reaped, calls := testEscalation(t, 300)
	go e.execute()
	defer e.interrupt(nil)
	close(expired)
	assert.Equal(t, signalCall{unix.SIGTERM, false}, <-calls)
	reaped <- leaderExit{}
	assert.True(t, (<-e.exits).timedOut)
	assert.Equal(t, signalCall{unix.SIGKILL, true}, <-calls)
}

// A process_kill with a grace is answered at once, and its outcome comes
// when the grace ends with a SIGKILL.
func TestEscalationKillWithGrace(t *testing.T) {
	t.Parallel()
	e, _, _, calls := testEscalation(t, 0)
	orders := make(chan killOrder)
	e.orders = orders
	go e.execute()
	defer e.interrupt(nil)
	o := killOrder{sig: unix.SIGINT, grace: 20 * time.Millisecond, reply: make(chan KillReply, 1), outcome: make(chan KillOutcome, 1)}
	orders <- o
	assert.Equal(t, KillReply{Group: 4242, Armed: true}, <-o.reply)
	assert.Equal(t, signalCall{unix.SIGINT, false}, <-calls)
	assert.Equal(t, KillOutcome{Escalated: true}, <-o.outcome)
	assert.Equal(t, signalCall{unix.SIGKILL, false}, <-calls)
}

// A kill still in its grace when the run ends is told that no SIGKILL was
// needed, before the escalation's interrupt returns (the control socket
// closes only after).
func TestEscalationTellsTheKillsInTheirGraceAtTheEnd(t *testing.T) {
	t.Parallel()
	e, _, _, calls := testEscalation(t, 0)
	orders := make(chan killOrder)
	e.orders = orders
	go e.execute()
	o := killOrder{sig: unix.SIGTERM, grace: time.Hour, reply: make(chan KillReply, 1), outcome: make(chan KillOutcome, 1)}
	orders <- o
	require.True(t, (<-o.reply).Armed)
	<-calls
	e.interrupt(nil)
	select {
	case out := <-o.outcome:
		assert.Equal(t, KillOutcome{}, out)
	default:
		t.Fatal("the interrupt returned before the kill was told")
	}
}

// A grace already running is not put off by a later one that would end
// after it: the SIGKILL a timeout or an earlier kill made due stays due.
func TestStartGraceKeepsTheEarlierEnd(t *testing.T) {
	t.Parallel()
	e := &escalation{}
	e.startGrace(time.Hour)
	first, ends := e.grace, e.graceEnds
	e.startGrace(2 * time.Hour)
	assert.True(t, e.grace == first && e.graceEnds.Equal(ends), "a later end replaced the earlier")
	e.startGrace(time.Millisecond)
	assert.True(t, e.graceEnds.Before(ends), "an earlier end is taken")
	<-e.grace
}
