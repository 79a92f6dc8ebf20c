// Package supervisor is the per-run process that outlives agent-box: it is
// started (as the hidden "agent-box supervise" subcommand) in a session of
// its own, starts the child in a process group of its own, drains the
// child's output into the run's log, waits for it and records its exit.
//
// It follows the conmon/containerd-shim pattern: the MCP server, which dies
// with every SSH connection, never owns a pipe or a copier of the child; the
// supervisor does, and it is the only writer of the run record after the
// server created it. The secrets a run needs reach the supervisor through a
// channel, never through the record, argv or the environment of the supervisor.
package supervisor

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/agent-box/agent-box/runrecord"
)

// Spec is everything the supervisor needs to start the child. It is sent as
// JSON over the supervisor's private channel (PrivateChannel) and never
// stored on disk.
type Spec struct {
	StateDir string   `json:"state_dir"`
	Name     string   `json:"name"`
	RunID    string   `json:"run_id"`
	Path     string   `json:"path"` // resolved executable
	Argv     []string `json:"argv"` // argv[0] included
	Env      []string `json:"env"`  // the complete environment of the child
	Dir      string   `json:"dir"`
	Secrets  []string `json:"secrets,omitempty"`
	// Run is the run's options as its record keeps them (secrets masked):
	// its capture mode, log cap, stdin, terminal (Pty: the child runs on a
	// pseudo-terminal of Cols×Rows, which the supervisor holds, and stdin
	// is its input), timeout and limits (a cgroup of its own; nil: none).
	// The program to run is Path, Argv, Env and Dir, not Run's.
	Run runrecord.Spec `json:"run"`
	// KillGraceMS is how long the supervisor waits after SIGTERM at the
	// timeout before it sends SIGKILL to the group.
	KillGraceMS int `json:"kill_grace_ms,omitempty"`
}

// runDir is the dir of the run the spec is for, in its state dir.
func (sp *Spec) runDir() string {
	return (&runrecord.Store{Root: sp.StateDir}).RunDir(sp.Name, sp.RunID)
}

// ErrStartFailed is wrapped by Launched.Start when the supervisor could not
// start the child.
var ErrStartFailed = errors.New("could not start the process")

// ErrNoReport means the supervisor died or closed its channel before
// saying whether the child started.
var ErrNoReport = errors.New("supervisor exited without reporting")

// writeReport sends the one-line start report: "ok <pid>" or "error <msg>".
func writeReport(w io.Writer, pid int, startErr error) error {
	var line string
	if startErr != nil {
		line = "error " + strings.ReplaceAll(startErr.Error(), "\n", " ") + "\n"
	} else {
		line = "ok " + strconv.Itoa(pid) + "\n"
	}
	_, err := io.WriteString(w, line)
	return err
}

// readReport reads the supervisor's start report and returns the child's
// pid, or why it could not be started.
func readReport(r io.Reader) (int, error) {
	return reportOf(newReportReader(r).ReadString('\n'))
}

// newReportReader reads what a supervisor writes on its channel: the
// adoption's answer, if it is a spare, then the start report.
func newReportReader(r io.Reader) *bufio.Reader {
	return bufio.NewReader(io.LimitReader(r, 64<<10))
}

// reportOf is the start report in line, read with err.
func reportOf(line string, err error) (int, error) {
	if err != nil {
		if errors.Is(err, io.EOF) {
			return 0, ErrNoReport
		}
		return 0, fmt.Errorf("reading supervisor report: %w", err)
	}
	return parseReport(strings.TrimSuffix(line, "\n"))
}

func parseReport(line string) (int, error) {
	switch {
	case strings.HasPrefix(line, "ok "):
		pid, err := strconv.Atoi(strings.TrimPrefix(line, "ok "))
		if err != nil || pid <= 0 {
			return 0, fmt.Errorf("bad supervisor report %q", line)
		}
		return pid, nil
	case strings.HasPrefix(line, "error "):
		return 0, fmt.Errorf("%w: %s", ErrStartFailed, strings.TrimPrefix(line, "error "))
	}
	return 0, fmt.Errorf("bad supervisor report %q", line)
}

// encodeSpec is what Launched.Start writes to the private channel.
func encodeSpec(w io.Writer, s *Spec) error {
	return json.NewEncoder(w).Encode(s)
}

// decodeSpec reads what encodeSpec wrote, at most maxSpec bytes of it.
// A spec with a field this supervisor does not know is of another
// version's agent-box (its files replaced under a running server): it is
// refused, saying so, rather than run without the options it carries
// where this one does not look.
func decodeSpec(r io.Reader, s *Spec) error {
	d := json.NewDecoder(io.LimitReader(r, maxSpec))
	d.DisallowUnknownFields()
	if err := d.Decode(s); err != nil {
		return fmt.Errorf("reading the run's spec: %w (is this agent-box-supervisor of the version of the agent-box that started it?)", err)
	}
	return nil
}

// maxSpec bounds a spec: its argv and env are bounded by runs.
const maxSpec = 16 << 20
