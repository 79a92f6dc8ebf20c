package supervisor

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The first actor to return ends the group: the others are interrupted in
// the order they were added, each interrupt done before the next begins,
// and Run returns once every actor has, with all their errors.
func TestGroupInterruptsInOrderOnceTheFirstReturns(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var order []string
	say := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, s)
	}
	course := make(chan struct{})
	errCourse, errB := errors.New("course"), errors.New("b")
	var g group
	g.Add(func() error { <-course; say("course ends"); return errCourse }, nil)
	for _, name := range []string{"a", "b", "c"} {
		stop, stopped := make(chan struct{}), make(chan struct{})
		g.Add(func() error {
			defer close(stopped)
			<-stop
			say(name + " stops")
			if name == "b" {
				return errB
			}
			return nil
		}, func(err error) {
			assert.ErrorIs(t, err, errCourse, "the interrupt is told why")
			close(stop)
			<-stopped
		})
	}
	done := make(chan error)
	go func() { done <- g.Run() }()
	close(course)
	err := <-done
	assert.Equal(t, []string{"course ends", "a stops", "b stops", "c stops"}, order)
	assert.ErrorIs(t, err, errCourse)
	assert.ErrorIs(t, err, errB)
}

// all returns once every one of its executes has, with their errors.
func TestAllWaitsForEveryOne(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var ended sync.WaitGroup
	ended.Add(2)
	errA := errors.New("a")
	run := all(
		func() error { defer ended.Done(); return errA },
		func() error { defer ended.Done(); <-release; return nil },
	)
	done := make(chan error)
	go func() { done <- run() }()
	select {
	case <-done:
		t.Fatal("all returned before its second execute")
	default:
	}
	close(release)
	assert.ErrorIs(t, <-done, errA)
	ended.Wait()
	var empty group
	assert.NoError(t, empty.Run())
}
