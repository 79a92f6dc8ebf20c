package tools

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/logread"
	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/runs"
)

// The input schemas are written by hand (schema.go), the rules they
// describe live in runs and logread: every bound, default and enum a
// schema states is pinned here to the constant the rule uses, so that a
// changed rule cannot leave the model reading an old one.
func TestSchemaStatesTheRules(t *testing.T) {
	ms := func(d time.Duration) int64 { return d.Milliseconds() }
	pins := []struct {
		tool, path, key string
		want            any
	}{
		{"process_start", "timeout_s", "maximum", int64(runs.MaxTimeoutS)},
		{"process_start", "max_log_bytes", "maximum", runs.MaxMaxLogBytes},
		{"process_start", "ready_timeout_s", "maximum", int64(runs.MaxReadyTimeout / time.Second)},
		{"process_start", "cols", "default", int64(runs.DefaultCols)},
		{"process_start", "rows", "default", int64(runs.DefaultRows)},
		{"process_resize", "cols", "minimum", int64(runs.MinCols)},
		{"process_resize", "cols", "maximum", int64(runs.MaxCols)},
		{"process_resize", "rows", "minimum", int64(runs.MinRows)},
		{"process_resize", "rows", "maximum", int64(runs.MaxRows)},
		{"process_restart", "grace_ms", "maximum", ms(runs.MaxGrace)},
		{"process_restart", "grace_ms", "default", ms(runs.DefaultRestartGrace)},
		{"process_list", "limit", "minimum", int64(1)},
		{"process_list", "limit", "maximum", int64(runs.MaxListLimit)},
		{"process_list", "limit", "default", int64(runs.DefaultListLimit)},
		{"process_list", "state", "enum", []outcome.State{outcome.Running, outcome.Exited, outcome.Unknown}},
		{"process_kill", "signal", "enum", runs.SignalNames},
		{"process_kill", "grace_ms", "maximum", ms(runs.MaxGrace)},
		{"tail_log", "max_bytes", "maximum", int64(logread.MaxWindow)},
		{"tail_log", "max_bytes", "default", int64(runs.DefaultTailBytes)},
		{"tail_log", "wait_ms", "maximum", ms(runs.MaxWait)},
		{"tail_log", "tail_lines", "maximum", int64(logread.MaxTailLines)},
		{"tail_log", "grep", "maxLength", int64(runs.MaxGrepBytes)},
		{"tail_log", "context", "minimum", int64(0)},
		{"tail_log", "context", "maximum", int64(logread.MaxContext)},
		{"tail_log", "until", "maxLength", int64(runs.MaxGrepBytes)},
		{"tail_log", "idle_ms", "minimum", int64(0)},
		{"tail_log", "idle_ms", "maximum", ms(runs.MaxWait)},
		{"process_write", "wait_ms", "minimum", int64(0)},
		{"process_write", "wait_ms", "maximum", ms(runs.MaxWait)},
		{"process_write", "until", "maxLength", int64(runs.MaxGrepBytes)},
		{"process_write", "idle_ms", "minimum", int64(0)},
		{"process_write", "idle_ms", "maximum", ms(runs.MaxWait)},
		{"process_wait", "timeout_ms", "maximum", ms(runs.MaxWaitTimeout)},
		{"process_wait", "timeout_ms", "default", ms(runs.DefaultWaitPolicy.Default)},
		{"process_wait", "names", "maxItems", int64(runs.MaxWaitNames)},
	}
	s := server.NewMCPServer("t", "0")
	(&Handlers{}).Register(s)
	for _, p := range pins {
		t.Run(p.tool+"."+p.path+"."+p.key, func(t *testing.T) {
			st := s.GetTool(p.tool)
			require.NotNil(t, st, "tool %s", p.tool)
			var in struct {
				Properties map[string]map[string]json.RawMessage `json:"properties"`
			}
			require.NoError(t, json.Unmarshal(st.Tool.RawInputSchema, &in))
			got, ok := in.Properties[p.path][p.key]
			require.True(t, ok, "%s has no %s.%s", p.tool, p.path, p.key)
			want, err := json.Marshal(p.want)
			require.NoError(t, err)
			assert.JSONEq(t, string(want), string(got), fmt.Sprintf("%s: %s.%s", p.tool, p.path, p.key))
		})
	}
}

// The grep description states the cut of a line: the constant runs uses.
func TestGrepDescriptionStatesTheLineCut(t *testing.T) {
	s := server.NewMCPServer("t", "0")
	(&Handlers{}).Register(s)
	var in struct {
		Properties map[string]struct {
			Description string `json:"description"`
		} `json:"properties"`
	}
	require.NoError(t, json.Unmarshal(s.GetTool("tail_log").Tool.RawInputSchema, &in))
	assert.Contains(t, in.Properties["grep"].Description, fmt.Sprintf("cut at %d bytes", runs.GrepLineBytes))
}

// process_start's limits state their bounds: the constants runs checks.
func TestLimitsSchemaStatesTheRules(t *testing.T) {
	s := server.NewMCPServer("t", "0")
	(&Handlers{}).Register(s)
	var in struct {
		Properties struct {
			Limits struct {
				Properties map[string]map[string]json.RawMessage `json:"properties"`
			} `json:"limits"`
		} `json:"properties"`
	}
	require.NoError(t, json.Unmarshal(s.GetTool("process_start").Tool.RawInputSchema, &in))
	p := in.Properties.Limits.Properties
	assert.JSONEq(t, fmt.Sprint(runs.MinMemoryMB), string(p["memory_mb"]["minimum"]))
	assert.JSONEq(t, fmt.Sprint(runs.MaxMemoryMB), string(p["memory_mb"]["maximum"]))
	assert.JSONEq(t, fmt.Sprint(runs.MaxPids), string(p["pids"]["maximum"]))
	assert.JSONEq(t, "1", string(p["cpu_percent"]["minimum"]))
	assert.JSONEq(t, "1", string(p["pids"]["minimum"]))
	for _, bad := range []runs.Limits{{MemoryMB: runs.MinMemoryMB - 1}, {CPUPercent: -1}, {Pids: -1}} {
		assert.ErrorIs(t, runs.CheckLimits(bad), runs.ErrInvalid, "%+v", bad)
	}
	assert.NoError(t, runs.CheckLimits(runs.Limits{MemoryMB: runs.MinMemoryMB, CPUPercent: 1, Pids: 1}))
}
