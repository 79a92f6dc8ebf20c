package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// run is a run as the box's tools show it (process_list's runs), the
// fields the CLI prints.
type run struct {
	Box        string     `json:"box"` // the box of a fleet's run (package fleet); "" from one box
	Name       string     `json:"name"`
	RunID      string     `json:"run_id"`
	State      string     `json:"state"`
	Reason     string     `json:"reason"`
	PID        int        `json:"pid"`
	ExitCode   *int       `json:"exit_code"`
	Signal     string     `json:"signal"`
	TimedOut   bool       `json:"timed_out"`
	OOMKilled  bool       `json:"oom_killed"`
	PidsMaxHit int64      `json:"pids_max_hit"`
	Command    string     `json:"command"`
	Argv       []string   `json:"argv"`
	Stdin      string     `json:"stdin"`
	Pty        bool       `json:"pty"`
	Cols       int        `json:"cols"`
	Rows       int        `json:"rows"`
	StartedAt  *time.Time `json:"started_at"`
	LogPath    string     `json:"log_path"`
	LogBytes   int64      `json:"log_bytes"`
	LogDropped int64      `json:"log_dropped"`
	LogCapped  bool       `json:"log_capped"`
	LogError   string     `json:"log_error"`
	Limits     *struct {
		MemoryMB   int `json:"memory_mb"`
		CPUPercent int `json:"cpu_percent"`
		Pids       int `json:"pids"`
	} `json:"limits"`
	Usage *usage `json:"usage"`
}

// usage is what a run's processes use or used.
type usage struct {
	MemoryBytes     int64  `json:"memory_bytes"`
	PeakMemoryBytes int64  `json:"peak_memory_bytes"`
	CPUMS           int64  `json:"cpu_ms"`
	From            string `json:"from"` // cgroup, proc, or exit: recorded at the exit
}

// cpu is the CPU time as ps shows it: 340ms, 1.2s, 3m25s.
func (u usage) cpu() string {
	d := time.Duration(u.CPUMS) * time.Millisecond
	switch {
	case d < time.Second:
		return d.String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// usageCells are ps's MEM (resident now), PEAK and CPU: "-" for what is
// not known, as for a run that is not running (MEM) or whose usage was
// not recorded.
func usageCells(u *usage) (mem, peak, cpu string) {
	mem, peak, cpu = "-", "-", "-"
	if u == nil {
		return
	}
	if u.From != "exit" {
		mem = size(u.MemoryBytes)
	}
	if u.PeakMemoryBytes > 0 {
		peak = size(u.PeakMemoryBytes)
	}
	return mem, peak, u.cpu()
}

// logSize is the log's size, and what of the output it lacks.
func logSize(r run) string {
	s := size(r.LogBytes)
	if r.LogDropped > 0 {
		s += " +" + size(r.LogDropped) + " dropped"
	}
	if r.LogCapped {
		s += " (capped)"
	}
	return s
}

// incomplete says what a run's log lacks, for stderr; "" when it is whole.
func incomplete(r run) string {
	if r.LogDropped == 0 && r.LogError == "" {
		return ""
	}
	why := "the cap"
	if r.LogError != "" {
		why = visible(r.LogError, 200)
	}
	return fmt.Sprintf("agent-box: log of run %s is incomplete: %d bytes of output were not written (%s)\n", visible(r.RunID, 0), r.LogDropped, why)
}

func stateWord(r run) string {
	var w string
	switch {
	case r.Signal != "":
		w = "exited(" + r.Signal
	case r.ExitCode != nil:
		w = fmt.Sprintf("exited(%d", *r.ExitCode)
	case r.State != r.Reason && r.Reason != "":
		return r.State + ": " + r.Reason
	default:
		return r.State
	}
	// What a bare status hides: a SIGKILL from the kernel at the memory
	// cap, or from the run's own timeout.
	switch {
	case r.OOMKilled:
		w += ", out of memory"
	case r.TimedOut:
		w += ", timed out"
	case r.PidsMaxHit > 0:
		w += fmt.Sprintf(", %d forks refused", r.PidsMaxHit)
	}
	return w + ")"
}

// limitsCell is ps's LIMITS: the caps the run was started under.
func limitsCell(r run) string {
	l := r.Limits
	if l == nil {
		return "-"
	}
	var caps []string
	if l.MemoryMB > 0 {
		caps = append(caps, fmt.Sprintf("mem=%dM", l.MemoryMB))
	}
	if l.CPUPercent > 0 {
		caps = append(caps, fmt.Sprintf("cpu=%d%%", l.CPUPercent))
	}
	if l.Pids > 0 {
		caps = append(caps, fmt.Sprintf("pids=%d", l.Pids))
	}
	if len(caps) == 0 {
		return "-"
	}
	return strings.Join(caps, ",")
}

// commandWidth is where ps cuts a command, in characters.
const commandWidth = 60

func commandOf(r run) string {
	var s string
	if len(r.Argv) > 0 {
		s = strings.Join(r.Argv, " ")
	} else {
		s = r.Command
	}
	return visible(s, commandWidth)
}

// visible makes s safe to print on a terminal as one cell of a row: every
// character that is not printable is escaped — \n, \r, \t; other C0
// controls and DEL as \x1b; C1 controls and other non-printing characters
// (format characters such as bidi overrides, non-ASCII spaces) as \u009b;
// each byte of invalid UTF-8 as \xff. So a record's field can neither move
// the cursor, nor clear or recolour the screen, nor fake another row.
//
// With limit > 0, a longer result is cut to limit characters, the last
// three being "...", and never inside an escape or a character.
func visible(s string, limit int) string {
	var b strings.Builder
	chars := 0 // characters in b
	cut, cutAt := false, 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		var tok string
		switch {
		case r == utf8.RuneError && size == 1:
			tok = fmt.Sprintf(`\x%02x`, s[i])
		case r == '\n':
			tok = `\n`
		case r == '\r':
			tok = `\r`
		case r == '\t':
			tok = `\t`
		case r < utf8.RuneSelf && (r < 0x20 || r == 0x7f):
			tok = fmt.Sprintf(`\x%02x`, r)
		case r == ' ' || unicode.IsPrint(r):
			tok = s[i : i+size]
		case r <= 0xffff:
			tok = fmt.Sprintf(`\u%04x`, r)
		default:
			tok = fmt.Sprintf(`\U%08x`, r)
		}
		i += size
		n := utf8.RuneCountInString(tok)
		if limit > 0 && !cut && chars+n > limit-3 {
			cut, cutAt = true, b.Len() // where "..." goes if s is too long
		}
		b.WriteString(tok)
		chars += n
		if limit > 0 && chars > limit {
			return b.String()[:cutAt] + "..."
		}
	}
	return b.String()
}

func size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fG", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1fM", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fK", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}

// shellStatus is the CLI's exit status for a run that ended: its exit
// code, or 128+N for signal N, as a shell reports it; ExitError when the
// run has neither (its end is unknown).
func shellStatus(exitCode *int, signal string) int {
	switch {
	case exitCode != nil:
		return *exitCode
	case signal != "":
		if n, ok := linuxSignal(signal); ok {
			return 128 + n
		}
		return 128
	}
	return ExitError
}

// linuxSignal is the number of the signal a box names: as its package
// proc spells them, SIGTERM, SIGRTMIN+3, SIGRTMAX-2, SIG33 (glibc's
// realtime range, 34..64, as shells number it).
func linuxSignal(name string) (int, bool) {
	if n, ok := linuxSignals[name]; ok {
		return n, true
	}
	rest, ok := strings.CutPrefix(name, "SIG")
	if !ok {
		return 0, false
	}
	const rtMin, rtMax = 34, 64
	base, sign := 0, 1
	switch {
	case rest == "RTMIN":
		return rtMin, true
	case rest == "RTMAX":
		return rtMax, true
	case strings.HasPrefix(rest, "RTMIN+"):
		base, rest = rtMin, rest[len("RTMIN+"):]
	case strings.HasPrefix(rest, "RTMAX-"):
		base, sign, rest = rtMax, -1, rest[len("RTMAX-"):]
	}
	k, err := strconv.Atoi(rest)
	if err != nil || k <= 0 || k > rtMax || rest[0] == '+' {
		return 0, false
	}
	n := base + sign*k
	return n, n >= 1 && n <= rtMax
}

// linuxSignals are the numbers of the signals a box reports by name. The
// box is Linux, whatever this machine is (macOS numbers some of them
// otherwise: SIGUSR1 is 30 there), and these are the numbers of Linux on
// x86, arm and the rest that share asm-generic/signal.h.
var linuxSignals = map[string]int{
	"SIGHUP": 1, "SIGINT": 2, "SIGQUIT": 3, "SIGILL": 4, "SIGTRAP": 5, "SIGABRT": 6, "SIGBUS": 7,
	"SIGFPE": 8, "SIGKILL": 9, "SIGUSR1": 10, "SIGSEGV": 11, "SIGUSR2": 12, "SIGPIPE": 13,
	"SIGALRM": 14, "SIGTERM": 15, "SIGSTKFLT": 16, "SIGCHLD": 17, "SIGCONT": 18, "SIGSTOP": 19,
	"SIGTSTP": 20, "SIGTTIN": 21, "SIGTTOU": 22, "SIGURG": 23, "SIGXCPU": 24, "SIGXFSZ": 25,
	"SIGVTALRM": 26, "SIGPROF": 27, "SIGWINCH": 28, "SIGIO": 29, "SIGPWR": 30, "SIGSYS": 31,
}

// signalNames are the signals process_kill sends.
var signalNames = []string{"TERM", "INT", "HUP", "QUIT", "KILL", "USR1", "USR2", "STOP", "CONT"}
