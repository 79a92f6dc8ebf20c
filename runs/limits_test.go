package runs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/cgroup"
	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/runrecord"
)

// An exit the memory cap caused reads as such, whether the leader itself
// was killed or only one of its children was; a kill without the cgroup's
// count is just a kill.
func TestDescribeOutOfMemory(t *testing.T) {
	t.Parallel()
	code := 137
	limited := &runrecord.Limits{MemoryMB: 64}
	for _, tc := range []struct {
		exit   runrecord.Exit
		limits *runrecord.Limits
		want   string
	}{
		{runrecord.Exit{Signal: "SIGKILL", OOMKilled: true}, limited, "killed by SIGKILL: out of memory (limit 64 MiB)"},
		{runrecord.Exit{Code: &code, OOMKilled: true}, limited, "exit code 137; out of memory: the kernel killed a process of the run (limit 64 MiB)"},
		{runrecord.Exit{Signal: "SIGKILL"}, limited, "killed by SIGKILL"},
		{runrecord.Exit{Signal: "SIGKILL", OOMKilled: true}, nil, "killed by SIGKILL: out of memory"},
		{runrecord.Exit{Signal: "SIGTERM", OOMKilled: true}, limited, "killed by SIGTERM; out of memory: the kernel killed a process of the run (limit 64 MiB)"},
		{runrecord.Exit{Signal: "SIGKILL", OOMKilled: true, TimedOut: true}, limited, "killed by SIGKILL (timed out after 0s); out of memory: the kernel killed a process of the run (limit 64 MiB)"},
		{runrecord.Exit{Code: &code, PidsMaxHit: 3}, &runrecord.Limits{Pids: 8}, "exit code 137; 3 forks refused at its pids cap of 8"},
		{runrecord.Exit{Code: &code, PidsMaxHit: 1}, nil, "exit code 137; 1 fork refused at its pids cap"},
		{runrecord.Exit{Code: &code, PidsMaxHit: -5}, nil, "exit code 137"},
	} {
		rec := &runrecord.Record{Exit: &tc.exit, OutputClosed: true, Spec: runrecord.Spec{Limits: tc.limits}}
		assert.Equal(t, tc.want, describe(outcome.ReasonExited, rec, nil, &Words{}))
	}
}

// Limits are laid over the defaults field by field, checked, and refused
// with the reason where the box cannot enforce them; no limits at all
// need no cgroup.
func TestApplyLimits(t *testing.T) {
	t.Parallel()
	none := func() (*cgroup.Hierarchy, error) { return nil, cgroup.ErrUnavailable }
	m := &Manager{DefaultLimits: &runrecord.Limits{MemoryMB: 512, Pids: 100}, Cgroups: none}
	req := &StartRequest{Spec: Spec{Limits: &runrecord.Limits{Pids: 10}}}
	err := m.applyLimits(req)
	require.ErrorIs(t, err, ErrLimitUnavailable)
	assert.Contains(t, err.Error(), "memory_mb=512,pids=10")
	assert.Nil(t, req.Limits, "refused: nothing to start with")

	ok := func() (*cgroup.Hierarchy, error) {
		return &cgroup.Hierarchy{Dirs: map[string]string{"memory": t.TempDir(), "cpu": t.TempDir(), "pids": t.TempDir()}}, nil
	}
	m.Cgroups = ok
	req = &StartRequest{Spec: Spec{Limits: &runrecord.Limits{Pids: 10, CPUPercent: 50}}}
	require.NoError(t, m.applyLimits(req))
	assert.Equal(t, &runrecord.Limits{MemoryMB: 512, Pids: 10, CPUPercent: 50}, req.Limits)

	// cgroup v2: only a scope systemd delegates can be capped.
	v2root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(v2root, "cgroup.controllers"), []byte("cpu memory pids\n"), 0o644))
	v2 := func() (*cgroup.Hierarchy, error) {
		return &cgroup.Hierarchy{V2: true, Root: v2root, Dirs: map[string]string{"": v2root}}, nil
	}
	m = &Manager{Cgroups: v2, SystemdScopes: func() error { return errors.New("systemd is not running here") }}
	err = m.applyLimits(&StartRequest{Spec: Spec{Limits: &runrecord.Limits{Pids: 10}}})
	require.ErrorIs(t, err, ErrLimitUnavailable)
	assert.Contains(t, err.Error(), "under cgroup v2 a run with limits needs a group of its own, which agent-box gets from systemd (systemd-run --scope -p Delegate=yes): systemd is not running here")
	if os.Geteuid() == 0 {
		m.SystemdScopes = func() error { return nil }
		req = &StartRequest{Spec: Spec{Limits: &runrecord.Limits{Pids: 10}}}
		require.NoError(t, m.applyLimits(req))
		assert.True(t, req.delegate, "the supervisor is to get a delegated scope")
	}

	m = &Manager{Cgroups: none}
	req = &StartRequest{}
	require.NoError(t, m.applyLimits(req), "no limits, no cgroup needed")
	assert.Nil(t, req.Limits)
	req = &StartRequest{Spec: Spec{Limits: &runrecord.Limits{MemoryMB: 4}}}
	require.ErrorIs(t, m.applyLimits(req), ErrInvalid)
	assert.True(t, errors.Is(m.applyLimits(&StartRequest{Spec: Spec{Limits: &runrecord.Limits{CPUPercent: 1 << 20}}}), ErrInvalid))
}

// ParseLimits reads what DescribeLimits writes, and says what is wrong.
func TestParseLimits(t *testing.T) {
	t.Parallel()
	l, err := ParseLimits("memory_mb=256, cpu_percent=50,pids=20")
	require.NoError(t, err)
	assert.Equal(t, runrecord.Limits{MemoryMB: 256, CPUPercent: 50, Pids: 20}, l)
	assert.Equal(t, "memory_mb=256,cpu_percent=50,pids=20", DescribeLimits(l))
	for _, s := range []string{"", "none"} {
		l, err := ParseLimits(s)
		require.NoError(t, err)
		assert.True(t, l.Zero())
	}
	_, err = ParseLimits("memory=5")
	assert.ErrorContains(t, err, `unknown key "memory"`)
	_, err = ParseLimits("pids=lots")
	assert.ErrorContains(t, err, `"pids=lots" is not key=number`)
	_, err = ParseLimits("pids=5,pids=6")
	assert.ErrorContains(t, err, "pids is given twice")
	_, err = ParseLimits("memory_mb=1")
	assert.ErrorContains(t, err, "limits.memory_mb 1 is out of range 8..")
}
