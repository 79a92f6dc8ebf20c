package supervisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/proc"
	"github.com/agent-box/agent-box/runrecord"
)

// A spare is a supervisor launched before the start it serves: a server
// keeps one ready from its first start on (Spares), so that a
// process_start does not wait for a supervisor's exec and Go runtime start
// (docs/architecture/performance.md).
//
// A record's supervisor is known by its command line, which names the run
// (IsSupervisorOf), and a spare cannot know the run before it is chosen.
// So it is launched with a placeholder as long as the longest name and run
// id, and once it is told its run, before the run is visible, it writes
// them over the placeholder, in its own memory, where /proc/PID/cmdline
// reads them (retitle). Every fact a reader checks is then what it is for
// a supervisor launched for the run: its pid and start time in the record,
// a session of its own, the executable, and a command line that ends with
// the run's name and run id.
const (
	// spareArg is the second last argument of a spare. It is no run name
	// (ValidName), and the filler after it is no run id: until it is
	// adopted, a spare supervises nothing (IsSupervisor).
	spareArg = "--spare"
	// goAhead is what Start sends an adopted spare once the run is in
	// place: the spare starts nothing without it.
	goAhead = "go\n"
	// adoptedLine, with the run id, is a spare's answer to its adoption,
	// on its channel.
	adoptedLine = "adopted"
)

// spareFiller is a spare's last argument: with spareArg, room for a run's
// name, its run id and a filler argument of at least "" (retitle).
var spareFiller = strings.Repeat("-", runrecord.MaxNameLen+runrecord.RunIDLen)

// adoption is a spare's first message: the spec of the run it is to
// supervise, and Dir, where the run dir is being built (its log goes
// there).
type adoption struct {
	Spec *Spec  `json:"spec"`
	Dir  string `json:"dir"`
}

// LaunchSpare starts a spare supervisor: command, with the spare's
// arguments, in env. Its stderr is /dev/null until it is adopted. It
// returns once the spare has sent its private channel and the channel
// passed its checks (receiveChannel): here, in the background after a
// start (Spares), not on the next start's path.
func LaunchSpare(command, env []string) (*Launched, error) {
	argv := append(append([]string{}, command...), spareArg, spareFiller)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append([]string{}, env...) // never nil: nil would be ours
	l, err := launch(cmd, nil)
	if err != nil {
		return nil, err
	}
	if err := l.receiveChannel(time.Now().Add(DefaultStartTimeout), DefaultStartTimeout); err != nil {
		l.Abort()
		l.AwaitExit(time.Second)
		return nil, fmt.Errorf("the spare supervisor (pid %d): %w", l.PID, err)
	}
	return l, nil
}

// Adopt tells spare l the run it is to supervise: spec, whose run dir is
// being built at dir. The spare takes it while the caller goes on: taken
// returns once the spare's command line names the run, so that the run
// may be made visible, and Start then lets it start the child. Both wait
// at most timeout in all; after an error the spare is of no use (Abort
// it).
func (l *Launched) Adopt(spec *Spec, dir string, timeout time.Duration) (taken func() error, err error) {
	if l.spec != nil || l.ch == nil {
		return nil, errors.New("the supervisor has its spec already, or is no spare")
	}
	l.spec = spec
	deadline := time.Now().Add(timeout)
	// Checked when it sent its channel, and again now, before it is sent
	// the run's secrets: one /proc read. (Once the spare is non-dumpable
	// only a tracer privileged over every process can attach it.)
	// Told nothing, it need not be waited for: Abort ends it. (Its
	// tracer, not we, is told of its exit first, and may keep it.)
	if err := l.untraced(); err != nil {
		return nil, fmt.Errorf("the spare supervisor (pid %d) was not sent the run: %w", l.PID, err)
	}
	// Bounded: a spare that stopped reading must not hold the start.
	l.ch.SetWriteDeadline(deadline)
	err = json.NewEncoder(l.ch).Encode(adoption{Spec: spec, Dir: dir})
	l.ch.SetWriteDeadline(time.Time{})
	if err != nil {
		l.end(deadline)
		return nil, fmt.Errorf("sending the spare supervisor (pid %d) its spec: %w", l.PID, err)
	}
	return func() error {
		if err := l.awaitAdopted(deadline); err != nil {
			l.end(deadline)
			return fmt.Errorf("the spare supervisor (pid %d) did not take the run: %w", l.PID, err)
		}
		l.adopted = true
		return nil
	}, nil
}

// end kills a spare that did not take its run, and waits for it: dead
// before the caller removes the dir it was told of, or launches another
// supervisor there, since a spare that went on late would make files in
// it.
func (l *Launched) end(deadline time.Time) {
	_ = l.cmd.Process.Kill()
	l.AwaitExit(time.Until(deadline) + time.Second)
}

// adoptedAnswer is what the spare answers when it has taken l's run.
func (l *Launched) adoptedAnswer() string { return adoptedAnswer(l.spec.RunID) }

// adoptedAnswer is a spare's answer once it has taken the run runID.
func adoptedAnswer(runID string) string { return adoptedLine + " " + runID + "\n" }

// awaitAdopted reads the spare's answer and checks, from /proc, what it
// says. Its channel is private (PrivateChannel), but the answer is cheap
// to check against the kernel's facts, and a spare that says it took a
// run must be one that /proc shows as its supervisor.
func (l *Launched) awaitAdopted(deadline time.Time) error {
	l.ch.SetReadDeadline(deadline)
	line, err := l.rep.ReadString('\n')
	l.ch.SetReadDeadline(time.Time{})
	switch {
	case err != nil:
		return err
	case line != l.adoptedAnswer():
		_, err := parseReport(strings.TrimSuffix(line, "\n"))
		return err
	}
	st, err := proc.ReadStat(l.PID)
	if err != nil {
		return err
	}
	argv, err := proc.Cmdline(l.PID)
	if err != nil {
		return err
	}
	if st.StartTime != l.StartTime || !IsSupervisorOf(st, argv, l.spec.Name, l.spec.RunID) {
		return fmt.Errorf("its command line %q does not name the run", argv)
	}
	return nil
}

// errAbandoned is a spare's end when its server went away (or dropped the
// start) before it was told to start a child.
var errAbandoned = errors.New("no run was started")

// adopt is the start of a spare's Main, on its private channel ch. It
// reads its adoption, makes its own log and the reserve in the dir the run
// is built in, takes the run's name and run id for its command line,
// answers, makes the run's log while the server moves the dir into place,
// and returns once it is told to go ahead, with s.spec set.
func (s *supervisor) adopt(ch *os.File) error {
	// What the encoder and decoder learn of the types on first use
	// (encoding/json caches their fields), learnt while the spare waits.
	_ = json.Unmarshal([]byte(`{"spec":{"limits":{}}}`), &adoption{})
	_, _ = json.Marshal(&runrecord.Record{})
	dec := json.NewDecoder(io.LimitReader(ch, maxSpec))
	var a adoption
	if err := dec.Decode(&a); err != nil {
		if errors.Is(err, io.EOF) {
			return errAbandoned // the server ended: nothing to say
		}
		return fmt.Errorf("reading spec: %w", err)
	}
	if a.Spec == nil {
		return errors.New("reading spec: no spec")
	}
	s.spec = *a.Spec
	// Only a dir beside the run's own place: whatever reached our channel
	// must not have us make or remove files elsewhere.
	if filepath.Dir(a.Dir) != filepath.Dir(s.spec.runDir()) || !strings.HasSuffix(filepath.Base(a.Dir), s.spec.RunID) {
		return fmt.Errorf("reading spec: %s is not where run %s/%s is built", a.Dir, s.spec.Name, s.spec.RunID)
	}
	// The dir is moved into place once we answer, and what is made in it
	// goes with it: by a descriptor, a path that stays its own.
	dir, err := os.OpenFile(a.Dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("opening the run dir: %w", err)
	}
	defer dir.Close()
	at := fmt.Sprintf("/proc/self/fd/%d", dir.Fd())
	// Before the answer, as Launch and Start do them for a launched
	// supervisor: our own log (a start that cannot have one fails), and
	// the reserve, which Start then knows (DropReserve).
	log, err := runrecord.OpenFile(filepath.Join(at, StderrFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600, "the supervisor's log")
	if err != nil {
		return fmt.Errorf("creating supervisor log: %w", err)
	}
	err = unix.Dup3(int(log.Fd()), 2, 0)
	log.Close()
	if err != nil {
		return fmt.Errorf("making the supervisor log its stderr: %w", err)
	}
	if makeReserve(at) {
		s.reserve = filepath.Join(at, ReserveFile)
	}
	// Last before the answer: once /proc shows the run's name and run id,
	// the server may take the run as ours (awaitAdopted), and all of the
	// above is done.
	if err := retitle(s.cfg.Args, s.spec.Name, s.spec.RunID); err != nil {
		return err
	}
	if _, err := io.WriteString(ch, adoptedAnswer(s.spec.RunID)); err != nil {
		return fmt.Errorf("answering the adoption: %w", err)
	}
	// While the server moves the dir into place. Best effort: if it
	// fails, run makes it in the run dir, where a failure is recorded and
	// reported.
	_ = s.createLog(at)
	// EOF without the go-ahead: the start was dropped (the run could not
	// be made visible) or its server went away; Start ends what it sends
	// (CloseWrite). (The encoder ended the adoption with a newline.)
	rest, _ := io.ReadAll(io.LimitReader(io.MultiReader(dec.Buffered(), ch), 16))
	if strings.TrimSpace(string(rest)) != strings.TrimSpace(goAhead) {
		s.dropReserve() // through the dir's descriptor, wherever it is now
		return errAbandoned
	}
	// The dir is in place now, under the run's name; the files made in it
	// went with it (the log is open already).
	if s.reserve != "" {
		s.reserve = filepath.Join(s.spec.runDir(), ReserveFile)
	}
	return nil
}

// retitle makes this process's command line, as /proc/PID/cmdline reads
// it, end with name and runID, written over the spare's last two arguments
// (spareArg and spareFiller) in the memory the kernel reads them from. The
// bytes before name fill an argument of their own, so the length stays.
// It checks the result as IsSupervisorOf will.
//
// Those bytes are also what os.Args' last two strings point at (the
// runtime does not copy them), which nothing reads after this.
func retitle(args []string, name, runID string) error {
	if err := runrecord.ValidName(name); err != nil {
		return err
	}
	if err := runrecord.ValidRunID(runID); err != nil {
		return err
	}
	if !spare(args) {
		return fmt.Errorf("command line %q is not a spare's", args)
	}
	n := len(args)
	room := len(args[n-2]) + 1 + len(args[n-1]) + 1
	title := name + "\x00" + runID + "\x00"
	if len(title)+1 > room {
		return fmt.Errorf("no room for %q in the command line", title)
	}
	title = strings.Repeat("-", room-len(title)-1) + "\x00" + title
	self := os.Getpid()
	end, err := proc.ArgsEnd(self)
	if err != nil {
		return err
	}
	// Our own memory, through the kernel: no pointer arithmetic in Go,
	// and a kernel that forbids it fails the write instead of the
	// process. process_vm_writev(2), not /proc/self/mem: a non-dumpable
	// process (package nodump) cannot open its own /proc files that are
	// not world-readable, which the kernel then gives to root, while
	// process_vm_writev checks only ptrace access, which a process always
	// has to itself (__ptrace_may_access, kernel/ptrace.c).
	local := []unix.Iovec{{Base: unsafe.StringData(title)}}
	local[0].SetLen(len(title))
	remote := []unix.RemoteIovec{{Base: uintptr(end) - uintptr(room), Len: room}}
	if w, err := unix.ProcessVMWritev(self, local, remote, 0); err != nil || w != room {
		return fmt.Errorf("naming the run in the command line: %d of %d bytes written: %w", w, room, err)
	}
	argv, err := proc.Cmdline(self)
	if err != nil {
		return fmt.Errorf("naming the run in the command line: %w", err)
	}
	if n, id, ok := supervisorArgs(argv); !ok || n != name || id != runID || len(argv) != len(args)+1 {
		return fmt.Errorf("naming the run in the command line: it reads %q", argv)
	}
	return nil
}

// Spares keeps one spare supervisor ready for a server's next start.
type Spares struct {
	command, env []string
	logf         func(format string, args ...any)
	mu           sync.Mutex
	ready        *Launched
	filling      bool
	closed       bool
	failures     int            // spares in a row that did not take their runs
	wg           sync.WaitGroup // the fill under way
}

// maxFailures is how many spares in a row may fail to take their runs
// before p launches no more: on a box whose kernel refuses the rewrite of
// a command line every start would pay for an adoption that cannot work.
const maxFailures = 3

// Adopted tells p whether the spare it handed over took its run: err is
// Adopt's or its taken's.
func (p *Spares) Adopted(err error) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil {
		p.failures = 0
		return
	}
	if p.failures++; p.failures >= maxFailures && !p.closed {
		p.closed = true
		if p.logf != nil {
			p.logf("%d spare supervisors in a row did not take their runs: launching one for each start from now on", p.failures)
		}
	}
}

// NewSpares keeps spares of the supervisor command, in env; logf, if not
// nil, hears why one could not be launched.
func NewSpares(command, env []string, logf func(format string, args ...any)) *Spares {
	return &Spares{command: command, env: env, logf: logf}
}

// Take hands over the ready spare, if there is one and it is still alive,
// else nil. Fill launches the next.
func (p *Spares) Take() *Launched {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	l := p.ready
	p.ready = nil
	p.mu.Unlock()
	if l == nil {
		return nil
	}
	select {
	case <-l.exited:
		l.Abort()
		return nil
	default:
		return l
	}
}

// ReadyPID is the pid of the spare ready now, 0 if there is none.
func (p *Spares) ReadyPID() int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ready == nil {
		return 0
	}
	return p.ready.PID
}

// Idle says whether p has no spare, ready or being launched.
func (p *Spares) Idle() bool {
	if p == nil {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ready == nil && !p.filling
}

// Fill launches a spare, in the background, unless one is ready or being
// launched, or p is closed.
func (p *Spares) Fill() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.ready != nil || p.filling {
		return
	}
	p.filling = true
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		l, err := LaunchSpare(p.command, p.env)
		p.mu.Lock()
		p.filling = false
		closed := p.closed
		if err == nil && !closed {
			p.ready = l
		}
		p.mu.Unlock()
		switch {
		case err != nil && p.logf != nil:
			p.logf("launching a spare supervisor: %v", err)
		case err == nil && closed:
			l.Abort()
			l.AwaitExit(time.Second) // Close waits for it
		}
	}()
}

// Close ends the ready spare and launches no more.
func (p *Spares) Close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.closed = true
	l := p.ready
	p.ready = nil
	p.mu.Unlock()
	p.wg.Wait()
	if l != nil {
		l.Abort()
		l.AwaitExit(time.Second)
	}
}
