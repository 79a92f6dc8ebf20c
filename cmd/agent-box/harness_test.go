package main

import (
	"fmt"
	"os"
	"testing"

	"github.com/agent-box/agent-box/internal/abtest"
)

// binary is agent-box built once for the whole test run: the tests drive
// the real executable over pipes, as an MCP client would.
var binary string

func TestMain(m *testing.M) {
	bin, cleanup, err := abtest.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = bin
	code := m.Run()
	cleanup()
	os.Exit(code)
}

func connect(t *testing.T, stateDir string) *abtest.Server {
	t.Helper()
	return abtest.Connect(t, binary, stateDir)
}
