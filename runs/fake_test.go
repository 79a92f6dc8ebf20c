package runs

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/live"
	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/proc"
)

// fakeProcs is the one fake of Procs, with function fields: each test
// sets the facts it is about. A nil field answers as a box whose probed
// pids are gone, where no scan finds anything, whose processes carry the
// run's id (EnvironHas) and whose recorded supervisors say they supervise
// their run, and where no usage can be read.
type fakeProcs struct {
	probe        func(pid int, start uint64) (outcome.Liveness, proc.Stat)
	processes    func() ([]proc.Stat, error)
	children     func(pid int) ([]int, error)
	groupAlive   func(pgid int) bool
	supervisorOf func(p proc.Stat, name, runID string) outcome.Liveness
	environHas   func(pid int, kvs ...string) bool
	isSupervisor func(p proc.Stat) bool
	usage        func(pid int, start uint64) (proc.Usage, error)
}

var _ Procs = (*fakeProcs)(nil)

func (f *fakeProcs) Probe(pid int, start uint64) (outcome.Liveness, proc.Stat) {
	if f.probe == nil {
		return outcome.Gone, proc.Stat{}
	}
	return f.probe(pid, start)
}

func (f *fakeProcs) Processes() ([]proc.Stat, error) {
	if f.processes == nil {
		return nil, nil
	}
	return f.processes()
}

func (f *fakeProcs) Children(pid int) ([]int, error) {
	if f.children == nil {
		return nil, nil
	}
	return f.children(pid)
}

func (f *fakeProcs) GroupAlive(pgid int) bool {
	return f.groupAlive != nil && f.groupAlive(pgid)
}

func (f *fakeProcs) SupervisorOf(p proc.Stat, name, runID string) outcome.Liveness {
	if f.supervisorOf == nil {
		return outcome.Same
	}
	return f.supervisorOf(p, name, runID)
}

func (f *fakeProcs) EnvironHas(pid int, kvs ...string) bool {
	return f.environHas == nil || f.environHas(pid, kvs...)
}

func (f *fakeProcs) IsSupervisor(p proc.Stat) bool {
	return f.isSupervisor != nil && f.isSupervisor(p)
}

func (f *fakeProcs) Usage(pid int, start uint64) (proc.Usage, error) {
	if f.usage == nil {
		return proc.Usage{}, proc.ErrNoProcess
	}
	return f.usage(pid, start)
}

// fakeSystem is p on boot "boot", deciding as process 7 (its own group
// and session), with a Signal that fails the test by panicking: the rules
// under test must not signal.
func fakeSystem(p *fakeProcs) System {
	return System{
		Host:  live.Host{Boot: "boot", Self: outcome.Self{PID: 7, PGID: 7, SID: 7}},
		Procs: p,
		Signal: func(pid int, sig unix.Signal) error {
			panic(fmt.Sprintf("the fake system was signalled: %d with %v", pid, sig))
		},
	}
}

// fakeSys is the system where probe says which recorded pids are alive:
// a live one is in the session of the supervisor that record() names, as
// a run's leader is.
func fakeSys(probe func(pid int, start uint64) outcome.Liveness) System {
	return fakeSystem(&fakeProcs{probe: func(pid int, start uint64) (outcome.Liveness, proc.Stat) {
		return probe(pid, start), proc.Stat{PID: pid, SID: 99}
	}})
}

// gone and alive are fakeSys's probes where every pid is gone, or alive.
func gone(int, uint64) outcome.Liveness  { return outcome.Gone }
func alive(int, uint64) outcome.Liveness { return outcome.Same }
