package runs

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/supervisor"
)

// askSupervisor has the run's live supervisor send sig and, with a grace,
// the SIGKILL after it (supervisor.Kill): the supervisor outlives this
// server, which dies with its SSH connection, and a SIGKILL it still owed
// would die with it. It asks only where Kill itself may signal (the same
// guard as signalRun's), and the socket's peer must be the recorded
// supervisor, which probe found alive and saying it supervises this run.
//
// nil means the supervisor signalled nothing, or may have: there is none
// alive, it predates the control socket, the socket is not its, or it did
// not answer. The caller then signals the run itself and waits out the
// grace itself, as before the supervisor could. After no answer the run
// may get the signal twice, which only matters to a handler that counts
// them; a kill that is not carried out at all would matter more.
func (m *Manager) askSupervisor(run Run, sig unix.Signal, grace time.Duration) *supervisor.Killing {
	if run.rec == nil || !run.supAlive || !run.Verdict.Signalable || !m.Sys.Self.MayBeRun(run.PID) {
		return nil
	}
	k, err := supervisor.Kill(m.Store.RunDir(run.Name, run.RunID), run.rec.SupervisorPID, sig, grace)
	if err != nil {
		m.logf("process_kill of run %s: signalling it from this server: %v", run.RunID, err)
		return nil
	}
	return k
}

// escalated waits out the grace after the first signal and says whether
// SIGKILL followed. When the supervisor took the kill it is its to send,
// and this only waits for its word; when it did not, or went quiet during
// the grace (it was killed), this server sends it at the grace's end.
func (m *Manager) escalated(asked *supervisor.Killing, name, runID string, grace time.Duration) bool {
	since := time.Now()
	if asked != nil {
		esc, err := asked.Wait()
		if err == nil {
			return esc
		}
		m.logf("process_kill of run %s: the supervisor said nothing after the signal (%v); this server sends the SIGKILL", runID, err)
		grace -= time.Since(since)
	}
	if m.waitGroupGone(name, runID, grace) {
		return false
	}
	// Re-identify before escalating: the processes must still be ours.
	again, err := m.Get(name, runID)
	if err != nil {
		return false
	}
	again = m.settled(again)
	if !again.Verdict.Signalable {
		return false
	}
	g, o, err := m.signalRun(again, unix.SIGKILL)
	return err == nil && (g || len(o) > 0)
}
