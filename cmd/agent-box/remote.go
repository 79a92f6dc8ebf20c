package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/agent-box/agent-box/cli"
	"github.com/agent-box/agent-box/fleet"
	"github.com/agent-box/agent-box/session"
)

// remote runs a command of the CLI on other boxes. Every call goes
// through a reconnecting session, so a drop in the middle of a command
// (logs -f) is healed underneath it. Several boxes are a fleet, which
// routes each call as connect's does: ps lists every box, logs NAME
// follows the one box with a run NAME.
func remote(boxes []session.Box, args []string) int {
	if len(boxes) == 1 {
		// No Stderr: a dial that fails says the transport's words in its error.
		sess := session.Open(boxes[0], cliInit(), session.Options{})
		defer sess.Close()
		return cli.Run(cli.Box{Tools: sess.Tools()}, args, os.Stdin, os.Stdout, os.Stderr)
	}
	var members []fleet.Box
	var names []string
	var sessions []*session.Session
	defer func() { closeEach(sessions) }()
	for _, b := range boxes {
		sess := session.Open(b, cliInit(), session.Options{})
		sessions = append(sessions, sess)
		members = append(members, fleet.Box{Name: b.Name, Caller: sess})
		names = append(names, b.Name)
	}
	fl, err := fleet.New(members)
	if err != nil {
		// resolveBoxes named them as a fleet's boxes: this is a bug.
		fmt.Fprintf(os.Stderr, "agent-box: %v\n", err)
		return cli.ExitError
	}
	tools := session.Tools{Caller: fl, Box: strings.Join(names, ", ")}
	return cli.Run(cli.Box{Tools: tools, Boxes: names}, args, os.Stdin, os.Stdout, os.Stderr)
}

// closeEach ends the sessions together: each waits for its box to finish
// what is in flight, and one slow box need not hold up the next.
func closeEach(sessions []*session.Session) {
	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Add(1)
		go func() { defer wg.Done(); s.Close() }()
	}
	wg.Wait()
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
