package runs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agent-box/agent-box/capture"
	"github.com/agent-box/agent-box/logframe"
	"github.com/agent-box/agent-box/outcome"
	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
	"github.com/agent-box/agent-box/supervisor"
)

// DefaultMaxLogBytes caps a run's log unless process_start says otherwise:
// large enough for any build or test log, small enough that a runaway
// writer does not fill the disk.
const DefaultMaxLogBytes int64 = 1 << 30

// MaxMaxLogBytes is the largest cap a run may ask for.
const MaxMaxLogBytes int64 = 1 << 40

// MaxNice bounds nice, what a run adds to the server's nice value: its
// priority can only be lowered.
const MaxNice = supervisor.MaxNice

// MaxTimeoutS bounds timeout_s (one week).
const MaxTimeoutS = 7 * 24 * 3600

// A pty run's terminal size: its default and bounds (process_start and
// process_resize).
const (
	DefaultCols, MinCols, MaxCols = 120, 10, 1000
	DefaultRows, MinRows, MaxRows = 40, 5, 500
)

// ptyTerm is a pty run's TERM unless its env sets one.
const ptyTerm = "xterm-256color"

// The values of stdin and if_running.
const (
	StdinNull      = "null" // the child's stdin is /dev/null
	StdinPipe      = "pipe" // kept open for process_write
	IfRunningError = "error"
	IfRunningReuse = "reuse"
)

// Spec is what a run is asked to run, as its record keeps it.
type Spec = runrecord.Spec

// StartRequest is process_start's arguments, as the tool takes them: its
// tags are the tool's schema (tools/schemagen_test.go adds the bounds).
type StartRequest struct {
	Name string `json:"name" jsonschema:"Reusable once the run has finished (the old run stays)."`
	// Spec is what is recorded of the run and run again by a restart.
	// Pty runs the child on a terminal of Cols×Rows (0: the defaults),
	// whose input is the run's stdin. Limits cap the run, field by field
	// over the Manager's DefaultLimits (nil: the defaults alone).
	runrecord.Spec
	SecretEnv map[string]string `json:"secret_env,omitempty" jsonschema:"Variables whose values are [redacted] in the log, answers and the record."`
	// IfRunning says what a running run of the same name means: "" or
	// "error", the name is in use; "reuse", that run is the answer when
	// it runs the same command or argv, in the same cwd with the same env.
	IfRunning string `json:"if_running,omitempty" jsonschema:"reuse: if this name runs with the same command/argv, cwd and env, return that run (reused)."`
	// WaitMS, if not 0, makes Start wait that long for the run's end, and
	// answer it as process_wait does (StartResult.Waited), bounded as
	// process_wait's timeout_ms.
	WaitMS int64 `json:"wait_ms,omitempty" jsonschema:"Wait this long for the end."`
	// Watched and Progress are as in WaitRequest, for the ready wait.
	Watched  bool                                          `json:"-"`
	Progress func(elapsed time.Duration, running []string) `json:"-"`
	// RequestID, the call's request id if it had one (checked by
	// CheckRequestID), goes into the run's record: a repeat whose first
	// try's agent-box died finds the run by it (StartedBy).
	RequestID string `json:"-"`
	// delegate: the supervisor needs a scope systemd delegates to it, to
	// make the run's group in (cgroup v2; set by applyLimits).
	delegate bool
}

// StartResult is process_start's answer: the run, and how its readiness
// probe ended if one was given.
type StartResult struct {
	Run Run `json:"run"`
	// Reused: the run was running already with the same spec
	// (IfRunning "reuse"), and is returned instead of a new one.
	Reused bool `json:"reused,omitempty" jsonschema:"if_running reuse: the run was running already"`
	*ReadyResult
	ReadyAfterMS *int64 `json:"ready_after_ms,omitempty"`
	// Waited is the wait for the run's end: with WaitMS, or when the run
	// had ended by the answer (a quick command, a command not found).
	Waited *WaitResult `json:"-"`
}

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, a...))
}

// The variables agent-box sets in every run's environment. RunIDEnv is
// also the proof, once the supervisor is gone, that a process is the
// run's (System.carriesRunID): a run cannot set either itself.
const (
	NameEnv  = "AGENT_BOX_NAME"
	RunIDEnv = "AGENT_BOX_RUN_ID"
)

func validEnv(what string, env map[string]string) error {
	for k, v := range env {
		if k == NameEnv || k == RunIDEnv {
			return invalid("%s: %s is set by agent-box (it names the run, and ties its processes to it); use another variable", what, k)
		}
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return invalid("%s: variable name %s must be non-empty and contain neither '=' nor NUL", what, quoteShort(k))
		}
		if strings.ContainsRune(v, 0) {
			return invalid("%s: value of %s contains a NUL byte", what, k)
		}
	}
	return nil
}

// Bounds on process_start's arguments. Single strings stay within the
// kernel's MAX_ARG_STRLEN (execve(2)); the totals keep a record far below
// runrecord.MaxRecordBytes; a secret's length bounds the redactor's table.
const (
	MaxCommandBytes = 128 << 10
	MaxArgs         = 4096
	MaxArgvBytes    = 256 << 10
	MaxEnv          = 1024
	MaxEnvBytes     = 256 << 10
	MaxSecrets      = 64
	MaxSecretBytes  = 4 << 10
	MaxSecretTotal  = 16 << 10
	MaxPathBytes    = 4096
)

// quoteShort quotes s for an error message, cut to a readable length.
func quoteShort(s string) string {
	const max = 64
	if len(s) > max {
		return fmt.Sprintf("%q... (%d bytes)", s[:max], len(s))
	}
	return fmt.Sprintf("%q", s)
}

// checkBounds refuses oversized arguments before anything else looks at
// them, so that neither errors nor records grow with them.
func (req *StartRequest) checkBounds() error {
	if len(req.Command) > MaxCommandBytes {
		return invalid("command is %d bytes, at most %d", len(req.Command), MaxCommandBytes)
	}
	if len(req.Argv) > MaxArgs {
		return invalid("argv has %d entries, at most %d", len(req.Argv), MaxArgs)
	}
	total := 0
	for i, a := range req.Argv {
		if len(a) > MaxCommandBytes {
			return invalid("argv[%d] is %d bytes, at most %d", i, len(a), MaxCommandBytes)
		}
		total += len(a) + 1
	}
	if total > MaxArgvBytes {
		return invalid("argv is %d bytes in all, at most %d", total, MaxArgvBytes)
	}
	if len(req.Cwd) > MaxPathBytes {
		return invalid("cwd is %d bytes, at most %d", len(req.Cwd), MaxPathBytes)
	}
	if len(req.Env) > MaxEnv {
		return invalid("env has %d variables, at most %d", len(req.Env), MaxEnv)
	}
	total = 0
	for k, v := range req.Env {
		if len(k) > MaxPathBytes {
			return invalid("env: variable name %s is too long", quoteShort(k))
		}
		if len(k)+1+len(v) > MaxCommandBytes {
			return invalid("env: %s=... is %d bytes, at most %d", quoteShort(k), len(k)+1+len(v), MaxCommandBytes)
		}
		total += len(k) + 1 + len(v)
	}
	if total > MaxEnvBytes {
		return invalid("env is %d bytes in all, at most %d", total, MaxEnvBytes)
	}
	if len(req.SecretEnv) > MaxSecrets {
		return invalid("secret_env has %d variables, at most %d", len(req.SecretEnv), MaxSecrets)
	}
	total = 0
	for k, v := range req.SecretEnv {
		total += len(v)
		if len(k) > MaxPathBytes {
			return invalid("secret_env: variable name %s is too long", quoteShort(k))
		}
		if len(v) > MaxSecretBytes {
			return invalid("secret_env: the value of %s is %d bytes, at most %d", quoteShort(k), len(v), MaxSecretBytes)
		}
	}
	if total > MaxSecretTotal {
		// The redactor's table grows with the secrets' total length.
		return invalid("secret_env values are %d bytes in all, at most %d", total, MaxSecretTotal)
	}
	return nil
}

// normalize checks req and fills its defaults, taking a relative cwd from
// home; nothing is touched on disk. arg names an argument in the messages
// as the front end spells it (Manager.arg).
func (req *StartRequest) normalize(home string, arg func(string) string) error {
	if err := runrecord.ValidName(req.Name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	for _, check := range []func() error{
		req.checkBounds,
		req.checkProgram,
		func() error { return req.checkCwd(home) },
		req.checkEnv,
		func() error { return req.checkModes(arg) },
		req.checkReady,
		func() error {
			if req.RequestID == "" {
				return nil
			}
			return CheckRequestID(req.RequestID)
		},
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// checkProgram checks that req names one program, a command or an argv.
func (req *StartRequest) checkProgram() error {
	switch {
	case req.Command != "" && len(req.Argv) > 0:
		return invalid("give either command (a shell string) or argv (an array), not both")
	case req.Command == "" && len(req.Argv) == 0:
		return invalid("give command (a shell string run with /bin/sh -c) or argv (an array run without a shell)")
	}
	if strings.ContainsRune(req.Command, 0) {
		return invalid("command contains a NUL byte")
	}
	for i, a := range req.Argv {
		if strings.ContainsRune(a, 0) {
			return invalid("argv[%d] contains a NUL byte", i)
		}
	}
	if len(req.Argv) > 0 && req.Argv[0] == "" {
		return invalid("argv[0] is empty")
	}
	return nil
}

// checkCwd makes req.Cwd absolute (resolveCwd) and checks that it is a
// directory.
func (req *StartRequest) checkCwd(home string) error {
	if err := req.resolveCwd(home); err != nil {
		return err
	}
	fi, err := os.Stat(req.Cwd)
	if err != nil {
		return invalid("cwd %q does not exist or cannot be reached: %v", req.Cwd, err)
	}
	if !fi.IsDir() {
		return invalid("cwd %q is not a directory", req.Cwd)
	}
	return nil
}

// checkEnv checks env and secret_env: valid names and values, secrets
// that can be masked, no name in both.
func (req *StartRequest) checkEnv() error {
	if err := validEnv("env", req.Env); err != nil {
		return err
	}
	if err := validEnv("secret_env", req.SecretEnv); err != nil {
		return err
	}
	for k, v := range req.SecretEnv {
		if v == "" {
			return invalid("secret_env: %s is empty; an empty secret cannot be masked", k)
		}
		if _, dup := req.Env[k]; dup {
			return invalid("%s is in both env and secret_env", k)
		}
	}
	return nil
}

// checkPty checks pty, cols and rows (after capture_mode and stdin have
// their defaults): a terminal is one stream, and it is the run's stdin.
func (req *StartRequest) checkPty() error {
	if !req.Pty {
		if req.Cols != 0 || req.Rows != 0 {
			return invalid("cols and rows are the size of a terminal: give them with pty: true")
		}
		return nil
	}
	if req.CaptureMode == string(capture.Framed) {
		return invalid("capture_mode framed cannot be used with pty: true: a terminal merges stdout and stderr into one stream; use combined")
	}
	req.Stdin = "pipe" // the terminal's input
	req.Cols, req.Rows = cmp.Or(req.Cols, DefaultCols), cmp.Or(req.Rows, DefaultRows)
	return CheckSize(req.Cols, req.Rows)
}

// CheckSize checks a terminal size: process_start's and process_resize's.
func CheckSize(cols, rows int) error {
	if cols < MinCols || cols > MaxCols {
		return invalid("cols %d is out of range %d..%d", cols, MinCols, MaxCols)
	}
	if rows < MinRows || rows > MaxRows {
		return invalid("rows %d is out of range %d..%d", rows, MinRows, MaxRows)
	}
	return nil
}

// checkModes checks the enumerations and limits of req, filling the
// defaults of those not given.
func (req *StartRequest) checkModes(arg func(string) string) error {
	switch req.CaptureMode {
	case "":
		req.CaptureMode = string(capture.Combined)
	case string(capture.Combined), string(capture.Framed):
	default:
		return invalid("capture_mode %q is not one of combined, framed", req.CaptureMode)
	}
	switch req.Stdin {
	case "":
		req.Stdin = StdinNull
	case StdinNull, StdinPipe:
	default:
		return invalid("stdin %q is not one of null, pipe", req.Stdin)
	}
	if err := req.checkPty(); err != nil {
		return err
	}
	if req.Nice < 0 || req.Nice > MaxNice {
		return invalid("nice %d is out of range 0..%d (it lowers the run's priority below the server's; it cannot raise it)", req.Nice, MaxNice)
	}
	if req.TimeoutS < 0 || req.TimeoutS > MaxTimeoutS {
		return invalid("%s %d is out of range 0..%d", arg("timeout_s"), req.TimeoutS, MaxTimeoutS)
	}
	switch {
	case req.MaxLogBytes == 0:
		req.MaxLogBytes = DefaultMaxLogBytes
	case req.MaxLogBytes < 0 || req.MaxLogBytes > MaxMaxLogBytes:
		return invalid("max_log_bytes %d is out of range 1..%d", req.MaxLogBytes, MaxMaxLogBytes)
	}
	switch req.IfRunning {
	case "", IfRunningError, IfRunningReuse:
	default:
		return invalid("if_running %s is not one of error, reuse", quoteShort(req.IfRunning))
	}
	return nil
}

// checkReady checks the readiness probe and its timeout.
func (req *StartRequest) checkReady() error {
	if t := req.readyTimeout(); t != nil {
		if err := inRange("ready_timeout_s", *t, time.Second, MaxReadyTimeout); err != nil {
			return err
		}
	}
	switch {
	case req.Ready != nil && req.WaitMS != 0:
		return invalid("give ready or wait_ms, not both: ready returns once the run is ready, wait_ms once it ends")
	case req.Ready != nil:
		_, err := checkProbe(*req.Ready)
		return err
	case req.ReadyTimeoutS != nil:
		return invalid("ready_timeout_s bounds the ready probe; give ready too")
	}
	return nil
}

// readyTimeout is ready_timeout_s as a duration; nil when not given.
func (req *StartRequest) readyTimeout() *time.Duration {
	if req.ReadyTimeoutS == nil {
		return nil
	}
	return new(Duration(*req.ReadyTimeoutS, time.Second))
}

// specDiff says how the run rec records differs from what req asks, in
// what a reused run must match: the program, its cwd, env, stdin and
// capture mode (a reused run must serve what the caller will do with it).
// Secret values are not stored, so secret_env is compared by names.
func specDiff(rec *runrecord.Record, req *StartRequest) string {
	red := redactorOf(req.SecretEnv)
	var argv []string
	for _, a := range req.Argv {
		argv = append(argv, red.String(a))
	}
	env := map[string]string{}
	for k, v := range req.Env {
		env[k] = red.String(v)
	}
	secrets := slices.Sorted(maps.Keys(req.SecretEnv))
	switch {
	case rec.Command != red.String(req.Command):
		return fmt.Sprintf("another command: %s (asked: %s)", quoteShort(rec.Command), quoteShort(red.String(req.Command)))
	case !slices.Equal(rec.Argv, argv):
		return fmt.Sprintf("another argv: %s (asked: %s)", quoteShort(strings.Join(rec.Argv, " ")), quoteShort(strings.Join(argv, " ")))
	case filepath.Clean(rec.Cwd) != red.String(req.Cwd):
		return fmt.Sprintf("another cwd: %s (asked: %s)", quoteShort(rec.Cwd), quoteShort(red.String(req.Cwd)))
	case rec.Pty != req.Pty:
		return fmt.Sprintf("pty %t (asked: %t)", rec.Pty, req.Pty)
	case rec.Stdin != req.Stdin:
		return fmt.Sprintf("stdin %s (asked: %s)", quoteShort(rec.Stdin), quoteShort(req.Stdin))
	case rec.CaptureMode != req.CaptureMode:
		return fmt.Sprintf("capture_mode %s (asked: %s)", quoteShort(rec.CaptureMode), quoteShort(req.CaptureMode))
	case limitsOf(rec.Limits) != limitsOf(req.Limits):
		return fmt.Sprintf("limits %s (asked: %s)", DescribeLimits(limitsOf(rec.Limits)), DescribeLimits(limitsOf(req.Limits)))
	case !maps.Equal(rec.Env, env) && len(rec.Env)+len(env) > 0:
		return "another env: " + envDiff(rec.Env, env)
	case !slices.Equal(slices.Sorted(slices.Values(rec.SecretEnv)), secrets):
		return fmt.Sprintf("other secret_env names: %s (asked: %s)", strings.Join(rec.SecretEnv, " "), strings.Join(secrets, " "))
	}
	return ""
}

// envDiff names the first variable that differs between had and want.
func envDiff(had, want map[string]string) string {
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if v, ok := had[k]; !ok {
			return fmt.Sprintf("%s is not set in it (asked: %s)", k, quoteShort(want[k]))
		} else if v != want[k] {
			return fmt.Sprintf("%s=%s (asked: %s)", k, quoteShort(v), quoteShort(want[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(had)) {
		if _, ok := want[k]; !ok {
			return fmt.Sprintf("%s=%s, not asked for", k, quoteShort(had[k]))
		}
	}
	return ""
}

// redactorOf masks the values of secretEnv, those within the bounds
// (a request refused for its bounds may hold larger ones).
func redactorOf(secretEnv map[string]string) *capture.Redactor {
	var b [][]byte
	for _, v := range secretEnv {
		if len(v) <= MaxSecretBytes {
			b = append(b, []byte(v))
		}
	}
	return capture.NewRedactor(b)
}

// resolveCwd makes req.Cwd absolute the way a shell in the home directory
// would: empty is the home directory, "~" and "~/..." expand to it, and a
// relative path is taken from it. Not from agent-box's own cwd, which is
// wherever ssh started it and means nothing to the agent.
func (req *StartRequest) resolveCwd(home string) error {
	if filepath.IsAbs(req.Cwd) {
		req.Cwd = filepath.Clean(req.Cwd) // "/srv/app/" is "/srv/app", also to if_running reuse
		return nil
	}
	if strings.HasPrefix(req.Cwd, "~") && req.Cwd != "~" && !strings.HasPrefix(req.Cwd, "~/") {
		return invalid("cwd %s: only ~ and ~/ are expanded (another user's home, ~user, is not); give an absolute path", quoteShort(req.Cwd))
	}
	if home == "" {
		return invalid("cwd %s is relative to the home directory, and there is none: $HOME is not defined", quoteShort(req.Cwd))
	}
	req.Cwd = filepath.Join(home, strings.TrimPrefix(strings.TrimPrefix(req.Cwd, "~"), "/"))
	return nil
}

// home is the home directory of runs: HOME in the environment they
// inherit, as os.UserHomeDir reads it in ours.
func (m *Manager) home() string { return lookEnv(m.Env, "HOME") }

// childEnv is the inherited environment with env and secrets laid over it.
func childEnv(inherited []string, req *StartRequest, name, runID string) []string {
	over := map[string]string{NameEnv: name, RunIDEnv: runID}
	if req.Pty {
		over["TERM"] = ptyTerm // a terminal program reads its kind here
	}
	for k, v := range req.Env {
		over[k] = v
	}
	for k, v := range req.SecretEnv {
		over[k] = v
	}
	env := make([]string, 0, len(inherited)+len(over))
	for _, kv := range inherited {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := over[k]; ok {
			continue
		}
		env = append(env, kv)
	}
	for k, v := range over {
		env = append(env, k+"="+v)
	}
	return env
}

func lookEnv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// resolve finds the executable the way the child's execvp would: against
// the child's PATH and, for a relative path, its cwd.
func resolve(argv0, cwd string, env []string) (string, error) {
	if strings.Contains(argv0, "/") {
		p := argv0
		if !filepath.IsAbs(p) {
			p = filepath.Join(cwd, p)
		}
		if err := executable(p); err != nil {
			return "", invalid("argv[0] %s: %v", quoteShort(argv0), err)
		}
		return p, nil
	}
	for _, dir := range filepath.SplitList(lookEnv(env, "PATH")) {
		if dir == "" {
			dir = "."
		}
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(cwd, dir)
		}
		p := filepath.Join(dir, argv0)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", invalid("argv[0] %s was not found in PATH %s", quoteShort(argv0), quoteShort(lookEnv(env, "PATH")))
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return errors.New("is a directory")
	}
	if fi.Mode()&0o111 == 0 {
		return errors.New("is not executable")
	}
	return nil
}

// Start starts a run and returns it once its supervisor has reported the
// child's pid (or why it could not be started).
//
// A repeat (Once) whose first try's ready wait was cut starts nothing: it
// probes the run that try started again (startedBefore).
func (m *Manager) Start(ctx context.Context, req StartRequest) (StartResult, error) {
	if c, began := resumed(ctx); c != nil {
		return m.startedBefore(ctx, req, c, began)
	}
	if req.WaitMS != 0 {
		// Checked before the start: a wait_ms out of range must not leave
		// a run behind.
		if _, _, err := m.waitPolicy().waitBound("wait_ms", new(Duration(req.WaitMS, time.Millisecond)), req.Watched); err != nil {
			return StartResult{}, err
		}
	}
	res, err := m.start(ctx, &req)
	err = maskSecrets(err, req.SecretEnv)
	if err != nil {
		return res, err
	}
	began := time.Now()
	if req.Ready != nil {
		m.ready(ctx, &res, &req, began)
	}
	m.waitEnd(ctx, &res, &req, began)
	return res, nil
}

// waitEnd waits for res's run to end, wait_ms from began at most, and
// answers its end as process_wait does. Without wait_ms it answers the
// end only of a run that has ended already: a command that fails at once
// says why in the same answer. Best effort: the run is started, and a
// record that cannot be read now is the next call's to report.
func (m *Manager) waitEnd(ctx context.Context, res *StartResult, req *StartRequest, began time.Time) {
	if req.WaitMS == 0 {
		run, err := m.Get(res.Run.Name, res.Run.RunID)
		if err != nil || !run.Ended() {
			return
		}
	}
	bound, shortened, err := m.waitPolicy().waitBound("wait_ms", new(Duration(req.WaitMS, time.Millisecond)), req.Watched)
	if err != nil {
		return
	}
	w, err := m.wait(ctx, WaitRequest{Names: []string{res.Run.Name}, RunID: res.Run.RunID, Watched: req.Watched, Progress: req.Progress},
		timeLeft(bound, began, time.Now()), shortened)
	if err != nil {
		return
	}
	res.Run, res.Waited = w.Run, &w
	if w.WaitTimedOut && ctx.Err() != nil {
		// The client went away under the wait: a repeat of the call
		// waits what is left of it (startedBefore).
		cutShort(ctx, cut{RunID: res.Run.RunID, Reused: res.Reused})
	}
}

// ready runs req's ready probe on res's run from began on, and notes a
// wait that ctx cut on ctx's try (cutShort).
func (m *Manager) ready(ctx context.Context, res *StartResult, req *StartRequest, began time.Time) {
	ready := m.awaitReady(ctx, res.Run, req, began)
	after := ready.After.Milliseconds()
	res.ReadyResult, res.ReadyAfterMS = &ready, &after
	if again, err := m.Get(res.Run.Name, res.Run.RunID); err == nil {
		res.Run = again // as of the answer: it may have ended
	}
	if ready.cut {
		cutShort(ctx, cut{RunID: res.Run.RunID, Reused: res.Reused})
	}
}

// startedBefore answers a repeat of a start whose first try, which began
// then, was cut in its ready wait: the run that try started (or reused)
// is probed again for what is left of the call's bound, and the answer
// is the one the whole call would have given.
func (m *Manager) startedBefore(ctx context.Context, req StartRequest, c *cut, began time.Time) (StartResult, error) {
	if err := req.checkReady(); err != nil {
		return StartResult{}, err
	}
	run, err := m.Get(req.Name, c.RunID)
	if err != nil {
		return StartResult{}, err
	}
	res := StartResult{Run: run, Reused: c.Reused}
	if req.Ready != nil {
		m.ready(ctx, &res, &req, began)
	}
	m.waitEnd(ctx, &res, &req, began)
	return res, nil
}

// maskSecrets is err with the values of secretEnv masked in its
// message: errors quote the cwd, argv[0], the PATH, the supervisor's exec
// error, and the secrets must not come back through them.
func maskSecrets(err error, secretEnv map[string]string) error {
	if err == nil || len(secretEnv) == 0 || len(secretEnv) > MaxSecrets {
		return err
	}
	return &redactedError{msg: redactorOf(secretEnv).String(err.Error()), err: err}
}

// redactedError keeps what errors.Is needs while showing a masked message.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// program is what the supervisor executes for req: its path, argv, and
// whose exit status the run reports. Resolved before anything touches the
// disk, so a typo changes nothing.
func (req *StartRequest) program(inherited []string) (path string, argv []string, statusOf string, err error) {
	if len(req.Argv) == 0 {
		script, statusOf := shellScript(req.Command)
		return "/bin/sh", []string{"/bin/sh", "-c", script}, statusOf, nil
	}
	path, err = resolve(req.Argv[0], req.Cwd, childEnv(inherited, req, req.Name, ""))
	return path, req.Argv, StatusOfProgram, err
}

// nameFree decides, under the name's lock, whether req may start a run:
// the newest run of the name blocks it while it may be alive, unless
// req reuses it (then it is returned).
func (m *Manager) nameFree(req *StartRequest) (reused *Run, err error) {
	prev, err := m.Get(req.Name, "")
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	case prev.rec == nil:
		// Nothing proves a run whose record cannot be read is over: a
		// newer agent-box may have written it for a live run.
		return nil, fmt.Errorf("%w: the newest run of %q (run id %s) has a record this agent-box cannot read (%s), so it may still be running; choose another name, or if you know it is over, remove it by its run_id (%s)",
			ErrNameInUse, req.Name, prev.RunID, prev.Reason, m.words().Remove)
	case !prev.Verdict.MayBeAlive:
		return nil, nil
	case req.IfRunning != IfRunningReuse:
		return nil, fmt.Errorf("%w: run %q (run id %s, pid %d) is %s (%s); kill it first (%s) or choose another name",
			ErrNameInUse, req.Name, prev.RunID, prev.PID, prev.State, prev.Reason, m.words().Kill)
	}
	if diff := specDiff(prev.rec, req); diff != "" {
		return nil, fmt.Errorf("%w: run %q (run id %s) is %s with %s; kill it first (%s), or restart it to run it as asked (%s)",
			ErrNameInUse, req.Name, prev.RunID, prev.State, diff, m.words().Kill, m.words().Restart)
	}
	return &prev, nil
}

// newRecord is the first record of a run of req, its secrets masked.
func (m *Manager) newRecord(req *StartRequest, runID string, now time.Time, statusOf string) *runrecord.Record {
	rec := &runrecord.Record{
		Version:   runrecord.Version,
		Name:      req.Name,
		RunID:     runID,
		Spec:      masked(req.Spec, redactorOf(req.SecretEnv)),
		LogFormat: "raw",
		BootID:    m.Sys.Boot,
		StartedAt: now,
		LogPath:   m.Store.LogPath(req.Name, runID),
		SecretEnv: slices.Sorted(maps.Keys(req.SecretEnv)),
		StatusOf:  statusOf,
		RequestID: req.RequestID,
	}
	if req.CaptureMode == string(capture.Framed) {
		rec.LogFormat = logframe.FormatName
	}
	return rec
}

// masked is spec as it may be recorded: its secret places through red.
func masked(spec runrecord.Spec, red *capture.Redactor) runrecord.Spec {
	return mapSecretPlaces(spec, red.String)
}

// mapSecretPlaces is spec with f applied to every string a secret's value
// may be in: the command, cwd, argv and env values, the ready probe's
// pattern and URL. It is the one list of them, for masking (masked) and
// for finding a mask (respec): an option of Spec that can hold a secret
// is added here. spec's argv, env and probe are copied, not changed.
func mapSecretPlaces(spec runrecord.Spec, f func(string) string) runrecord.Spec {
	spec.Command, spec.Cwd = f(spec.Command), f(spec.Cwd)
	if spec.Ready != nil {
		p := *spec.Ready
		p.Log, p.HTTP = f(p.Log), f(p.HTTP)
		spec.Ready = &p
	}
	argv := spec.Argv
	spec.Argv = nil
	for _, a := range argv {
		spec.Argv = append(spec.Argv, f(a))
	}
	if env := spec.Env; len(env) > 0 {
		spec.Env = make(map[string]string, len(env))
		for k, v := range env {
			spec.Env[k] = f(v)
		}
	}
	return spec
}

func (m *Manager) start(ctx context.Context, req *StartRequest) (StartResult, error) {
	// The next start's spare (the first start's launches the first):
	// launched once this one has its child (or failed), so that it does
	// not compete with it for the CPU.
	defer m.fillSpare()
	if err := req.normalize(m.home(), m.arg); err != nil {
		return StartResult{}, err
	}
	path, argv, statusOf, err := req.program(m.Env)
	if err != nil {
		return StartResult{}, err
	}
	if err := m.applyLimits(req); err != nil {
		return StartResult{}, err
	}
	unlock, err := m.lockName(req.Name)
	if err != nil {
		return StartResult{}, err
	}
	defer unlock()
	// Under the lock no start of this name is in progress: what earlier,
	// killed starts left half built goes (best effort: it is in nobody's
	// way, since List ignores it).
	m.Store.RemoveAbandoned(req.Name, m.supervisorAlive)
	if reused, err := m.nameFree(req); err != nil || reused != nil {
		if reused != nil {
			return StartResult{Run: *reused, Reused: true}, nil
		}
		return StartResult{}, err
	}
	now := time.Now().UTC()
	runID := runrecord.NewRunID(now)
	rec := m.newRecord(req, runID, now, statusOf)
	sup, err := m.create(rec, m.spec(req, rec, path, argv), req.delegate)
	if err != nil {
		return StartResult{}, err
	}
	if _, err := sup.Start(m.StartTimeout); err != nil {
		return StartResult{}, m.startFailed(sup, m.Store.RunDir(req.Name, runID), err)
	}
	return m.started(req.Name, runID, req.asked(argv), redactorOf(req.SecretEnv))
}

// asked is what req runs, once program has given its argv.
func (req *StartRequest) asked(argv []string) asked {
	w := asked{argv: argv}
	if len(req.Argv) == 0 {
		if _, name, ok := loneCommand(req.Command); ok {
			w.program = name
		}
	}
	return w
}

// lockName takes the name's lock for a start.
func (m *Manager) lockName(name string) (unlock func(), err error) {
	unlock, err = m.Store.LockName(name, 10*time.Second)
	if errors.Is(err, runrecord.ErrLocked) {
		return nil, fmt.Errorf("%w: another agent-box is starting a run named %q right now", ErrNameInUse, name)
	}
	return unlock, err
}

// spec is what the supervisor of rec, a run of req, is told to run: the
// program resolved (path, argv), its whole environment, its secrets, and
// the run's options as recorded.
func (m *Manager) spec(req *StartRequest, rec *runrecord.Record, path string, argv []string) *supervisor.Spec {
	return &supervisor.Spec{
		StateDir:    m.Store.Root,
		Name:        rec.Name,
		RunID:       rec.RunID,
		Path:        path,
		Argv:        argv,
		Env:         childEnv(m.Env, req, rec.Name, rec.RunID),
		Dir:         req.Cwd,
		Secrets:     slices.Collect(maps.Values(req.SecretEnv)),
		Run:         rec.Spec,
		KillGraceMS: int(m.waitPolicy().TimeoutGrace.Milliseconds()),
	}
}

// create makes the run dir with its first record, rec, and launches the
// run's supervisor in it, not yet told to start the child; in a scope
// systemd delegates to it when delegate (cgroup v2 limits).
func (m *Manager) create(rec *runrecord.Record, spec *supervisor.Spec, delegate bool) (*supervisor.Launched, error) {
	launch := m.launchMode()
	if delegate {
		// Under cgroup v2 the supervisor caps its run only in a group of
		// its own (Enforceable).
		launch = LaunchSystemd
	}
	req := supervisor.LaunchRequest{Command: m.Supervisor, Spec: spec, Env: m.Env, Scope: launch == LaunchSystemd, Delegate: delegate}
	// A spare is in no systemd scope.
	sup, err := m.createWith(rec, req, !req.Scope)
	if errors.Is(err, errSpareFailed) {
		// The run was never visible: start it as if there had been no
		// spare.
		sup, err = m.createWith(rec, req, false)
	}
	return sup, err
}

// errSpareFailed is createWith's error when the spare supervisor did not
// take the run.
var errSpareFailed = errors.New("the spare supervisor failed")

// adoptLimit bounds the wait for a spare supervisor to take its run.
const adoptLimit = 5 * time.Second

// createWith is create with the supervisor req asks for, or with the
// spare, when spare and m keeps one.
func (m *Manager) createWith(rec *runrecord.Record, req supervisor.LaunchRequest, spare bool) (*supervisor.Launched, error) {
	// The supervisor is started inside the run dir before the dir and its
	// record become visible, so that the first record anybody reads names
	// a supervisor: a run being started reads "starting", never
	// "start_interrupted" (which frees its name and lets process_remove
	// delete it).
	var sup *supervisor.Launched
	err := m.Store.CreateWith(rec, func(dir string) (ready func() error, err error) {
		req.Dir = dir
		if spare {
			sup, ready = m.offerSpare(req)
		}
		if sup == nil {
			if sup, err = supervisor.Launch(req); err != nil {
				return nil, err
			}
		}
		rec.SupervisorPID, rec.SupervisorStartTime = sup.PID, sup.StartTime
		return ready, nil
	})
	switch {
	case errors.Is(err, runrecord.ErrNotDurable):
		// The run is in place and listed; only the fsync that makes it
		// survive a crash failed. Aborting now would leave a listed run
		// whose supervisor was killed: start it, and say so.
		m.logf("run %s/%s: %v", rec.Name, rec.RunID, err)
	case err != nil:
		if sup != nil {
			// An adopted spare makes its files in the dir being built,
			// and may have made one while the store removed it
			// (RemoveAll then fails: TestFileSizeLimitBelowTheRecord
			// found such a dir left). Once it is gone, so is what it left.
			sup.Abort()
			sup.AwaitExit(supervisorEndLimit)
			m.Store.RemoveAbandoned(rec.Name, m.supervisorAlive)
		}
		return nil, fmt.Errorf("creating run: %w", err)
	}
	return sup, nil
}

// offerSpare hands req's run to the spare, if m keeps one that is alive:
// it takes the run while the record is written, and taken says, before
// the run becomes visible, whether it did. nil when there is none, or it
// cannot be told.
func (m *Manager) offerSpare(req supervisor.LaunchRequest) (sup *supervisor.Launched, taken func() error) {
	sup = m.spares.Take()
	if sup == nil {
		return nil, nil
	}
	adopted, err := sup.Adopt(req.Spec, req.Dir, adoptLimit)
	if err != nil {
		sup.Abort()
		m.spareFailed(req.Spec, err)
		return nil, nil
	}
	return sup, func() error {
		err := adopted()
		if err != nil {
			m.spareFailed(req.Spec, err)
			return fmt.Errorf("%w: %w", errSpareFailed, err)
		}
		m.spares.Adopted(nil)
		return nil
	}
}

// spareFailed notes that the spare did not take the run of spec, which
// then gets a supervisor launched for it.
func (m *Manager) spareFailed(spec *supervisor.Spec, err error) {
	m.logf("run %s/%s: %v; launching a supervisor for it", spec.Name, spec.RunID, err)
	m.spares.Adopted(err)
}

// supervisorEndLimit bounds process_start's wait for a supervisor that
// reported a failure to exit.
const supervisorEndLimit = 5 * time.Second

// startFailed is process_start's error for a supervisor, launched in
// runDir, that did not start the child: err, and what its log says.
func (m *Manager) startFailed(sup *supervisor.Launched, runDir string, err error) error {
	if t := (*supervisor.ReportTimeoutError)(nil); errors.As(err, &t) {
		err = fmt.Errorf("%w; if it had started the process, %s shows the run%w", err, m.words().List, silent{ErrUnknownOutcome})
	}
	// A supervisor reports a failure before it is done: it may still be
	// killing a child whose pid it could not record, or writing the start
	// error. Until it exits the run reads "starting", so answer once it
	// has: the answer and every later listing then agree.
	sup.AwaitExit(supervisorEndLimit)
	sup.DropReserve()
	// The supervisor (or the launcher before it: systemd-run) says why in
	// its log; the first lines of it belong in the answer.
	if why := supervisor.LogHead(runDir); why != "" {
		err = fmt.Errorf("%w; its log says: %s", err, why)
	}
	return err
}

// started is process_start's answer for a run whose supervisor reported
// the child started: asked is what it was told to run, red the run's
// secrets' Redactor.
func (m *Manager) started(name, runID string, want asked, red *capture.Redactor) (StartResult, error) {
	run, err := m.Get(name, runID)
	if err == nil && run.Verdict.Reason == outcome.ReasonExiting {
		// The child exited at once and the supervisor is writing that
		// down: answer with the exit rather than "running".
		m.waitRecorded(name, runID, time.Second)
		run, err = m.Get(name, runID)
	}
	if err == nil && run.Verdict.LeaderAlive {
		if live, err := proc.Cmdline(run.PID); err == nil && len(live) > 0 && !runsAsAsked(live, want) {
			// In the words the record keeps: a secret in the command
			// line is no more said here than there.
			shown := make([]string, len(live))
			for i, a := range live {
				shown[i] = red.String(a)
			}
			run.Reason += fmt.Sprintf("; its command line now reads %s (/proc/%d/cmdline), not what was asked: it exec'd another program or rewrote its own", quoteShort(strings.Join(shown, " ")), run.PID)
		}
	}
	return StartResult{Run: run}, err
}

// asked is what a start asked the kernel to run: the argv the supervisor
// exec'd, and for a lone command run by the shell (status_of program),
// the name of the program the shell execs in its place.
type asked struct {
	argv    []string
	program string
}

// runsAsAsked reports whether live, a just started leader's command line
// as the kernel shows it, is what was asked: the argv (or, for a script,
// its interpreter's command line ending with it, as execve(2) makes it
// for a "#!" line), or the program the shell exec'd for a lone command.
// The supervisor is told the spec over a channel no other process can
// reach; this is what the kernel says it started.
func runsAsAsked(live []string, want asked) bool {
	argv := want.argv
	if slices.Equal(live, argv) {
		return true
	}
	if want.program != "" {
		for _, w := range live[:min(len(live), 3)] {
			if filepath.Base(w) == filepath.Base(want.program) {
				return true
			}
		}
		return false
	}
	// A script: [interpreter, optional argument, the path exec'd, argv[1:]...].
	n := len(live) - len(argv)
	return (n == 1 || n == 2) && slices.Equal(live[n+1:], argv[1:]) &&
		filepath.Base(live[n]) == filepath.Base(argv[0])
}
