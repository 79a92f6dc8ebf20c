package supervisor

import (
	"bufio"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// controlServerFor serves the control socket in a dir of its own, with
// loop playing the escalation: it gets each order.
func controlServerFor(t *testing.T, loop func(o killOrder)) (dir string, s *controlServer) {
	t.Helper()
	dir = t.TempDir()
	s, err := serveControl(dir)
	require.NoError(t, err)
	go func() {
		for {
			select {
			case o := <-s.orders:
				loop(o)
			case <-s.done:
				return
			}
		}
	}()
	t.Cleanup(s.Close)
	return dir, s
}

// A kill request reaches the escalation as asked, the first answer says what
// was signalled, and an armed kill's second answer says whether SIGKILL
// followed.
func TestKillRequestAndItsTwoAnswers(t *testing.T) {
	t.Parallel()
	got := make(chan killOrder, 1)
	dir, _ := controlServerFor(t, func(o killOrder) {
		got <- o
		o.reply <- KillReply{Group: 500, Outside: []int{510}, Armed: true}
		o.outcome <- KillOutcome{Escalated: true}
	})
	k, err := Kill(dir, os.Getpid(), unix.SIGINT, 1500*time.Millisecond)
	require.NoError(t, err)
	defer k.Close()
	o := <-got
	assert.Equal(t, unix.SIGINT, o.sig)
	assert.Equal(t, 1500*time.Millisecond, o.grace)
	assert.Equal(t, KillReply{Group: 500, Outside: []int{510}, Armed: true}, k.KillReply)
	esc, err := k.Wait()
	require.NoError(t, err)
	assert.True(t, esc)
}

// The run's end tells a kill still in its grace that no SIGKILL was
// needed.
func TestKillOutcomeWhenTheRunEnds(t *testing.T) {
	t.Parallel()
	dir, _ := controlServerFor(t, func(o killOrder) {
		o.reply <- KillReply{Group: 500, Armed: true}
		o.outcome <- KillOutcome{}
	})
	k, err := Kill(dir, os.Getpid(), unix.SIGTERM, time.Minute)
	require.NoError(t, err)
	defer k.Close()
	esc, err := k.Wait()
	require.NoError(t, err)
	assert.False(t, esc)
}

// A supervisor that goes without a word after taking an armed kill (it
// was killed) leaves the outcome unknown, ErrNoOutcome: the caller sees to
// the SIGKILL itself.
func TestKillOutcomeUnknownWhenTheSupervisorGoes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ln, err := listenUnix(filepath.Join(dir, ControlSocket))
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		bufio.NewReader(c).ReadBytes('\n')
		c.Write([]byte(`{"group":500,"armed":true}` + "\n"))
		c.Close()
	}()
	k, err := Kill(dir, os.Getpid(), unix.SIGTERM, time.Minute)
	require.NoError(t, err)
	defer k.Close()
	_, err = k.Wait()
	assert.ErrorIs(t, err, ErrNoOutcome)
}

// Once the supervisor takes no more orders (its run has ended), a request
// is answered with an error, as nothing was signalled.
func TestKillRequestAfterTheRunEnded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := serveControl(dir)
	require.NoError(t, err)
	defer s.Close()
	s.stopOrders() // as Close does first, with the listener still open
	_, err = Kill(dir, os.Getpid(), unix.SIGTERM, 0)
	assert.ErrorIs(t, err, ErrNoControl)
}

// A request is taken only by the supervisor the record names: a socket
// another process serves (planted by the run's own command) is refused
// before anything is sent, as is a symlink, and a dir without the socket
// (a supervisor from before it) is ErrNoControl too.
func TestKillRequestOnlyToTheSupervisor(t *testing.T) {
	t.Parallel()
	dir, _ := controlServerFor(t, func(o killOrder) {
		t.Errorf("an order reached the escalation: %+v", o)
		o.reply <- KillReply{}
	})
	_, err := Kill(dir, os.Getpid()+1, unix.SIGTERM, 0)
	assert.ErrorIs(t, err, ErrNoControl, "served by another pid")

	link := t.TempDir()
	require.NoError(t, os.Symlink(filepath.Join(dir, ControlSocket), filepath.Join(link, ControlSocket)))
	_, err = Kill(link, os.Getpid(), unix.SIGTERM, 0)
	assert.ErrorIs(t, err, ErrNoControl, "a symlink")

	_, err = Kill(t.TempDir(), os.Getpid(), unix.SIGTERM, 0)
	assert.ErrorIs(t, err, ErrNoControl, "no socket")
}
