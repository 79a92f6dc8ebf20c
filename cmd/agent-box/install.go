package main

import (
	"fmt"
	"os"

	"github.com/agent-box/agent-box/cli"
)

// runInstall is agent-box install (being built: issue 31).
func runInstall(args []string) int {
	fmt.Fprintln(os.Stderr, "agent-box install: not built yet")
	return cli.ExitUsage
}
