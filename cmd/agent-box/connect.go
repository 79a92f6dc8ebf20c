package main

import (
	"fmt"
	"os"

	"github.com/agent-box/agent-box/cli"
)

// runConnect is agent-box connect (being built: issue 31).
func runConnect(args []string) int {
	fmt.Fprintln(os.Stderr, "agent-box connect: not built yet")
	return cli.ExitUsage
}
