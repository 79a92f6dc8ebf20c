package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/charmbracelet/x/term"

	"github.com/agent-box/agent-box/session"
)

// attachUsage is attach's usage line and what it does with input.
const attachUsage = `[--detach-keys KEYS] [--no-stdin] [-n N] NAME

Follows a running run's output from now on (-n: from its last N lines)
until it ends, then exits with its status, as docker attach does. What is
typed goes to the run's stdin if it has one (started with stdin "pipe", or
a pty). On a terminal, a pty run gets the keys as they are typed (the
terminal is raw until agent-box ends, so Ctrl-C is the run's ^C) and the
terminal's size. The detach keys (default ctrl-p,ctrl-q; on a pty run, where
the terminal is raw), and Ctrl-C where it is not the run's, end agent-box
with status 0 and leave the run going.
The end of agent-box's stdin does not close the run's: a script's input
ends without ending the REPL it typed into.
`

// attach is "agent-box attach": watch a run and type into it.
func (c *cmd) attach(args []string) int {
	fs := c.flags("attach", attachUsage)
	keysFlag := fs.String("detach-keys", "ctrl-p,ctrl-q", "keys that detach, in docker's format: ctrl-LETTER or a character, comma-separated")
	noStdin := fs.Bool("no-stdin", false, "send no input")
	lines := fs.Int("n", 0, "first show the last N lines of output")
	pos, err := parse(fs, args)
	if err != nil {
		return c.badFlags(fs, err)
	}
	name, code, ok := c.oneName(fs, pos)
	if !ok {
		return code
	}
	keys, err := parseDetachKeys(*keysFlag)
	if err != nil {
		return c.bad(fs, "--detach-keys: %v", err)
	}
	if *lines < 0 || *lines > 10000 {
		return c.bad(fs, "-n must be 0 to 10000, not %d", *lines)
	}
	// Until the terminal is raw, Ctrl-C and the others detach.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var r run
	if err := c.box.Find(ctx, name, "", &r); err != nil {
		return c.fail(err)
	}
	if r.State != "running" {
		fmt.Fprintf(c.err, "agent-box: %s is not running (%s); agent-box logs %s shows its output\n", visible(r.Name, 0), visible(stateWord(r), 0), visible(r.Name, 0))
		return shellStatus(r.ExitCode, r.Signal)
	}
	_, from, err := c.lastLines(ctx, r.Name, r.RunID, *lines)
	if err != nil {
		return c.fail(err)
	}

	terminal := c.in != nil && term.IsTerminal(c.in.Fd())
	input := !*noStdin && c.in != nil && (r.Pty || r.Stdin == "pipe")
	if !*noStdin && !input {
		fmt.Fprintf(c.err, "agent-box: %s has no stdin (it was started without stdin pipe or pty): input is not forwarded\n", visible(r.Name, 0))
	}
	restore := func() {}
	raw := input && r.Pty && terminal
	if raw {
		fd := c.in.Fd()
		state, err := term.MakeRaw(fd)
		if err != nil {
			return c.fail(fmt.Errorf("the terminal: %w", err))
		}
		var once sync.Once
		restore = func() { once.Do(func() { _ = term.Restore(fd, state) }) }
		defer restore()
	}
	// A panic anywhere leaves the terminal as it was found.
	guard := func(f func()) {
		defer func() {
			if p := recover(); p != nil {
				restore()
				panic(p)
			}
		}()
		f()
	}
	if raw {
		// Only a terminal that types into the run sizes it: an attach
		// that only looks changes nothing of what the agent sees.
		go guard(func() { c.followWindowSize(ctx, r, c.in.Fd()) })
	}

	detached := make(chan struct{})
	if input {
		var dk *detachKeys
		if terminal {
			dk = &detachKeys{seq: keys}
		}
		go guard(func() {
			err := c.sendInput(ctx, r, c.in, dk, false)
			switch {
			case errors.Is(err, errDetached):
				close(detached)
			case err != nil && ctx.Err() == nil:
				c.note(raw, "agent-box: input is no longer forwarded to %s: %v", visible(r.Name, 0), err)
			}
		})
	}
	type followed struct {
		end session.End
		err error
	}
	ended := make(chan followed, 1)
	go guard(func() {
		end, err := c.box.Follow(ctx, session.Follow{Name: r.Name, RunID: r.RunID, Offset: from}, c.out, c.err)
		ended <- followed{end, err}
	})
	select {
	case f := <-ended:
		restore()
		if f.err != nil {
			return c.fail(f.err)
		}
		return c.endStatus(r.Name, f.end)
	case <-detached:
	case <-sigs:
	}
	cancel()
	restore()
	fmt.Fprintf(c.err, "\ndetached from %s\n", visible(r.Name, 0))
	return 0
}

// note writes a line on stderr; on a raw terminal a line feed alone
// does not return the cursor.
func (c *cmd) note(raw bool, format string, args ...any) {
	eol := "\n"
	if raw {
		eol = "\r\n"
	}
	fmt.Fprintf(c.err, format+eol, args...)
}

// resize gives a pty run the size of the terminal fd.
func (c *cmd) resize(ctx context.Context, r run, fd uintptr) {
	cols, rows, err := term.GetSize(fd)
	if err != nil || cols <= 0 || rows <= 0 {
		return
	}
	// The bounds process_resize takes.
	cols, rows = min(max(cols, 10), 1000), min(max(rows, 5), 500)
	_ = c.call(ctx, "process_resize", map[string]any{"name": r.Name, "run_id": r.RunID, "cols": cols, "rows": rows}, nil)
}

// detachKeys finds the detach sequence in what is typed. The bytes of a
// partial sequence are held until the next key shows whether it is the
// sequence; if not, they are forwarded.
type detachKeys struct {
	seq  []byte
	held int // how much of seq the last bytes typed were
}

// filter returns the bytes of p to forward, and whether p completed the
// sequence (what follows it in p is dropped: agent-box is leaving).
func (k *detachKeys) filter(p []byte) ([]byte, bool) {
	var out []byte
	for _, b := range p {
		// The held bytes and b: what cannot begin the sequence is sent,
		// from the front, so "aaab" detaches on "a,a,b" as "ab" on "a,b".
		held := append(k.seq[:k.held:k.held], b)
		for len(held) > 0 && !bytes.HasPrefix(k.seq, held) {
			out = append(out, held[0])
			held = held[1:]
		}
		k.held = len(held)
		if k.held == len(k.seq) {
			k.held = 0
			return out, true
		}
	}
	return out, false
}

// rest is what is held, at the end of the input.
func (k *detachKeys) rest() []byte {
	b := k.seq[:k.held]
	k.held = 0
	return b
}

// parseDetachKeys reads docker's format of detach keys: comma-separated,
// each a single character or ctrl-C for a character C of a-z @ [ \ ] ^ _.
func parseDetachKeys(s string) ([]byte, error) {
	var seq []byte
	for _, key := range strings.Split(s, ",") {
		switch {
		case len(key) == 1:
			seq = append(seq, key[0])
		case len(key) == 6 && strings.HasPrefix(strings.ToLower(key), "ctrl-"):
			ch := key[5]
			switch {
			case ch >= 'a' && ch <= 'z':
				seq = append(seq, ch-'a'+1)
			case ch >= 'A' && ch <= 'Z':
				seq = append(seq, ch-'A'+1)
			case strings.IndexByte("@[\\]^_", ch) >= 0:
				seq = append(seq, ch-'@')
			default:
				return nil, fmt.Errorf("%q: ctrl- goes with a-z, @, [, \\, ], ^ or _", key)
			}
		default:
			return nil, fmt.Errorf("%q is not a key (a character, or ctrl-x)", key)
		}
	}
	return seq, nil
}
