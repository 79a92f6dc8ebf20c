// Package runrecord holds the run record, its atomic on-disk store and a
// defensive reader.
//
// Layout under the state directory (dirs 0700, files 0600):
//
//	runs/<name>/.lock              flock(2) held while a run of <name> starts
//	runs/<name>/<run_id>/record.json
//	runs/<name>/<run_id>/log       combined bytes or logframe frames
//
// A record is only replaced atomically (temp file in the same dir, fsync,
// rename, fsync of the dir), so a reader sees the old or the new record,
// never a torn one. Paths are built only from validated names and run ids,
// and files are opened with O_NOFOLLOW so a planted symlink is refused.
package runrecord

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Version is the record format this build writes and reads.
const Version = 1

var (
	ErrNotFound           = errors.New("run record not found")
	ErrCorrupt            = errors.New("run record is corrupt")
	ErrUnsupportedVersion = errors.New("run record has an unsupported version")
	ErrInvalidName        = errors.New("invalid run name")
	ErrInvalidRunID       = errors.New("invalid run id")
	ErrLocked             = errors.New("name is locked by another start")

	// ErrSymlink is returned when a path component under the state
	// directory is a symlink: agent-box never creates one, so one that is
	// there was planted, and following it could read or write anywhere.
	ErrSymlink = errors.New("refusing a symlink in the state directory")

	// ErrNotDurable is a write that put the new record in place, readers
	// see it, but whose last step, the fsync of the directory after the
	// rename, failed: whether the new record survives a crash or power
	// loss is unknown. After one there is the old record (for Create: no
	// run) or the new one, never a torn one. The write is not undone, as
	// the rename cannot be; writing the same record again is safe.
	ErrNotDurable = errors.New("run record written but not known to be durable")
)

// VersionError is a record whose version this build does not read: 0 for a
// record without one, higher than Version for one written by a newer build.
// It wraps ErrUnsupportedVersion.
type VersionError struct {
	Found int
}

func (e *VersionError) Error() string {
	if e.Found == 0 {
		return fmt.Sprintf("%v: no version field (this build reads version %d)", ErrUnsupportedVersion, Version)
	}
	return fmt.Sprintf("%v: version %d (this build reads version %d)", ErrUnsupportedVersion, e.Found, Version)
}

func (e *VersionError) Unwrap() error { return ErrUnsupportedVersion }

// A run dir's files as the store names them: the record and the run's
// output. The supervisor's own files are named in package supervisor
// (supervisor.StderrFile and the like).
const (
	RecordFile = "record.json"
	LogFile    = "log"
)

const (
	lockFile = ".lock" // in a name's directory: see LockName

	// MaxRecordBytes bounds what Read will load: a record is a few hundred
	// bytes, so anything near this is not one, and reading it whole would
	// let a stray file exhaust memory.
	MaxRecordBytes = 1 << 20

	// MaxNameLen bounds a run's name.
	MaxNameLen = 64
)

// Exit is what the supervisor recorded when the child (the group leader)
// exited. Code and Signal are raw facts, never folded into 128+N.
type Exit struct {
	Code     *int      `json:"code,omitempty"`   // exit status when the child exited normally
	Signal   string    `json:"signal,omitempty"` // e.g. "SIGKILL" when it was killed by a signal
	At       time.Time `json:"at"`
	TimedOut bool      `json:"timed_out,omitempty"` // the supervisor killed it at timeout_s
	// OOMKilled: the kernel killed a process of the run for its own
	// memory cap: the run's cgroup counted a kill and its cap's own OOM
	// (cgroup.Usage.LimitHits), read by the supervisor at the exit.
	OOMKilled bool `json:"oom_killed,omitempty"`
	// What the run used, as the supervisor measured it at the exit: from
	// the run's cgroup when it has one, else from wait4's rusage (the
	// leader and the descendants it waited for).
	CPUMS           int64 `json:"cpu_ms,omitempty"`
	PeakMemoryBytes int64 `json:"peak_memory_bytes,omitempty"`
	// PidsMaxHit counts the forks and clones the run's cgroup refused at
	// its pids cap (pids.events "max"), read by the supervisor at the
	// exit: a run that failed for it says so.
	PidsMaxHit int64 `json:"pids_max_hit,omitempty"`
}

// Limits are a run's resource caps, enforced by a cgroup of its own (see
// docs/architecture/limits.md). A zero field is no cap.
type Limits struct {
	MemoryMB   int `json:"memory_mb,omitempty"`                             // memory, swap included, in MiB
	CPUPercent int `json:"cpu_percent,omitempty" jsonschema:"100: one CPU"` // of one CPU: 200 is two CPUs
	Pids       int `json:"pids,omitempty"`                                  // processes and threads at once
}

// Zero reports whether l caps nothing.
func (l Limits) Zero() bool { return l == Limits{} }

// Spec is what a run was asked to run: process_start's options that are
// recorded, as given (secret values masked, defaults filled), and that
// process_restart runs again. It is the one description of each option:
// process_start's arguments embed it, and its tags are what the tool's
// schema says of them (jsonschema: the description; bounds are set where
// the schema is built, from the constants that enforce them).
type Spec struct {
	Command string   `json:"command,omitempty" jsonschema:"Shell command (/bin/sh -c); a lone simple command is exec'd: pid and exit status are the program's, else the shell's (status_of). Give this or argv."`
	Argv    []string `json:"argv,omitempty" jsonschema:"Program and arguments, run without a shell. Give this or command."`
	Cwd     string   `json:"cwd" jsonschema:"Absolute, or from the home directory (the default; ~ works)."`
	// Env: overrides of the inherited environment; the record holds them
	// redacted.
	Env         map[string]string `json:"env,omitempty" jsonschema:"Variables set over the inherited environment."`
	CaptureMode string            `json:"capture_mode" jsonschema:"combined: one stream in write order. framed: stdout and stderr apart, each byte-exact."`
	Stdin       string            `json:"stdin" jsonschema:"pipe: keep stdin open for process_write."`
	// Pty: the child runs on a pseudo-terminal the supervisor holds, of
	// Cols×Rows (the latest size process_resize set); stdin is the terminal.
	Pty      bool `json:"pty,omitempty" jsonschema:"On a terminal (TERM=xterm-256color), stdin its input; combined only."`
	Cols     int  `json:"cols,omitempty"`
	Rows     int  `json:"rows,omitempty"`
	TimeoutS int  `json:"timeout_s,omitempty" jsonschema:"Then TERM, and KILL 5 s later, every process of the run. 0: none."`
	// Nice lowers the CPU priority of the run's processes below the
	// server's, as nice(1) does: up to 19 (the kernel's lowest is 19).
	Nice        int   `json:"nice,omitempty" jsonschema:"As nice(1): up to 19 lower its processes' CPU priority below others'."`
	MaxLogBytes int64 `json:"max_log_bytes,omitempty" jsonschema:"Log size cap (output is still drained). Default 1 GiB."`
	// Limits are the caps the run was started under; nil: none.
	Limits *Limits `json:"limits,omitempty" jsonschema:"Caps, in a cgroup; refused where not enforceable. Unset: the server's defaults."`
	// Ready, if set, makes process_start return only once the probe
	// passes, the run ends, or ReadyTimeoutS (nil: the wait policy's
	// default) passes; process_restart probes the new run again so.
	Ready         *ReadyProbe `json:"ready,omitempty" jsonschema:"Return once this one probe passes, the run ends, or ready_timeout_s."`
	ReadyTimeoutS *int64      `json:"ready_timeout_s,omitempty" jsonschema:"Over 50 needs a progress token."`
}

// ReadyProbe says when a run counts as ready. Exactly one of its fields
// is set. Probes run in agent-box, for the call only (process_start's,
// process_restart's): the run never depends on them. A record's probe is
// checked as a request's before a restart runs it (runs).
type ReadyProbe struct {
	// Log: RE2, a line of output matches.
	Log string `json:"log,omitempty" jsonschema:"RE2 matching a line"`
	// TCPPort: a process of the run listens on TCPPort, and a TCP
	// connection to localhost:TCPPort is accepted.
	TCPPort int `json:"tcp_port,omitempty"`
	// HTTP: a GET of this http(s) URL gets a response with a status below
	// 500; a local URL's port is the run's (as TCPPort).
	HTTP string `json:"http,omitempty" jsonschema:"URL answering below 500"`
}

// Record is one run. Fields written at start by agent-box: everything up to
// LogPath, and the supervisor's pid, which it started before the record
// became visible. The supervisor then adds the child's pid, and later Exit
// and the log status. Secrets never appear in a record in clear.
type Record struct {
	Version int    `json:"version"`
	Name    string `json:"name"`
	RunID   string `json:"run_id"`
	// Spec: Command is a shell string run with /bin/sh -c, Argv is
	// exec'd directly when Command is empty.
	Spec
	// StatusOf says whose exit status the run reports: "program" when the
	// shell exec'd a lone simple command (or there was no shell), "shell"
	// when the shell stayed as the leader. Empty in records written before
	// it existed: "shell" for a Command, "program" for Argv.
	StatusOf  string    `json:"status_of,omitempty"`
	SecretEnv []string  `json:"secret_env,omitempty"` // names only
	LogFormat string    `json:"log_format"`           // "raw" or logframe.FormatName
	BootID    string    `json:"boot_id"`
	StartedAt time.Time `json:"started_at"`
	LogPath   string    `json:"log_path"`

	// RequestID is the request id (wire.RequestMeta) of the process_start
	// or process_restart that started the run, if it had one: what tells,
	// after the agent-box that applied it died before it answered, that
	// the start was applied.
	RequestID string `json:"request_id,omitempty"`

	SupervisorPID       int    `json:"supervisor_pid,omitempty"`
	SupervisorStartTime uint64 `json:"supervisor_start_time,omitempty"`
	PID                 int    `json:"pid,omitempty"`
	PIDStartTime        uint64 `json:"pid_start_time,omitempty"`
	StartError          string `json:"start_error,omitempty"` // the child could not be started

	Exit       *Exit      `json:"exit,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"` // = Exit.At, kept flat for readers

	// Log status, final once OutputClosed is true.
	OutputClosed bool   `json:"output_closed,omitempty"` // every writer of the child's pipes has closed them
	LogBytes     int64  `json:"log_bytes,omitempty"`     // bytes written to the log by the supervisor
	LogDropped   int64  `json:"log_dropped,omitempty"`   // bytes drained but not written (error or cap)
	LogCapped    bool   `json:"log_capped,omitempty"`    // stopped writing at MaxLogBytes
	LogError     string `json:"log_error,omitempty"`     // first write error; the log is incomplete
}

// NamePattern is what ValidName accepts, as a regular expression (for a
// tool's schema): a letter or digit, then up to MaxNameLen-1 of those,
// '.', '_' and '-'.
const NamePattern = "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"

// errNameRequired is ValidName's error for an empty name: in the words
// of a missing argument, which is what it is to the caller, and an
// ErrInvalidName all the same.
var errNameRequired error = nameRequired{}

type nameRequired struct{}

func (nameRequired) Error() string        { return "name is required" }
func (nameRequired) Is(target error) bool { return target == ErrInvalidName }

// ValidName checks a run name against NamePattern.
// Errors wrap ErrInvalidName and say what is wrong (empty, too long, which
// character at which position). Names are never rewritten.
func ValidName(name string) error {
	if name == "" {
		return errNameRequired
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %s: %s", ErrInvalidName, quoteShort(name), fmt.Sprintf(format, args...))
	}
	if len(name) > MaxNameLen {
		return bad("%d bytes, at most %d", len(name), MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !isNameByte(c) {
			return bad("byte 0x%02x at position %d is not allowed (allowed: A-Z a-z 0-9 . _ -)", c, i)
		}
		// ".", "..", ".lock" and "-x" (an option to whatever is handed
		// the name) all start with punctuation.
		if i == 0 && !isAlnum(c) {
			return bad("must start with a letter or digit")
		}
	}
	return nil
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

func isNameByte(c byte) bool { return nameBytes[c] }

var nameBytes = func() (t [256]bool) {
	for c := range 256 {
		t[c] = isAlnum(byte(c)) || c == '.' || c == '_' || c == '-'
	}
	return t
}()

// quoteShort quotes s for an error message, cut so that a hostile
// megabyte-long argument does not become a megabyte-long error.
func quoteShort(s string) string {
	const max = 80
	if len(s) <= max {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q...", s[:max])
}

// NewRunID returns a run id that sorts by start time and is unique even for
// runs started in the same nanosecond by different processes, e.g.
// "20261202T141701.123456789Z-3f9a1c".
//
// The time is printed in UTC with a fixed width, so byte order is time
// order; the 24 random bits separate runs of the same nanosecond, and Create
// refuses an existing run dir, so a collision fails instead of merging two
// runs. t must lie in the years 0000-9999.
func NewRunID(t time.Time) string {
	// math/rand/v2's generator is ChaCha8 seeded by the kernel: as
	// unpredictable as needed here. crypto/rand would add its package
	// inits (the FIPS module) to the start of every agent-box-supervisor,
	// which links nothing else of crypto.
	r := rand.Uint32()
	b := [runIDRandBytes]byte{byte(r), byte(r >> 8), byte(r >> 16)}
	return t.UTC().Format(runIDTimeLayout) + "-" + hex.EncodeToString(b[:])
}

// RunIDAt is the time part of the run ids made at t: ids made at t or
// later sort at or after it.
func RunIDAt(t time.Time) string { return t.UTC().Format(runIDTimeLayout) }

const (
	runIDTimeLayout = "20060102T150405.000000000Z"
	runIDRandBytes  = 3
	// RunIDLen is the length of every run id.
	RunIDLen = len(runIDTimeLayout) + 1 + 2*runIDRandBytes
)

// runIDShape is the run id byte by byte: d a digit, x a lowercase hex digit,
// anything else itself.
const runIDShape = "ddddddddTdddddd.dddddddddZ-xxxxxx"

// ValidRunID checks the shape NewRunID produces; errors wrap ErrInvalidRunID.
func ValidRunID(id string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %s: %s (want the shape of %s)", ErrInvalidRunID, quoteShort(id), fmt.Sprintf(format, args...), "20261202T141701.123456789Z-3f9a1c")
	}
	if len(id) != RunIDLen {
		return bad("%d bytes, want %d", len(id), RunIDLen)
	}
	for i := 0; i < len(id); i++ {
		c, want := id[i], runIDShape[i]
		switch want {
		case 'd':
			if c < '0' || c > '9' {
				return bad("byte %q at position %d, want a digit", c, i)
			}
		case 'x':
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return bad("byte %q at position %d, want a lowercase hex digit", c, i)
			}
		default:
			if c != want {
				return bad("byte %q at position %d, want %q", c, i, want)
			}
		}
	}
	// The digits must also be a real time (no month 13): NewRunID never
	// writes one, so such a name was not made by agent-box. Checked by
	// hand: time.Parse costs a microsecond, and List checks every entry.
	num := func(i, j int) int {
		n := 0
		for _, c := range []byte(id[i:j]) {
			n = n*10 + int(c-'0')
		}
		return n
	}
	year, month, day := num(0, 4), num(4, 6), num(6, 8)
	switch {
	case month < 1 || month > 12:
		return bad("not a valid time: month %02d", month)
	case day < 1 || day > daysIn(year, time.Month(month)):
		return bad("not a valid time: day %02d of %04d-%02d", day, year, month)
	case num(9, 11) > 23 || num(11, 13) > 59 || num(13, 15) > 59:
		return bad("not a valid time: %s:%s:%s", id[9:11], id[11:13], id[13:15])
	}
	return nil
}

func daysIn(year int, m time.Month) int {
	return time.Date(year, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// Decode parses a record, checking its version and required fields. Errors
// wrap ErrCorrupt or ErrUnsupportedVersion. Unknown fields are ignored, for
// forward compatibility within a version.
func Decode(data []byte) (*Record, error) {
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		if len(t) == 0 {
			return nil, fmt.Errorf("%w: empty", ErrCorrupt)
		}
		return nil, fmt.Errorf("%w: not a JSON object", ErrCorrupt)
	}
	var r Record
	if !fastDecode(data, &r) {
		r = Record{}
		if err := json.Unmarshal(data, &r); err != nil {
			if !json.Valid(data) {
				return nil, fmt.Errorf("%w: not JSON or truncated: %v", ErrCorrupt, err)
			}
			// Well-formed JSON that does not fit Record: a newer version may
			// have changed a field's type, and then the version is the news.
			var v struct {
				Version int `json:"version"`
			}
			if json.Unmarshal(data, &v) == nil && v.Version != Version {
				return nil, &VersionError{Found: v.Version}
			}
			return nil, fmt.Errorf("%w: %s%v", ErrCorrupt, badField(data), err)
		}
	}
	if r.Version != Version {
		return nil, &VersionError{Found: r.Version}
	}
	if err := checkRequired(&r); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	// An empty list or map is written as nothing (omitempty), so read it
	// as nothing too: the record read is then the record that gets written.
	if len(r.Argv) == 0 {
		r.Argv = nil
	}
	if len(r.SecretEnv) == 0 {
		r.SecretEnv = nil
	}
	if len(r.Env) == 0 {
		r.Env = nil
	}
	return &r, nil
}

// badField names the first top-level field that does not decode into a
// Record on its own, as "field x: ", for errors (time.Time's parse errors do
// not say which field). Only used on the error path.
func badField(data []byte) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(data, &fields) != nil {
		return ""
	}
	keys := slices.Sorted(maps.Keys(fields))
	for _, k := range keys {
		one, err := json.Marshal(map[string]json.RawMessage{k: fields[k]})
		if err != nil {
			continue
		}
		var r Record
		if json.Unmarshal(one, &r) != nil {
			return fmt.Sprintf("field %s: ", quoteShort(k))
		}
	}
	return ""
}

// checkRequired checks the fields without which a record cannot be shown
// or acted on. Paths are built from Name and RunID, so those are validated
// in full, not just present.
func checkRequired(r *Record) error {
	if err := ValidName(r.Name); err != nil {
		return fmt.Errorf("field name: %w", err)
	}
	if err := ValidRunID(r.RunID); err != nil {
		return fmt.Errorf("field run_id: %w", err)
	}
	switch {
	case r.BootID == "":
		return errors.New("field boot_id missing or empty")
	case r.StartedAt.IsZero():
		return errors.New("field started_at missing or zero")
	case r.CaptureMode == "":
		return errors.New("field capture_mode missing or empty")
	}
	return nil
}

// Encode returns the JSON form Decode reads.
//
// A zero Version is written as Version (r is not changed). Encode refuses
// what Decode would refuse, so a record that was written can be read back.
func Encode(r *Record) ([]byte, error) {
	if r == nil {
		return nil, errors.New("encode run record: nil record")
	}
	c := *r
	if c.Version == 0 {
		c.Version = Version
	}
	if c.Version != Version {
		return nil, fmt.Errorf("encode run record: %w", &VersionError{Found: c.Version})
	}
	if err := checkRequired(&c); err != nil {
		return nil, fmt.Errorf("encode run record: %w", err)
	}
	// Indented: people read these files when something went wrong.
	data, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode run record %s/%s: %w", c.Name, c.RunID, err)
	}
	return append(data, '\n'), nil
}

// Store is the state directory.
type Store struct {
	Root string
}

// Open returns the store at root, creating root and root/runs with mode
// 0700. A root that is a symlink, not a directory, or not owned by this user
// is refused; a root with group/other permission bits is tightened to 0700
// (and Open says so through the returned warning).
func Open(root string) (s *Store, warning string, err error) {
	if root == "" {
		return nil, "", errors.New("open state directory: empty path")
	}
	root = filepath.Clean(root)
	if _, err := os.Lstat(root); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(root, 0o700); err != nil {
			return nil, "", fmt.Errorf("create state directory: %w", err)
		}
	}
	var warnings []string
	check := func(dir string) error {
		w, err := checkPrivateDir(dir)
		if err != nil {
			return fmt.Errorf("open state directory: %w", err)
		}
		if w != "" {
			warnings = append(warnings, w)
		}
		return nil
	}
	if err := check(root); err != nil {
		return nil, "", err
	}
	runs := filepath.Join(root, runsDir)
	if err := os.Mkdir(runs, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, "", fmt.Errorf("create state directory: %w", err)
	}
	if err := check(runs); err != nil {
		return nil, "", err
	}
	return &Store{Root: root}, strings.Join(warnings, "; "), nil
}

const runsDir = "runs"

func (s *Store) runsPath() string { return filepath.Join(s.Root, runsDir) }

func (s *Store) nameDir(name string) string { return filepath.Join(s.Root, runsDir, name) }

// RunDir returns root/runs/<name>/<runID>.
// Only meaningful for a valid name and run id; the methods that open paths
// check both first.
func (s *Store) RunDir(name, runID string) string {
	return filepath.Join(s.Root, runsDir, name, runID)
}

// LogPath returns root/runs/<name>/<runID>/log.
func (s *Store) LogPath(name, runID string) string {
	return filepath.Join(s.RunDir(name, runID), LogFile)
}

func (s *Store) recordPath(name, runID string) string {
	return filepath.Join(s.RunDir(name, runID), RecordFile)
}

func validate(name, runID string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	return ValidRunID(runID)
}

// Create makes the run's directory (0700) and writes its first record; it
// fails if the run dir exists already. On an error there is no run, except
// for ErrNotDurable: the run is in place, but may not survive a crash.
func (s *Store) Create(r *Record) error {
	return s.CreateWith(r, nil)
}

// CreateWith is Create with steps of the caller's. prepare, before the
// record is written, gets the run dir, not yet visible under its name, may
// put files in it and may fill in r; ready, the func it returns if not
// nil, is the last step before the run becomes visible, and may fail it
// too. agent-box starts the supervisor there, so the first record anybody
// can read already names the supervisor; a spare supervisor takes its run
// while the record is written, and ready waits until it has.
func (s *Store) CreateWith(r *Record, prepare func(dir string) (ready func() error, err error)) error {
	if _, err := Encode(r); err != nil { // validates name and run id before any path is built
		return err
	}
	where := fmt.Sprintf("create run %s/%s", r.Name, r.RunID)
	if err := s.makeNameDir(r.Name); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	// The run dir is made complete under a name List ignores, then moved
	// into place: a crash at any point leaves either no run or a run with
	// its record, never a run dir without one (which would be listed as
	// the newest, unreadable run of the name).
	dir := s.RunDir(r.Name, r.RunID)
	tmp := filepath.Join(s.nameDir(r.Name), newPrefix+r.RunID)
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	var data []byte
	var ready func() error
	var err error
	if prepare != nil {
		ready, err = prepare(tmp)
	}
	if err == nil {
		data, err = Encode(r)
	}
	if err == nil {
		// Not followed by syncRenamed: tmp is not visible yet, so a
		// failed fsync of it is a plain failure, and tmp is removed below.
		err = replaceFile(tmp, RecordFile, data)
	}
	if err == nil {
		err = syncDir(tmp)
	}
	if err == nil && ready != nil {
		err = ready()
	}
	if err == nil {
		err = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, dir, unix.RENAME_NOREPLACE)
		if errors.Is(err, unix.EEXIST) {
			err = fmt.Errorf("run directory exists already: %w", fs.ErrExist)
		}
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("%s: %w", where, err)
	}
	// The name dir's entry in runs/ too: makeNameDir (here or in
	// LockName) leaves it to this point, where process_start waits for the
	// supervisor's start anyway. On ext4 the fsyncs above have committed
	// that entry with everything else in the journal, so this one costs
	// little (performance.md, "Figures behind code comments").
	err = syncDir(s.nameDir(r.Name))
	if err == nil {
		err = syncDir(s.runsPath())
	}
	if err != nil {
		// The rename is done and readers may have seen the run, so it is
		// not undone; as in syncRenamed, the error says the run is in
		// place but may not survive a crash.
		return fmt.Errorf("%s: %w: the run is listed, but a crash may lose it: %w", where, ErrNotDurable, err)
	}
	return nil
}

// makeNameDir creates runs/<name> if missing and checks it is a real
// directory. It does not fsync runs/: CreateWith does, once its run is in
// place (a lock file needs no durability).
func (s *Store) makeNameDir(name string) error {
	dir := s.nameDir(name)
	err := os.Mkdir(dir, 0o700)
	if err == nil || !errors.Is(err, fs.ErrExist) {
		return err
	}
	return checkDir(dir, "run name directory")
}

// checkRunDirs checks that runs/<name> and its run dir are directories,
// not symlinks.
func (s *Store) checkRunDirs(name, runID string) error {
	if err := checkDir(s.nameDir(name), "run name directory"); err != nil {
		return err
	}
	return checkDir(s.RunDir(name, runID), "run directory")
}

// Write atomically replaces the record of r.Name/r.RunID. On an error the
// old record is in place, except for ErrNotDurable: the new one is, but a
// crash may bring back the old one.
func (s *Store) Write(r *Record) error {
	durable, err := s.WriteVisible(r)
	if err != nil {
		return err
	}
	return durable()
}

// WriteVisible is the first half of Write: when it returns nil, readers
// see the new record, which was fsynced before it was renamed into place
// (so a crash never leaves a torn one). durable is the second half, the
// fsync of the run dir that makes the rename itself survive a crash; until
// it is called a crash may bring back the previous record. The supervisor
// reports the child's pid in between, so that process_start does not wait
// for an fsync whose only effect is on what a crash keeps: a crash ends the
// run's processes anyway, and the previous record says so too.
func (s *Store) WriteVisible(r *Record) (durable func() error, err error) {
	data, err := Encode(r)
	if err != nil {
		return nil, err
	}
	where := fmt.Sprintf("write run %s/%s", r.Name, r.RunID)
	if err := s.checkRunDirs(r.Name, r.RunID); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	dir := s.RunDir(r.Name, r.RunID)
	if err := replaceFile(dir, RecordFile, data); err != nil {
		return nil, fmt.Errorf("%s: %s unchanged: %w", where, RecordFile, err)
	}
	return func() error {
		if err := syncRenamed(dir, RecordFile); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		return nil
	}, nil
}

// Read returns the record; ErrNotFound when there is none.
func (s *Store) Read(name, runID string) (*Record, error) {
	if err := validate(name, runID); err != nil {
		return nil, err
	}
	where := fmt.Sprintf("read run %s/%s", name, runID)
	if err := s.checkRunDirs(name, runID); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	r, err := readRecordAt(unix.AT_FDCWD, s.recordPath(name, runID), nil)
	if err == nil {
		err = checkPlace(r, name, runID)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return r, nil
}

// checkPlace refuses a record found in another run's directory (copied or
// moved by hand): its pids belong to the run it names, and acting on them
// under this run's name would signal the wrong processes.
func checkPlace(r *Record, name, runID string) error {
	if r.Name != name || r.RunID != runID {
		return fmt.Errorf("%w: the record is of run %s/%s", ErrCorrupt, r.Name, r.RunID)
	}
	return nil
}

// Entry is a listed run: its record, or why it could not be read.
type Entry struct {
	Name   string
	RunID  string
	Record *Record // nil when Err != nil
	Err    error   // wraps ErrCorrupt / ErrUnsupportedVersion / an I/O error
}

// openRuns opens runs/<name> (never through a symlink) and lists its run
// entries; ErrNotFound when it holds none. The caller closes dir.
func (s *Store) openRuns(name string) (dir *os.File, ents []fs.DirEntry, err error) {
	dir, err = openDirNoFollow(s.nameDir(name))
	if err != nil {
		return nil, nil, fmt.Errorf("list runs of %s: %w", name, err)
	}
	ents, err = runEntries(dir)
	if err == nil && len(ents) == 0 {
		err = fmt.Errorf("no runs: %w", ErrNotFound)
	}
	if err != nil {
		dir.Close()
		return nil, nil, fmt.Errorf("list runs of %s: %w", name, err)
	}
	return dir, ents, nil
}

// runEntries returns the entries of a name dir that are named like run
// ids, sorted; the lock, temp files and anything else are skipped.
func runEntries(dir *os.File) ([]fs.DirEntry, error) {
	all, err := dir.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	ents := all[:0]
	for _, e := range all {
		if ValidRunID(e.Name()) == nil {
			ents = append(ents, e)
		}
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return ents, nil
}

// List reads the runs of name (of every name when name is "") that want
// accepts (all when want is nil), sorted by name then run id; a run want
// refuses is left out without its record being opened. Entries that cannot
// be read are returned with Err set, never dropped and never a panic.
//
// List of a name with no runs is ErrNotFound, as for Index; List("") of an
// empty store is no entries and no error. A name dir that cannot be listed
// (a symlink, never followed, or a dir without read permission) is one
// Entry with an empty RunID and Err saying why (for a symlink, wrapping
// ErrSymlink); it is offered to want as (name, ""), the name itself, and
// left out if refused, so that a paged listing (runs.Manager.ListPage)
// shows it on one page, not on every page. List of that name alone is that
// error.
func (s *Store) List(name string, want func(name, runID string) bool) ([]Entry, error) {
	if name != "" {
		if err := ValidName(name); err != nil {
			return nil, err
		}
		return s.listName(name, want)
	}
	var out []Entry
	err := s.eachName(func(n string, bad error) error {
		if bad == nil {
			var got []Entry
			got, bad = s.listName(n, want)
			if errors.Is(bad, ErrNotFound) {
				return nil // a name dir holding only its lock
			}
			out = append(out, got...)
		}
		if bad != nil && (want == nil || want(n, "")) {
			out = append(out, Entry{Name: n, Err: bad})
		}
		return nil
	})
	return out, err
}

// eachName calls fn for every valid name in runs/, sorted, with nil, or
// with why the name's directory cannot be listed when it is a symlink
// (never followed); stray files and invalid names are skipped. The error
// is fn's or the listing of runs/'s.
func (s *Store) eachName(fn func(name string, bad error) error) error {
	ents, err := os.ReadDir(s.runsPath())
	if err != nil {
		return fmt.Errorf("list runs: %w", err)
	}
	for _, e := range ents { // os.ReadDir sorts
		n := e.Name()
		if ValidName(n) != nil {
			continue
		}
		var bad error
		switch {
		case e.Type()&fs.ModeSymlink != 0:
			bad = notDirError(s.nameDir(n), "run name directory", e.Type())
		case !e.IsDir():
			continue // a stray file, not a run name
		}
		if err := fn(n, bad); err != nil {
			return err
		}
	}
	return nil
}

// NameRuns is one name of an Index: its run ids, or why its directory
// cannot be listed.
type NameRuns struct {
	Name string
	IDs  []string // sorted, the oldest first; nil when Err != nil
	Err  error    // the name dir cannot be listed, as List reports it
}

// Index returns the run ids of name (of every name when name is ""),
// sorted by name, from the directory listings alone: no record is opened.
// A name dir that cannot be listed (a symlink, no read permission) is a
// NameRuns with Err set, never dropped; a name with no runs is left out,
// and Index of that name alone is ErrNotFound.
func (s *Store) Index(name string) ([]NameRuns, error) {
	one := func(n string) (NameRuns, error) {
		dir, ents, err := s.openRuns(n)
		if err != nil {
			return NameRuns{Name: n, Err: err}, err
		}
		defer dir.Close()
		ids := make([]string, len(ents))
		for i, e := range ents {
			ids[i] = e.Name()
		}
		return NameRuns{Name: n, IDs: ids}, nil
	}
	if name != "" {
		if err := ValidName(name); err != nil {
			return nil, err
		}
		nr, err := one(name)
		if errors.Is(err, ErrNotFound) {
			return nil, err
		}
		return []NameRuns{nr}, nil
	}
	var out []NameRuns
	err := s.eachName(func(n string, bad error) error {
		nr := NameRuns{Name: n, Err: bad}
		if bad == nil {
			nr, bad = one(n)
			if errors.Is(bad, ErrNotFound) {
				return nil // a name dir holding only its lock
			}
		}
		out = append(out, nr)
		return nil
	})
	return out, err
}

// listName reads every run of one name. The run dirs' types come from the
// directory entries (no stat per run), and each record is opened relative
// to the name dir with O_NOFOLLOW, so a listing costs one open and one read
// per run.
func (s *Store) listName(name string, want func(name, runID string) bool) ([]Entry, error) {
	dir, ents, err := s.openRuns(name)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	if want != nil {
		kept := ents[:0]
		for _, e := range ents {
			if want(name, e.Name()) {
				kept = append(kept, e)
			}
		}
		if ents = kept; len(ents) == 0 {
			return nil, nil
		}
	}
	out := make([]Entry, len(ents))
	fd := int(dir.Fd())
	parallel(len(ents), func(i int, buf *[]byte) {
		e := ents[i]
		out[i] = Entry{Name: name, RunID: e.Name()}
		if !e.IsDir() {
			out[i].Err = notDirError(s.RunDir(name, e.Name()), "run directory", e.Type())
			return
		}
		r, err := readRecordAt(fd, e.Name()+"/"+RecordFile, buf)
		if err == nil {
			err = checkPlace(r, name, e.Name())
		}
		if err != nil {
			out[i].Err = fmt.Errorf("read run %s/%s: %w", name, e.Name(), err)
			return
		}
		out[i].Record = r
	})
	return out, nil
}

// Newest returns the run id of ids (sorted, as a listing gives them) that
// stands for their name at now: the newest made no later than now. An id
// from the future is no run this machine's clock made: a planted record
// that took one would be the newest of a live name, and the agent's
// process_kill of the name would reach what it names instead of the live
// run. It stands for the name only when it is all there is; whether one
// may still be alive (a run started before the clock was set back) is
// for the caller to ask (runs). ids must not be empty.
func Newest(ids []string, now time.Time) string {
	limit := RunIDAt(now)
	for i := len(ids) - 1; i >= 0; i-- {
		// The time part of an id made at or before now sorts at or
		// before limit; the rest of it sorts after (RunIDAt).
		if ids[i][:min(len(ids[i]), len(limit))] <= limit {
			return ids[i]
		}
	}
	return ids[len(ids)-1]
}

// Latest returns the newest run of name (Newest); ErrNotFound if it has
// none.
//
// As with List, a newest record that cannot be read is an Entry with Err
// set and a nil error: the run exists, and callers show it as unreadable
// rather than as missing. The error is for the name: invalid, no runs, or
// its directory unreadable.
func (s *Store) Latest(name string) (Entry, error) {
	if err := ValidName(name); err != nil {
		return Entry{}, err
	}
	dir, ents, err := s.openRuns(name)
	if err != nil {
		return Entry{}, err
	}
	dir.Close()
	ids := make([]string, len(ents))
	for i, e := range ents {
		ids[i] = e.Name()
	}
	e := Entry{Name: name, RunID: Newest(ids, time.Now())}
	e.Record, e.Err = s.Read(name, e.RunID)
	return e, nil
}

// LockName takes an exclusive flock on runs/<name>/.lock, creating the
// name's directory. It blocks until the lock is free or ctx-like timeout
// elapses (then ErrLocked). The lock is released by unlock, or by the
// kernel when the process dies.
func (s *Store) LockName(name string, timeout time.Duration) (unlock func(), err error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	where := "lock name " + name
	deadline := time.Now().Add(timeout)
	for {
		unlock, stale, err := s.lockOnce(name, deadline)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if !stale {
			return unlock, nil
		}
		// RemoveNameIfEmpty removed the name (and the lock we waited on)
		// while we waited: a lock on a file nobody else can open any more
		// excludes nobody, so take the one at the path now.
	}
}

// lockOnce opens the name's lock file and flocks it; stale says the file
// locked is no longer the one at the path.
func (s *Store) lockOnce(name string, deadline time.Time) (unlock func(), stale bool, err error) {
	if err := s.makeNameDir(name); err != nil {
		return nil, false, err
	}
	path := filepath.Join(s.nameDir(name), lockFile)
	f, err := OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600, "the lock of name "+name)
	if err != nil {
		return nil, false, err
	}
	fd := int(f.Fd())
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if err == unix.EINTR {
			continue
		}
		if err != unix.EWOULDBLOCK {
			f.Close()
			return nil, false, fmt.Errorf("flock %s: %w", path, err)
		}
		left := time.Until(deadline)
		if left <= 0 {
			f.Close()
			return nil, false, fmt.Errorf("held by another process: %w", ErrLocked)
		}
		// flock(2) has no timeout and a blocking flock cannot be
		// interrupted from Go, so poll; starts are rare and short.
		time.Sleep(min(lockPoll, left))
	}
	var once sync.Once
	unlock = func() {
		once.Do(func() {
			// LOCK_UN first: closing releases the lock only when no other
			// descriptor shares the open file description.
			_ = unix.Flock(fd, unix.LOCK_UN)
			f.Close()
		})
	}
	var held, now unix.Stat_t
	if unix.Fstat(fd, &held) != nil || unix.Lstat(path, &now) != nil || held.Dev != now.Dev || held.Ino != now.Ino {
		unlock()
		return nil, true, nil
	}
	return unlock, false, nil
}

const lockPoll = 5 * time.Millisecond

// Remove deletes a run's directory (record and log).
func (s *Store) Remove(name, runID string) error {
	if err := validate(name, runID); err != nil {
		return err
	}
	where := fmt.Sprintf("remove run %s/%s", name, runID)
	if err := checkDir(s.nameDir(name), "run name directory"); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	dir := s.RunDir(name, runID)
	if _, err := os.Lstat(dir); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: %w", where, ErrNotFound)
		}
		return fmt.Errorf("%s: %w", where, err)
	}
	// RemoveAll unlinks symlinks rather than following them, so even a
	// planted one cannot make this delete outside the run dir.
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	return nil
}
