package main

import (
	"os"

	"github.com/agent-box/agent-box/cli"
	"github.com/agent-box/agent-box/runs"
)

func runCLI(m *runs.Manager, args []string) int {
	return cli.Run(m, args, os.Stdout, os.Stderr)
}
