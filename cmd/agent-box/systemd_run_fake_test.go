package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// This file holds a stand-in for systemd-run(1) on machines without a running
// systemd. installFakeSystemdRun links this test binary into a directory
// under the name systemd-run; run under that name, the binary never gets
// to TestMain (which would build agent-box again): init below plays
// systemd-run --scope and execs the command, as the real one does once
// the scope exists (src/run/run.c start_transient_scope: StartTransientUnit
// with its own pid, wait for the job, execvpe), so that the pid, the
// session and the inherited fd 3 (the supervisor's channel) stay the same.

// Environment of the fake, set on the agent-box server it serves.
const (
	fakeSystemdRunLog  = "AGENT_BOX_FAKE_SYSTEMD_RUN_LOG"  // where each call appends a fakeCall as a JSON line
	fakeSystemdRunFail = "AGENT_BOX_FAKE_SYSTEMD_RUN_FAIL" // while this file exists, fail as systemd-run does when the scope cannot be made
)

// fakeCall is what the fake saw on one call.
type fakeCall struct {
	Argv    []string `json:"argv"`
	PID     int      `json:"pid"`
	Unit    string   `json:"unit,omitempty"`
	Command []string `json:"command,omitempty"`
	// Fds 3 and 4 as the fake got them: "pipe" when an inheritable pipe.
	Fd3 string `json:"fd3"`
	// Why the fake refused its arguments, if it did ("" when it accepted).
	Refused string `json:"refused,omitempty"`
	Failed  bool   `json:"failed,omitempty"` // told to fail
}

func init() {
	if filepath.Base(os.Args[0]) != "systemd-run" {
		return
	}
	os.Exit(fakeSystemdRun())
}

// fakeSystemdRun returns an exit code only when it does not exec.
func fakeSystemdRun() int {
	call := fakeCall{Argv: os.Args, PID: os.Getpid(), Fd3: describeFd(3)}
	unit, command, err := parseSystemdRunArgs(os.Args[1:], os.Geteuid() == 0)
	call.Unit, call.Command = unit, command
	if err == nil && call.Fd3 != "socket" {
		err = fmt.Errorf("fd 3 is %s, not the supervisor's inheritable channel", call.Fd3)
	}
	if err != nil {
		call.Refused = err.Error()
	}
	fail := false
	if p := os.Getenv(fakeSystemdRunFail); p != "" {
		_, statErr := os.Stat(p)
		fail = statErr == nil
	}
	call.Failed = fail && err == nil
	if logErr := appendCall(call); logErr != nil {
		fmt.Fprintf(os.Stderr, "fake systemd-run: %v\n", logErr)
		return 1
	}
	switch {
	case err != nil:
		fmt.Fprintf(os.Stderr, "systemd-run: %v\n", err)
		return 1
	case fail:
		// What systemd-run prints when StartTransientUnit is refused.
		fmt.Fprintf(os.Stderr, "Failed to start transient scope unit: Unit %s.scope was already loaded or has a fragment file.\n", unit)
		return 1
	}
	path, err := exec.LookPath(command[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "Failed to find executable %s: %v\n", command[0], err)
		return 1
	}
	err = syscall.Exec(path, command, os.Environ())
	fmt.Fprintf(os.Stderr, "Failed to execute: %v\n", err)
	return 1
}

// flagOptions are the options without an argument that agent-box may
// pass, under each spelling systemd-run takes.
var flagOptions = map[string]string{
	"--user": "--user", "--scope": "--scope",
	"--collect": "--collect", "-G": "--collect",
	"--quiet": "--quiet", "-q": "--quiet",
}

// parseSystemdRunArgs accepts exactly what agent-box means to pass:
// --scope, --collect, --quiet, --unit NAME, and --user iff not root, in
// any order and in any of the spellings systemd-run's getopt_long takes;
// options end at the first non-option or "--" (getopt "+"). It returns
// the unit name and the command.
func parseSystemdRunArgs(args []string, root bool) (unit string, command []string, err error) {
	seen := map[string]bool{}
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			i++
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			break
		}
		opt, val, hasVal := a, "", false
		if strings.HasPrefix(a, "--") {
			opt, val, hasVal = strings.Cut(a, "=")
		}
		if canon, ok := flagOptions[opt]; ok {
			if hasVal {
				return "", nil, fmt.Errorf("option '%s' doesn't allow an argument", opt)
			}
			opt = canon
		} else if opt == "--unit" || opt == "-u" {
			if !hasVal {
				if i+1 >= len(args) {
					return "", nil, fmt.Errorf("option '%s' requires an argument", opt)
				}
				i++
				val = args[i]
			}
			unit, opt = val, "--unit"
		} else if opt == "--property" && val == "Delegate=yes" {
			// What a v2 run with limits asks for: nothing for the fake
			// to do, it makes no scope.
		} else {
			return "", nil, fmt.Errorf("unexpected option %q: agent-box passes only --user, --scope, --collect, --quiet, --unit and --property=Delegate=yes", a)
		}
		if seen[opt] {
			return "", nil, fmt.Errorf("option %s given twice", opt)
		}
		seen[opt] = true
	}
	command = args[i:]
	for _, want := range []string{"--scope", "--collect", "--quiet", "--unit"} {
		if !seen[want] {
			return "", nil, fmt.Errorf("%s is missing", want)
		}
	}
	switch {
	case root && seen["--user"]:
		return "", nil, fmt.Errorf("--user as root: root's scopes belong to the system manager")
	case !root && !seen["--user"]:
		return "", nil, fmt.Errorf("no --user as a non-root user: the system manager would refuse or ask polkit")
	}
	if err := validScopeName(unit); err != nil {
		return "", nil, err
	}
	if len(command) == 0 {
		return "", nil, fmt.Errorf("no command given")
	}
	for _, a := range command {
		// systemd-run expands $VAR and ${VAR} in the command line
		// (--expand-environment, on by default since v254).
		if strings.Contains(a, "$") {
			return "", nil, fmt.Errorf("command argument %q would be rewritten by systemd-run's environment expansion", a)
		}
	}
	return unit, command, nil
}

// validScopeName checks --unit the way systemd-run would have to take it
// as given: a valid unit name once ".scope" is appended (unit_name_is_valid
// in src/basic/unit-name.c: at most 255 bytes, only [A-Za-z0-9:_.\-]), so
// that unit_name_mangle_with_suffix keeps it instead of escaping it.
func validScopeName(unit string) error {
	if unit == "" {
		return fmt.Errorf("--unit is empty")
	}
	name := unit
	if !strings.HasSuffix(name, ".scope") {
		name += ".scope"
	}
	if len(name) > 255 {
		return fmt.Errorf("unit name %q is %d bytes, at most 255", name, len(name))
	}
	if name[0] == '.' {
		return fmt.Errorf("unit name %q starts with a dot", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(":-_.\\", c) >= 0) {
			return fmt.Errorf("unit name %q: byte %q at %d is not valid in a unit name; systemd-run would escape it", name, c, i)
		}
	}
	return nil
}

// describeFd says what fd is: "socket" for a socket without close-on-exec
// (one an exec passes on), as the supervisor's channels are, else what it
// is instead.
func describeFd(fd int) string {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "closed"
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return fmt.Sprintf("not a socket (mode %#o)", st.Mode)
	}
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil || flags&unix.FD_CLOEXEC != 0 {
		return "close-on-exec socket"
	}
	return "socket"
}

func appendCall(call fakeCall) error {
	p := os.Getenv(fakeSystemdRunLog)
	if p == "" {
		return fmt.Errorf("%s is not set", fakeSystemdRunLog)
	}
	b, err := json.Marshal(call)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	// One write of one line: O_APPEND keeps concurrent calls' lines whole.
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// fakeSystemdRunDir is a directory to put first on agent-box's PATH.
type fakeSystemdRunDir struct {
	Dir  string // holds systemd-run
	Log  string // its calls, one JSON line each
	Fail string // create this file to make it fail
}

func installFakeSystemdRun(t *testing.T) fakeSystemdRunDir {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	dir, state := t.TempDir(), t.TempDir()
	require.NoError(t, os.Symlink(self, filepath.Join(dir, "systemd-run")))
	return fakeSystemdRunDir{Dir: dir, Log: filepath.Join(state, "calls.jsonl"), Fail: filepath.Join(state, "fail")}
}

// Env is the server's environment: the fake first on PATH, systemd launch
// forced.
func (f fakeSystemdRunDir) Env() []string {
	return append(os.Environ(),
		"PATH="+f.Dir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"AGENT_BOX_LAUNCH=systemd",
		fakeSystemdRunLog+"="+f.Log,
		fakeSystemdRunFail+"="+f.Fail)
}

// Calls returns the fake's calls so far.
func (f fakeSystemdRunDir) Calls(t *testing.T) []fakeCall {
	t.Helper()
	data, err := os.ReadFile(f.Log)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var calls []fakeCall
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var c fakeCall
		require.NoError(t, json.Unmarshal([]byte(line), &c), "fake systemd-run log line %q", line)
		calls = append(calls, c)
	}
	return calls
}

// The fake's own checks, so that a pass of the end-to-end test means
// something: it refuses what the real systemd-run would not take as given.
func TestFakeSystemdRunArgs(t *testing.T) {
	t.Parallel()
	cmd := []string{"/opt/agent-box-supervisor", "build", "20261202T141701.123456789Z-3f9a1c"}
	ok := func(args ...string) []string { return append(args, cmd...) }
	for _, c := range []struct {
		args []string
		root bool
		bad  string // "" if accepted
	}{
		{ok("--scope", "--collect", "--quiet", "--unit", "agent-box-build-3f9a1c"), true, ""},
		{ok("--user", "--scope", "--collect", "--quiet", "--unit", "agent-box-build-3f9a1c"), false, ""},
		{ok("--scope", "-G", "-q", "--unit=agent-box-build-3f9a1c", "--"), true, ""},
		{ok("--scope", "--collect", "--quiet", "-u", "agent-box-build-3f9a1c"), true, ""},
		{ok("--user", "--scope", "--collect", "--quiet", "--unit", "agent-box-build-3f9a1c"), true, "--user"},
		{ok("--scope", "--collect", "--quiet", "--unit", "agent-box-build-3f9a1c"), false, "--user"},
		{ok("--collect", "--quiet", "--unit", "agent-box-build-3f9a1c"), true, "--scope is missing"},
		{ok("--scope", "--quiet", "--unit", "agent-box-build-3f9a1c"), true, "--collect is missing"},
		{ok("--scope", "--collect", "--unit", "agent-box-build-3f9a1c"), true, "--quiet is missing"},
		{ok("--scope", "--collect", "--quiet"), true, "--unit is missing"},
		{ok("--scope", "--collect", "--quiet", "--pipe", "--unit", "x"), true, "unexpected option"},
		{ok("--scope", "--scope", "--collect", "--quiet", "--unit", "x"), true, "twice"},
		{ok("--scope", "--collect", "--quiet", "--unit", "agent box"), true, "not valid in a unit name"},
		{ok("--scope", "--collect", "--quiet", "--unit", "agent-box-é"), true, "not valid in a unit name"},
		{ok("--scope", "--collect", "--quiet", "--unit", strings.Repeat("a", 250)), true, "at most 255"},
		{[]string{"--scope", "--collect", "--quiet", "--unit", "x"}, true, "no command"},
		{[]string{"--scope", "--collect", "--quiet", "--unit", "x", "/bin/echo", "$HOME"}, true, "expansion"},
	} {
		unit, command, err := parseSystemdRunArgs(c.args, c.root)
		if c.bad == "" {
			if err != nil {
				t.Errorf("%q (root %v): %v", c.args, c.root, err)
				continue
			}
			if unit != "agent-box-build-3f9a1c" || strings.Join(command, " ") != strings.Join(cmd, " ") {
				t.Errorf("%q: unit %q, command %q", c.args, unit, command)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.bad) {
			t.Errorf("%q (root %v): got error %v, want one saying %q", c.args, c.root, err, c.bad)
		}
	}
}
