package main

import (
	"encoding/json"
	"os"

	"github.com/agent-box/agent-box/cli"
	"github.com/agent-box/agent-box/session"
)

// remote runs a command of the CLI on another box. Every call goes
// through the reconnecting session, so a drop in the middle of a command
// (logs -f) is healed underneath it.
func remote(box session.Box, args []string) int {
	// No Stderr: a dial that fails says the transport's words in its error.
	sess := session.Open(box, cliInit(), session.Options{})
	defer sess.Close()
	return cli.Run(cli.Box{Tools: sess.Tools()}, args, os.Stdin, os.Stdout, os.Stderr)
}

// cliInit is the initialize params the CLI sends a box.
func cliInit() json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"protocolVersion": "2025-06-18",
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "agent-box-cli", "version": version},
	})
	return b
}
