package supervisor

import (
	"errors"
	"sync"
)

// group runs actors together the way oklog/run's Group composes a program:
// each actor is an execute, which blocks until its work is done or it is
// interrupted, paired with an interrupt, which makes that execute return.
// The first execute to return ends the group: every interrupt is then
// called, one after the other in the order the actors were added — the
// teardown order — and Run returns once every execute has.
//
// Unlike oklog/run's, an interrupt here may wait for its actor to stop,
// so that the next one is interrupted only after it (an escalation tells
// the kills in their grace that the run is gone before the control socket
// closes); and Run returns every actor's error, not only the first.
type group struct {
	actors []actor
}

type actor struct {
	execute   func() error
	interrupt func(error) // nil: the actor ends on its own
}

// Add adds an actor. interrupt may be nil for an actor that cannot be
// interrupted and ends on its own; it must be safe to call after execute
// has returned.
func (g *group) Add(execute func() error, interrupt func(error)) {
	g.actors = append(g.actors, actor{execute, interrupt})
}

// Run runs every actor, interrupts all of them in order once the first
// returns, and returns when all have, with their errors, the first's
// first.
func (g *group) Run() error {
	if len(g.actors) == 0 {
		return nil
	}
	errs := make(chan error, len(g.actors))
	for _, a := range g.actors {
		go func() { errs <- a.execute() }()
	}
	first := <-errs
	for _, a := range g.actors {
		if a.interrupt != nil {
			a.interrupt(first)
		}
	}
	all := []error{first}
	for range len(g.actors) - 1 {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// all is one execute made of several that end on their own: it runs them
// together and returns once every one has, with their errors.
func all(executes ...func() error) func() error {
	return func() error {
		errs := make([]error, len(executes))
		var wg sync.WaitGroup
		for i, execute := range executes {
			wg.Go(func() { errs[i] = execute() })
		}
		wg.Wait()
		return errors.Join(errs...)
	}
}
