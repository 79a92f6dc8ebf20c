package runs

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/capture"
)

// DefaultRestartGrace is how long process_restart lets a run end after
// SIGTERM before it sends SIGKILL.
const DefaultRestartGrace = 5 * time.Second

// restartSettle bounds the wait, after the kill, for the old run to be
// over (its exit recorded, its survivors gone).
const restartSettle = 5 * time.Second

// RestartRequest is process_restart's arguments.
type RestartRequest struct {
	Name  string
	Grace *time.Duration // nil: DefaultRestartGrace
	// SecretEnv gives again the secret values the run was started with:
	// agent-box never stores them, only their names.
	SecretEnv map[string]string
	// RequestID goes into the new run's record, as StartRequest's.
	RequestID string
	// Watched and Progress are as in StartRequest, for the wait of the
	// readiness probe the run was started with (recorded in its spec).
	Watched  bool
	Progress func(elapsed time.Duration, running []string)
}

// RestartResult is the new run, and the old one as it ended.
type RestartResult struct {
	StartResult
	Previous Run  `json:"previous"`
	Stopped  bool `json:"stopped,omitempty" jsonschema:"the previous run was running and was stopped"`
}

// Restart stops the newest run of a name if it is running (TERM, grace,
// KILL: as Kill) and starts its spec again as a new run of the same name,
// waiting for its readiness probe as process_start did. The old run's
// record and log stay.
//
// A repeat (Once) whose first try's ready wait was cut stops and starts
// nothing: it probes the run that try started again (restartedBefore).
func (m *Manager) Restart(ctx context.Context, req RestartRequest) (RestartResult, error) {
	if c, began := resumed(ctx); c != nil {
		return m.restartedBefore(ctx, req, c, began)
	}
	grace := DefaultRestartGrace
	if req.Grace != nil {
		grace = *req.Grace
	}
	if err := m.checkGrace(grace); err != nil {
		return RestartResult{}, err
	}
	prev, err := m.Get(req.Name, "")
	if err != nil {
		return RestartResult{}, err
	}
	spec, err := respec(prev, req.SecretEnv)
	if err != nil {
		return RestartResult{}, err
	}
	// The spec comes from a record, which anyone who can write the state
	// dir may have edited: it is checked as a request is, and before the
	// old run is stopped, so that a spec that can no longer start (its cwd
	// gone, its program off the PATH) leaves the old run running.
	check := spec
	err = check.normalize(m.home(), m.arg)
	if err == nil {
		_, _, _, err = check.program(m.Env)
	}
	if err != nil {
		return RestartResult{}, maskSecrets(fmt.Errorf("run %s of %q cannot be started again as it was: %w", prev.RunID, prev.Name, err), req.SecretEnv)
	}
	spec.RequestID, spec.Watched, spec.Progress = req.RequestID, req.Watched, req.Progress
	res := RestartResult{Previous: prev}
	if prev.Verdict.MayBeAlive {
		if _, err := m.Kill(req.Name, prev.RunID, unix.SIGTERM, grace); err != nil {
			return RestartResult{}, fmt.Errorf("stopping run %s: %w", prev.RunID, err)
		}
		res.Stopped = true
		res.Previous = m.waitUntil(req.Name, prev.RunID, restartSettle, func(r Run) bool { return !r.Verdict.MayBeAlive }, prev)
	}
	if res.StartResult, err = m.Start(ctx, spec); err != nil {
		return RestartResult{}, fmt.Errorf("starting %q again: %w", req.Name, err)
	}
	res.noteCut(ctx)
	return res, nil
}

// noteCut adds to the cut that Start noted on ctx's try, if its ready
// wait was cut, what a repeat needs to answer as the whole restart would
// have: the previous run, and whether it was stopped.
func (res *RestartResult) noteCut(ctx context.Context) {
	if t := tryOf(ctx); t != nil && t.cut != nil {
		t.cut.Previous, t.cut.Stopped = res.Previous.RunID, res.Stopped
	}
}

// restartedBefore answers a repeat of a restart whose first try, which
// began then, was cut in its ready wait: the run that try started is
// answered as a repeat of its start is (startedBefore), with the probe its
// record holds, for what is left of the call's bound.
func (m *Manager) restartedBefore(ctx context.Context, req RestartRequest, c *cut, began time.Time) (RestartResult, error) {
	res := RestartResult{Stopped: c.Stopped}
	var err error
	if c.Previous != "" {
		if res.Previous, err = m.Get(req.Name, c.Previous); err != nil {
			return RestartResult{}, err
		}
	}
	run, err := m.Get(req.Name, c.RunID)
	if err != nil {
		return RestartResult{}, err
	}
	spec := StartRequest{Name: req.Name, Watched: req.Watched, Progress: req.Progress}
	if run.rec != nil {
		spec.Spec = run.rec.Spec
	}
	if res.StartResult, err = m.startedBefore(ctx, spec, c, began); err != nil {
		return RestartResult{}, err
	}
	res.noteCut(ctx)
	return res, nil
}

// respec is the StartRequest that runs prev's spec again.
func respec(prev Run, secretEnv map[string]string) (StartRequest, error) {
	rec := prev.rec
	if rec == nil {
		return StartRequest{}, fmt.Errorf("%w: the record of run %s of %q cannot be read (%s), so its spec is not known; start it with process_start",
			ErrNotFound, prev.RunID, prev.Name, prev.Reason)
	}
	want := slices.Sorted(slices.Values(rec.SecretEnv))
	if got := slices.Sorted(maps.Keys(secretEnv)); !slices.Equal(got, want) {
		if len(want) == 0 {
			return StartRequest{}, invalid("run %s of %q had no secret_env; leave it out", prev.RunID, prev.Name)
		}
		return StartRequest{}, invalid("run %s of %q was started with secret_env %s, whose values agent-box never stores: give them again as secret_env",
			prev.RunID, prev.Name, strings.Join(want, ", "))
	}
	spec := StartRequest{Name: prev.Name, Spec: rec.Spec, SecretEnv: secretEnv}
	if len(want) > 0 {
		// A secret's value inside the command, argv, cwd or env was
		// recorded masked: running the record would run the mask.
		held := false
		mapSecretPlaces(rec.Spec, func(s string) string {
			held = held || strings.Contains(s, capture.Mask)
			return s
		})
		if held {
			return StartRequest{}, invalid("run %s of %q held a secret's value in its command, argv, cwd, env or ready probe, recorded as %s; start it again with process_start",
				prev.RunID, prev.Name, capture.Mask)
		}
	}
	return spec, nil
}
