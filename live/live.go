// Package live gathers the facts runs decides on, from the live box: this
// boot and this process (Host), the processes of /proc as a run's rules
// ask about them (Procs), how supervisors can be started here (the
// systemd and logind facts of HostFacts), and when a run's facts may have
// changed (Watch: inotify on its directory). It reads and never decides:
// the rules over these facts are runs' (and outcome's).
//
// Linux only, as proc is.
package live

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/supervisor"
)

// Host is what holds while agent-box runs: read once at start-up.
type Host struct {
	Boot string       // the boot id: it cannot change while we run
	Self outcome.Self // this process: its pid, group and session do not change while we run
}

// ReadHost reads the boot id and this process's ids.
func ReadHost() (Host, error) {
	b, err := proc.BootID()
	if err != nil {
		return Host{}, err
	}
	pgid, err := unix.Getpgid(0)
	if err != nil {
		return Host{}, fmt.Errorf("reading own process group: %w", err)
	}
	sid, err := unix.Getsid(0)
	if err != nil {
		return Host{}, fmt.Errorf("reading own session: %w", err)
	}
	return Host{Boot: b, Self: outcome.Self{PID: os.Getpid(), PGID: pgid, SID: sid}}, nil
}

// Procs reads the processes of /proc.
type Procs struct {
	// Supervisors are the files genuine supervisors run (the
	// installation's agent-box and agent-box-supervisor).
	Supervisors *supervisor.Executables
}

// Probe says whether pid is the process that started at start, and when
// it is (Same), its stat, read in the same read.
func (Procs) Probe(pid int, start uint64) (outcome.Liveness, proc.Stat) {
	return proc.ProbeStat(pid, start)
}

// Processes lists the live processes (no zombies).
func (Procs) Processes() ([]proc.Stat, error) { return proc.Processes() }

// Children lists pid's children.
func (Procs) Children(pid int) ([]int, error) { return proc.Children(pid) }

// GroupAlive reports whether process group pgid may have a member:
// kill(-pgid, 0) did not say ESRCH.
func (Procs) GroupAlive(pgid int) bool {
	return pgid > 0 && !errors.Is(unix.Kill(-pgid, 0), unix.ESRCH)
}

// EnvironHas reports whether pid's environment from its exec holds every
// one of kvs ("KEY=value"); false when it cannot be read.
func (Procs) EnvironHas(pid int, kvs ...string) bool {
	ok, err := proc.EnvironHas(pid, kvs...)
	return err == nil && ok
}

// IsSupervisor reports whether p is a genuine supervisor of some run
// (supervisor.Executables.IsSupervisor).
func (s Procs) IsSupervisor(p proc.Stat) bool { return s.Supervisors.IsSupervisor(p) }

// SupervisorOf says what p, found to be the recorded supervisor by its
// start time, is now: Same when its command line says it supervises run
// name/runID (supervisor.IsSupervisorOf), Gone when it has exited since,
// Foreign when it is alive and says otherwise.
func (Procs) SupervisorOf(p proc.Stat, name, runID string) outcome.Liveness {
	argv, err := proc.Cmdline(p.PID)
	if err != nil || len(argv) == 0 {
		return outcome.Gone // exited since p was read: a zombie has no command line
	}
	if supervisor.IsSupervisorOf(p, argv, name, runID) {
		return outcome.Same
	}
	return outcome.Foreign
}

// Usage is what pid uses now, if it is the process that started at start
// (proc.ReadUsage); an error when it is gone or another.
func (Procs) Usage(pid int, start uint64) (proc.Usage, error) { return proc.ReadUsage(pid, start) }
