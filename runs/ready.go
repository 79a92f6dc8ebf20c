package runs

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agent-box/agent-box/live"
	"github.com/agent-box/agent-box/logframe"
	"github.com/agent-box/agent-box/logread"
	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
)

// ReadyProbe says when a run started by process_start counts as ready;
// it is recorded with the run, and process_restart probes the new run
// with it again.
type ReadyProbe = runrecord.ReadyProbe

// readyProbe is a ReadyProbe that check passed, its parts parsed.
type readyProbe struct {
	ReadyProbe
	re  *regexp.Regexp
	url *url.URL // HTTP, parsed
}

// MaxPort is the largest TCP port.
const MaxPort = 65535

// notAPort is the one refusal of a port out of range, for tcp_port and a
// URL's port alike.
func notAPort(what, port string) error {
	return invalid("%s %s is not a port (1..65535)", what, port)
}

// ReadyResult is how a readiness probe ended.
type ReadyResult struct {
	Ready bool          `json:"ready"`
	After time.Duration `json:"-"`
	// Offset is, for a log probe that passed, the log offset of the
	// matching line (framed: of the frame holding its first byte).
	Offset *int64 `json:"ready_offset,omitempty" jsonschema:"log probe: the offset of the matching line"`
	// Why says why the run is not ready: it ended (with its status), or
	// the probe timed out and the run is left running.
	Why string `json:"ready_error,omitempty" jsonschema:"why not ready: the run ended (with its status), or the probe timed out and the run is left running"`
	// Output is the last lines of output when the run ended unready.
	Output string `json:"output_tail,omitempty" jsonschema:"not ready because the run ended: its last lines"`
	// cut: the probe was given up because ctx ended, before the run was
	// ready or ended and before the bound.
	cut bool
}

// MaxReadyTimeout bounds ready_timeout_s.
const MaxReadyTimeout = 10 * time.Minute

// readyPoll is how often a port or URL is tried; a log probe wakes on the
// log's writes instead.
const readyPoll = 100 * time.Millisecond

// checkProbe checks a probe of a request or a record (which anyone who
// can write the state dir may have edited): every part is bounded, and a
// probe reaches nothing but what a request's could.
func checkProbe(probe ReadyProbe) (*readyProbe, error) {
	p := &readyProbe{ReadyProbe: probe}
	return p, p.check()
}

func (p *readyProbe) check() error {
	n := 0
	if p.Log != "" {
		n++
		if len(p.Log) > MaxGrepBytes {
			return invalid("ready.log is %d bytes, at most %d", len(p.Log), MaxGrepBytes)
		}
		re, err := regexp.Compile(p.Log)
		if err != nil {
			return invalid("ready.log: %v", err)
		}
		p.re = re
	}
	if p.TCPPort != 0 {
		n++
		if p.TCPPort < 1 || p.TCPPort > MaxPort {
			return notAPort("ready.tcp_port", strconv.Itoa(p.TCPPort))
		}
	}
	if p.HTTP != "" {
		n++
		if len(p.HTTP) > MaxPathBytes {
			return invalid("ready.http is %d bytes, at most %d", len(p.HTTP), MaxPathBytes)
		}
		u, err := url.Parse(p.HTTP)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return invalid("ready.http %s is not an http:// or https:// URL", quoteShort(p.HTTP))
		}
		// url.Parse takes any digits for a port (net/url validOptionalPort).
		if port := u.Port(); port != "" {
			if n, err := strconv.Atoi(port); err != nil || n < 1 || n > MaxPort {
				return notAPort("ready.http port", port)
			}
		}
		p.url = u
	}
	if n != 1 {
		return invalid("ready takes one probe: log (a regular expression), tcp_port or http; %d given", n)
	}
	return nil
}

// awaitReady runs the probe until it passes, the run ends, the bound
// (reckoned from began) passes or ctx is done.
func (m *Manager) awaitReady(ctx context.Context, run Run, req *StartRequest, began time.Time) ReadyResult {
	p, err := checkProbe(*req.Ready) // checked in normalize: this parses it
	if err != nil {
		return ReadyResult{Why: err.Error()}
	}
	pol := m.waitPolicy()
	bound, shortened, _ := pol.bound(req.readyTimeout(), req.Watched) // checked in normalize
	clock := newProgressClock(req.Progress, pol.ProgressEvery)
	start := began
	deadline := start.Add(bound)
	// Watched before the first probe, so that output written between a
	// probe and the wait wakes the wait (live.Watch.Wait) instead of being
	// seen readyPoll later.
	watch := live.WatchDirs(live.WatchOutput, m.Store.RunDir(run.Name, run.RunID))
	defer watch.Close()
	var scanned int64 // a log probe has looked at the log up to here
	for {
		ended := run.Ended() || run.rec == nil
		// Probed after the state is read: a probe that passes just before
		// the run dies still counts, one that fails after it is not tried.
		if ok, off := m.probe1(ctx, run, p, &scanned, ended, deadline); ok {
			return ReadyResult{Ready: true, After: time.Since(start), Offset: off}
		}
		if ended {
			why := fmt.Sprintf("the run ended before it was ready: %s", run.Reason)
			var out string
			if run.rec != nil {
				out = outputTail(run, 0).Output
			}
			// A log scan that ctx stopped may have missed the line.
			return ReadyResult{After: time.Since(start), Why: why, Output: out, cut: ctx.Err() != nil}
		}
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			cut := ""
			if shortened {
				cut = fmt.Sprintf(" (ready_timeout_s cut to %s: a call without a progress token waits at most that)", bound)
			}
			return ReadyResult{After: time.Since(start), Why: fmt.Sprintf("not ready after %s%s; the run is left running (process_wait, tail_log or process_kill it)", time.Since(start).Round(time.Millisecond), cut),
				cut: left > 0}
		}
		watch.Wait(ctx, clock.sleep(min(left, readyPoll)))
		clock.tick([]string{run.Name})
		if again, err := m.Get(run.Name, run.RunID); err == nil {
			run = again
		}
	}
}

// probe1 tries the probe once.
func (m *Manager) probe1(ctx context.Context, run Run, p *readyProbe, scanned *int64, final bool, deadline time.Time) (bool, *int64) {
	switch {
	case p.re != nil:
		return logMatch(ctx, run, p.re, scanned, final, deadline)
	case p.TCPPort != 0:
		if !m.runListens(run, p.TCPPort) {
			return false, nil
		}
		d := net.Dialer{Timeout: time.Second}
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort("localhost", strconv.Itoa(p.TCPPort)))
		if err == nil {
			c.Close()
			return true, nil
		}
	case p.HTTP != "":
		if port, local := localPort(p.url); local && !m.runListens(run, port) {
			return false, nil
		}
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.HTTP, nil)
		if err != nil {
			return false, nil
		}
		resp, err := readyClient.Do(req)
		if err == nil {
			resp.Body.Close()
			return resp.StatusCode < 500, nil
		}
	}
	return false, nil
}

// runListens reports whether a process of run holds a socket listening on
// TCP port: a listener's inode (/proc/net/tcp, tcp6) among the sockets of
// the run's processes (/proc/PID/fd). Anything else on the box may listen
// on a port too, and its answer says nothing about the run. The run's
// processes are those its live supervisor vouches for (procIndex
// descendants: every process the run started, whatever its group or
// session, but not a run started from inside it), and only once the
// supervisor said it supervises this run (supAlive): a record planted or
// copied under another name names a live supervisor of pid and start
// time all the same. A process that made itself undumpable cannot be
// read, and does not count.
func (m *Manager) runListens(run Run, port int) bool {
	if run.rec == nil || !run.supAlive {
		return false
	}
	listening, err := proc.TCPListeners(port)
	if err != nil || len(listening) == 0 {
		return false
	}
	procs, ok := (&procIndex{sys: m.Sys}).descendants(run.rec)
	if !ok {
		return false
	}
	for _, p := range procs {
		socks, err := proc.SocketInodes(p.PID)
		if err != nil || !slices.ContainsFunc(socks, func(ino uint64) bool { return listening[ino] }) {
			continue
		}
		// The fds were p's only if p is still the process of the
		// snapshot: a pid reused since would lend its sockets.
		if l, _ := m.Sys.Procs.Probe(p.PID, p.StartTime); l == outcome.Same {
			return true
		}
	}
	return false
}

// localPort is the port of a URL whose host is this machine (localhost,
// a loopback or unspecified address), whose listener must then be the
// run's; false for any other host, which agent-box cannot tell the owner
// of.
func localPort(u *url.URL) (int, bool) {
	host := u.Hostname()
	ip := net.ParseIP(host)
	if !strings.EqualFold(host, "localhost") && (ip == nil || !ip.IsLoopback() && !ip.IsUnspecified()) {
		return 0, false
	}
	if port, err := strconv.Atoi(u.Port()); err == nil {
		return port, true // checked in check
	}
	if u.Scheme == "https" {
		return 443, true
	}
	return 80, true
}

// readyClient follows no redirect: a response, any, is the server's.
var readyClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// logMatch greps the log from *scanned on for a line matching re, and
// moves *scanned past the complete lines it has looked at. A long log
// (a reused run's) is scanned a window at a time, each one ending the
// scan on the call's end.
func logMatch(ctx context.Context, run Run, re *regexp.Regexp, scanned *int64, final bool, deadline time.Time) (bool, *int64) {
	r, closeLog, size, err := openLog(run)
	if err != nil {
		return false, nil
	}
	defer closeLog()
	framed := run.rec != nil && run.rec.LogFormat == logframe.FormatName
	for *scanned < size && ctx.Err() == nil && time.Now().Before(deadline) {
		w, err := logread.Read(r, size, logread.Request{Offset: *scanned, MaxBytes: logread.MaxWindow, Framed: framed, Grep: re, Final: final})
		if err != nil {
			return false, nil
		}
		if len(w.Matches) > 0 {
			off := w.Matches[0].Offset
			return true, &off
		}
		if w.EndOffset <= *scanned {
			break // only a line still being written is left
		}
		*scanned = w.EndOffset
	}
	return false, nil
}
