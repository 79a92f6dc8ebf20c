package cli

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/agent-box/agent-box/session"
)

// startFlags are the flags of a new run that start and run share.
type startFlags struct {
	cwd     *string
	timeout *int
	limits  *string
}

func addStartFlags(fs *flag.FlagSet) startFlags {
	return startFlags{
		cwd:     fs.String("cwd", "", "working directory (default: the current one on this machine, the home directory on another box)"),
		timeout: fs.Int("timeout", 0, "kill the run after this many seconds"),
		limits:  fs.String("limits", "", "caps, e.g. memory_mb=512,cpu_percent=50,pids=100"),
	}
}

// startRequest checks the positional arguments, NAME -- CMD [ARG...], and
// makes process_start's arguments of them and of the flags. ok false: the
// command line was wrong, and code is the status to exit with.
func (c *cmd) startRequest(fs *flag.FlagSet, sf startFlags, pos []string) (req map[string]any, code int, ok bool) {
	var limits map[string]any
	if *sf.limits != "" {
		var err error
		if limits, err = parseLimits(*sf.limits); err != nil {
			return nil, c.bad(fs, "--limits: %v", err), false
		}
	}
	switch {
	case len(pos) == 0:
		return nil, c.bad(fs, "missing NAME and -- CMD"), false
	case pos[0] == "--":
		return nil, c.bad(fs, "missing NAME before --"), false
	case len(pos) == 1:
		return nil, c.bad(fs, "missing -- CMD after NAME %q", pos[0]), false
	case pos[1] != "--":
		return nil, c.bad(fs, "expected -- after NAME %q, got %q (the command goes after --)", pos[0], pos[1]), false
	case len(pos) == 2:
		return nil, c.bad(fs, "missing the command after --"), false
	case len(c.box.Boxes) > 0 && !strings.Contains(pos[0], "@"):
		return nil, c.bad(fs, "NAME@BOX: say which of the boxes starts %q (BOX: %s)", pos[0], strings.Join(c.box.Boxes, ", ")), false
	}
	cwd := *sf.cwd
	if cwd == "" && c.box.Local {
		cwd, _ = os.Getwd()
	}
	req = map[string]any{"name": c.runOn(pos[0]), "argv": pos[2:]}
	if cwd != "" {
		req["cwd"] = cwd
	}
	if *sf.timeout != 0 {
		req["timeout_s"] = *sf.timeout
	}
	if limits != nil {
		req["limits"] = limits
	}
	return req, 0, true
}

// forcedKillWithin: a second Ctrl-C this soon after the one before sends
// SIGKILL instead of SIGINT, for a run that does not end at SIGINT.
const forcedKillWithin = 2 * time.Second

// runUsage is run's usage line and what it does with signals and input.
const runUsage = `[--cwd DIR] [--timeout S] [--limits L] [-i] NAME -- CMD [ARG...]

Starts a run with its stdout and stderr kept apart (framed), and follows it
until it ends: its stdout to stdout, its stderr to stderr, byte for byte.
Exits with the run's status (128+N for signal N; 125 if its end is unknown).
The run goes on if agent-box is gone; "agent-box logs -f NAME" follows it again.

Ctrl-C sends SIGINT to the run's processes and goes on following, so the
status is the run's answer to it; a second Ctrl-C within 2s sends SIGKILL.
SIGTERM, SIGHUP and SIGQUIT to agent-box are sent to the run as they are.
With -i, agent-box's stdin goes to the run's, which is closed at its end.
`

// runForeground is "agent-box run": start, then follow to the end as if
// the program ran here.
func (c *cmd) runForeground(args []string) int {
	fs := c.flags("run", runUsage)
	sf := addStartFlags(fs)
	interactive := fs.Bool("i", false, "keep the run's stdin open and send agent-box's stdin to it")
	pos, err := parse(fs, args)
	if err != nil {
		return c.badFlags(fs, err)
	}
	req, code, ok := c.startRequest(fs, sf, pos)
	if !ok {
		return code
	}
	req["capture_mode"] = "framed"
	if *interactive {
		req["stdin"] = "pipe"
	}
	// Signals from here on are the run's.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	r, early, err := c.startRun(req, sigs)
	if err != nil {
		if early != nil {
			fmt.Fprintf(c.err, "agent-box: interrupted while starting %s: %v (agent-box ps %s shows whether it started)\n", visible(r.Name, 0), err, visible(r.Name, 0))
			return ExitError
		}
		return c.fail(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if early != nil {
		c.signalRun(ctx, r, signalName(early))
	}
	go c.forwardSignals(ctx, r, sigs)
	if *interactive {
		go func() {
			if err := c.sendInput(ctx, r, c.in, nil, true); err != nil && ctx.Err() == nil {
				fmt.Fprintf(c.err, "agent-box: input to %s: %v\n", visible(r.Name, 0), err)
			}
		}()
	}
	end, err := c.box.Follow(ctx, session.Follow{Name: r.Name, RunID: r.RunID}, c.out, c.err)
	if err != nil {
		return c.fail(err)
	}
	return c.endStatus(r.Name, end)
}

// startRun starts the run of req. A signal while it starts (a box slow
// to reach) gives up the start, and is returned; if the run started all
// the same, it is the run's.
func (c *cmd) startRun(req map[string]any, sigs <-chan os.Signal) (run, os.Signal, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	early := make(chan os.Signal, 1)
	go func() {
		select {
		case sig := <-sigs:
			early <- sig
			cancel()
		case <-started:
			early <- nil
		}
	}()
	var res struct {
		Run run `json:"run"`
	}
	err := c.call(ctx, "process_start", req, &res)
	close(started)
	if err != nil {
		res.Run.Name, _ = req["name"].(string)
	}
	return res.Run, <-early, err
}

// endStatus is the status to exit with for a run that ended so, saying on
// stderr why there is none when its end is unknown.
func (c *cmd) endStatus(name string, end session.End) int {
	if end.ExitCode == nil && end.Signal == "" {
		why := end.State
		if end.Reason != "" && end.Reason != end.State {
			why += ": " + end.Reason
		}
		fmt.Fprintf(c.err, "agent-box: %s ended without a known status (%s)\n", visible(name, 0), visible(why, 200))
	}
	return shellStatus(end.ExitCode, end.Signal)
}

// forwardSignals sends the signals agent-box gets to run r's processes,
// as docker run's signal proxy does, until ctx ends.
func (c *cmd) forwardSignals(ctx context.Context, r run, sigs <-chan os.Signal) {
	var lastInt time.Time
	for {
		var sig os.Signal
		select {
		case <-ctx.Done():
			return
		case sig = <-sigs:
		}
		name := signalName(sig)
		if sig == syscall.SIGINT {
			if !lastInt.IsZero() && time.Since(lastInt) < forcedKillWithin {
				name = "KILL"
				fmt.Fprintf(c.err, "agent-box: Ctrl-C again: SIGKILL to %s\n", visible(r.Name, 0))
			}
			lastInt = time.Now()
		}
		c.signalRun(ctx, r, name)
	}
}

// signalRun sends signal name to run r's processes.
func (c *cmd) signalRun(ctx context.Context, r run, name string) {
	err := c.call(ctx, "process_kill", map[string]any{"name": r.Name, "run_id": r.RunID, "signal": name}, nil)
	if err != nil && ctx.Err() == nil {
		// Most likely the run has just ended, which the follow says.
		fmt.Fprintf(c.err, "agent-box: SIG%s not sent to %s: %v\n", name, visible(r.Name, 0), err)
	}
}

func signalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "INT"
	case syscall.SIGHUP:
		return "HUP"
	case syscall.SIGQUIT:
		return "QUIT"
	}
	return "TERM"
}

// inputChunk bounds one process_write: well under the tool's limit once
// in base64.
const inputChunk = 32 << 10

// errDetached: the person typed the detach keys.
var errDetached = errors.New("detached")

// sendInput copies in to run r's stdin (process_write, base64 for the
// exact bytes) until in ends, ctx ends, or keys (if not nil) sees the
// detach sequence (errDetached). closeAtEOF: the end of in closes the
// run's stdin.
func (c *cmd) sendInput(ctx context.Context, r run, in io.Reader, keys *detachKeys, closeAtEOF bool) error {
	buf := make([]byte, inputChunk)
	for {
		n, rerr := in.Read(buf)
		data := buf[:n]
		detached := false
		if keys != nil {
			data, detached = keys.filter(data)
			if rerr == io.EOF && !detached {
				data = append(data, keys.rest()...)
			}
		}
		if len(data) > 0 || rerr == io.EOF && closeAtEOF {
			w := map[string]any{"name": r.Name, "run_id": r.RunID, "data": base64.StdEncoding.EncodeToString(data), "encoding": "base64"}
			if rerr == io.EOF && closeAtEOF && !detached {
				w["close"] = true
			}
			if err := c.call(ctx, "process_write", w, nil); err != nil {
				return err
			}
		}
		switch {
		case detached:
			return errDetached
		case rerr == io.EOF:
			return nil
		case rerr != nil:
			return rerr
		}
	}
}
