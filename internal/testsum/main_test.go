package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A stream as go test -json writes it: one package passes with a skip,
// one fails; a build error comes as build-output.
const stream = `{"Action":"start","Package":"github.com/agent-box/agent-box/e2e"}
{"Action":"run","Package":"github.com/agent-box/agent-box/e2e","Test":"TestSSH"}
{"Action":"output","Package":"github.com/agent-box/agent-box/e2e","Test":"TestSSH","Output":"=== RUN   TestSSH\n"}
{"Action":"output","Package":"github.com/agent-box/agent-box/e2e","Test":"TestSSH","Output":"    ssh_test.go:40: sshd not installed\n"}
{"Action":"output","Package":"github.com/agent-box/agent-box/e2e","Test":"TestSSH","Output":"--- SKIP: TestSSH (0.00s)\n"}
{"Action":"skip","Package":"github.com/agent-box/agent-box/e2e","Test":"TestSSH"}
{"Action":"run","Package":"github.com/agent-box/agent-box/e2e","Test":"TestOK"}
{"Action":"output","Package":"github.com/agent-box/agent-box/e2e","Test":"TestOK","Output":"noise of a passing test\n"}
{"Action":"pass","Package":"github.com/agent-box/agent-box/e2e","Test":"TestOK"}
{"Action":"output","Package":"github.com/agent-box/agent-box/e2e","Output":"PASS\n"}
{"Action":"output","Package":"github.com/agent-box/agent-box/e2e","Output":"ok  \tgithub.com/agent-box/agent-box/e2e\t1.0s\n"}
{"Action":"pass","Package":"github.com/agent-box/agent-box/e2e"}
{"Action":"run","Package":"github.com/agent-box/agent-box/runs","Test":"TestBad"}
{"Action":"output","Package":"github.com/agent-box/agent-box/runs","Test":"TestBad","Output":"    x_test.go:9: wrong answer\n"}
{"Action":"fail","Package":"github.com/agent-box/agent-box/runs","Test":"TestBad"}
{"Action":"output","Package":"github.com/agent-box/agent-box/runs","Output":"FAIL\tgithub.com/agent-box/agent-box/runs\t0.1s\n"}
{"Action":"fail","Package":"github.com/agent-box/agent-box/runs"}
{"Action":"skip","Package":"github.com/agent-box/agent-box/internal/rawmcp"}
{"Action":"run","Package":"github.com/agent-box/agent-box/chaos","Test":"TestHang"}
{"Action":"output","Package":"github.com/agent-box/agent-box/chaos","Test":"TestHang","Output":"=== RUN   TestHang\n"}
{"Action":"output","Package":"github.com/agent-box/agent-box/chaos","Test":"TestHang","Output":"panic: test timed out after 10m0s\n"}
{"Action":"output","Package":"github.com/agent-box/agent-box/chaos","Test":"TestHang","Output":"\trunning tests:\n\t\tTestHang (10m0s)\n"}
{"Action":"output","Package":"github.com/agent-box/agent-box/chaos","Output":"FAIL\tgithub.com/agent-box/agent-box/chaos\t600.1s\n"}
{"Action":"fail","Package":"github.com/agent-box/agent-box/chaos"}
{"ImportPath":"x","Action":"build-output","Output":"# x\nx.go:1: syntax error\n"}
go: some plain line
`

func TestSummary(t *testing.T) {
	var out strings.Builder
	s := &summary{out: &out}
	assert.NoError(t, s.read(strings.NewReader(stream)))
	got := out.String()
	assert.Contains(t, got, "ok  \tgithub.com/agent-box/agent-box/e2e\t1.0s\n")
	assert.Contains(t, got, "wrong answer")
	assert.Contains(t, got, "FAIL\tgithub.com/agent-box/agent-box/runs")
	assert.Contains(t, got, "x.go:1: syntax error")
	assert.Contains(t, got, "go: some plain line")
	// A test that never ended (the binary timed out) shows what it
	// printed, before its package's FAIL.
	assert.Contains(t, got, "panic: test timed out after 10m0s\n\trunning tests:\n\t\tTestHang (10m0s)\nFAIL\tgithub.com/agent-box/agent-box/chaos")
	assert.NotContains(t, got, "noise of a passing test")
	assert.NotContains(t, got, "PASS\n")
	assert.NotContains(t, got, "sshd not installed", "a skip is summed up, not printed")
	assert.True(t, s.failed)
	assert.Equal(t, "skipped: 1 test(s): e2e TestSSH (sshd not installed)", s.skipLine())
}

func TestSkipLineGroupsByReason(t *testing.T) {
	s := &summary{skips: map[string][]string{
		"needs root": {"a T1", "a T2", "b T3", "c T4"},
		"no npm":     {"e2e TestTS"},
	}}
	assert.Equal(t, "skipped: 5 test(s): a T1, a T2, b T3 and 1 more (needs root); e2e TestTS (no npm)", s.skipLine())
	assert.Equal(t, "skipped: none", (&summary{}).skipLine())
}
