package cli

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"time"
)

// maxGraceS is the longest grace process_kill takes, in seconds.
const maxGraceS = 600

// stop is docker stop's: TERM, then KILL after a grace if the run is still
// there, and back once it has ended.
func (c *cmd) stop(args []string) int {
	fs := c.flags("stop", "[-t SECONDS] NAME")
	grace := fs.Int("t", 10, "seconds between SIGTERM and SIGKILL (0: SIGKILL at once)")
	name, code, ok := c.nameArg(fs, args)
	if !ok {
		return code
	}
	if *grace < 0 || *grace > maxGraceS {
		return c.bad(fs, "-t %d: the grace is a number of seconds from 0 to %d", *grace, maxGraceS)
	}
	ctx, cancel := c.interrupted()
	defer cancel()
	var res struct {
		Message      string `json:"message"`
		AlreadyEnded bool   `json:"already_exited"`
	}
	req := map[string]any{"name": name, "signal": "TERM", "grace_ms": int64(*grace) * 1000}
	if *grace == 0 {
		// No grace: a grace_ms of 0 would send TERM alone.
		req = map[string]any{"name": name, "signal": "KILL"}
	}
	if err := c.call(ctx, "process_kill", req, &res); err != nil {
		return c.fail(err)
	}
	if res.AlreadyEnded {
		fmt.Fprintln(c.out, visible(res.Message, 0))
		return 0
	}
	end, err := c.waitFor(ctx, name)
	if err != nil {
		return c.fail(err)
	}
	c.printEnd(end)
	return 0
}

// printEnd says how a run ended: "NAME RUN_ID: exited(3) (1.2s)".
func (c *cmd) printEnd(e waitEnd) {
	duration := "duration unknown"
	if e.DurationMS != nil {
		duration = (time.Duration(*e.DurationMS) * time.Millisecond).String()
	}
	fmt.Fprintf(c.out, "%s %s: %s (%s)\n", visible(e.Run.Name, 0), visible(e.Run.RunID, 0), visible(stateWord(e.Run), 0), duration)
	fmt.Fprint(c.err, incomplete(e.Run))
}

func (c *cmd) rm(args []string) int {
	fs := c.flags("rm", "[--run-id ID] NAME | rm -a [NAME]")
	runID := fs.String("run-id", "", "an older run of NAME")
	all := fs.Bool("a", false, "every finished run (of NAME, or of every name)")
	pos, err := parse(fs, args)
	if err != nil {
		return c.badFlags(fs, err)
	}
	req := map[string]any{}
	switch {
	case *all && *runID != "":
		return c.bad(fs, "-a removes every finished run; it does not go with --run-id")
	case *all && len(pos) > 1:
		return c.bad(fs, "expected at most one NAME, got %d arguments: %s", len(pos), quoted(pos))
	case *all:
		req["all_finished"] = true
		if len(pos) == 1 {
			req["name"] = c.runOn(pos[0])
		}
	default:
		name, code, ok := c.oneName(fs, pos)
		if !ok {
			return code
		}
		req["name"] = name
		if *runID != "" {
			req["run_id"] = *runID
		}
	}
	ctx, cancel := c.interrupted()
	defer cancel()
	var res struct {
		Removed []run    `json:"removed"`
		Errors  []string `json:"errors"`
	}
	if err := c.call(ctx, "process_remove", req, &res); err != nil {
		return c.fail(err)
	}
	for _, r := range res.Removed {
		fmt.Fprintf(c.out, "removed %s %s\n", visible(r.Name, 0), visible(r.RunID, 0))
	}
	for _, e := range res.Errors {
		fmt.Fprintf(c.err, "agent-box rm: %s\n", visible(e, 0))
	}
	if len(res.Errors) > 0 {
		return ExitError
	}
	return 0
}

func (c *cmd) restart(args []string) int {
	fs := c.flags("restart", "[--grace MS] NAME")
	grace := fs.Int64("grace", 0, "milliseconds between SIGTERM and SIGKILL for the run that is stopped")
	name, code, ok := c.nameArg(fs, args)
	if !ok {
		return code
	}
	req := map[string]any{"name": name}
	if *grace != 0 {
		req["grace_ms"] = *grace
	}
	ctx, cancel := c.interrupted()
	defer cancel()
	var res struct {
		Run      run  `json:"run"`
		Previous *run `json:"previous"`
	}
	if err := c.call(ctx, "process_restart", req, &res); err != nil {
		return c.fail(err)
	}
	r := res.Run
	fmt.Fprintf(c.out, "restarted %s run_id=%s pid=%d", visible(r.Name, 0), visible(r.RunID, 0), r.PID)
	if p := res.Previous; p != nil {
		fmt.Fprintf(c.out, " (was %s: %s)", visible(p.RunID, 0), visible(stateWord(*p), 0))
	}
	fmt.Fprintln(c.out)
	return 0
}

// write sends input to a run started with stdin pipe or on a terminal.
func (c *cmd) write(args []string) int {
	fs := c.flags("write", "[-n] [--eof] NAME [TEXT...]   (no TEXT: stdin, as it is)")
	noNewline := fs.Bool("n", false, "no newline after TEXT")
	eof := fs.Bool("eof", false, "then close the run's stdin (end of input)")
	pos, err := parse(fs, args)
	if err != nil {
		return c.badFlags(fs, err)
	}
	if len(pos) > 0 && pos[0] == "--" {
		pos = pos[1:] // write -- NAME TEXT: the "--" only ends the flags
	}
	if len(pos) == 0 {
		return c.bad(fs, "missing NAME")
	}
	name, text := c.runOn(pos[0]), pos[1:]
	if len(text) > 0 && text[0] == "--" {
		text = text[1:]
	}
	var in io.Reader
	if len(text) > 0 {
		data := []byte(strings.Join(text, " "))
		if !*noNewline {
			data = append(data, '\n')
		}
		if len(data) == 0 && !*eof {
			return c.bad(fs, "nothing to write: give TEXT, or input on stdin, or --eof")
		}
		in = bytes.NewReader(data)
	} else {
		in = c.input()
	}
	ctx, cancel := c.interrupted()
	defer cancel()
	// One run for the whole input, whatever starts under the name
	// meanwhile; in chunks, which a box takes (a write is at most 1 MiB).
	var r run
	if err := c.box.Find(ctx, name, "", &r); err != nil {
		return c.fail(err)
	}
	if err := c.sendInput(ctx, r, in, nil, *eof); err != nil {
		return c.fail(err)
	}
	return 0
}
