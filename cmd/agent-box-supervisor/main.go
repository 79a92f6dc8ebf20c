// Command agent-box-supervisor is the per-run supervisor of agent-box as a
// binary of its own. agent-box starts it when it finds it next to itself,
// and falls back to "agent-box supervise" otherwise; the two run the same
// supervisor.Main.
//
// It exists because a supervisor lives as long as its run and is started
// for every process_start: without the MCP server linked in, it starts in
// about a millisecond instead of ten (mcp-go's JSON Schema dependency
// compiles its meta-schemas at package init) and stays at a few MiB of RSS.
package main

import (
	// For its init: until it has run, any process of the user can open
	// this one's descriptors and memory through /proc (package nodump
	// says when it runs).
	_ "github.com/agent-box/agent-box/internal/nodump"

	"fmt"
	"os"

	"github.com/agent-box/agent-box/supervisor"
)

func main() {
	// Its stderr is the run dir's supervisor.log (supervisor.Launch).
	if err := supervisor.Main(supervisor.Config{Log: os.Stderr, Args: os.Args}); err != nil {
		fmt.Fprintf(os.Stderr, "agent-box-supervisor: %v\n", err)
		os.Exit(1)
	}
}
