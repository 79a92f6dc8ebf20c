package chaos

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// childMarker in argv[1] makes the test binary run childMain.
const childMarker = "chaos-child"

// childParams describe one child completely; they travel in its argv, so
// the checker can rebuild the expected output of any run it finds in the
// store from the record's argv alone, including runs whose process_start
// never answered.
type childParams struct {
	Tag   string        // unique per run; the token of this test process comes first
	N     int           // iterations of the write loop
	Gap   time.Duration // sleep after each iteration
	Hold  time.Duration // stay alive this long after the last write
	Code  int           // exit code
	Check string        // "" or "fds": print the open fds first (see TestChildFDs)
}

func (p childParams) argv(self string) []string {
	check := p.Check
	if check == "" {
		check = "-"
	}
	return []string{self, childMarker, p.Tag, strconv.Itoa(p.N), strconv.FormatInt(p.Gap.Microseconds(), 10),
		strconv.FormatInt(p.Hold.Milliseconds(), 10), strconv.Itoa(p.Code), check}
}

// parseChild reads childParams back from a run's argv; ok is false for a
// run that is not one of these children.
func parseChild(argv []string) (childParams, bool) {
	if len(argv) != 8 || argv[1] != childMarker {
		return childParams{}, false
	}
	var p childParams
	var err error
	num := func(s string) int64 {
		n, e := strconv.ParseInt(s, 10, 64)
		if e != nil {
			err = e
		}
		return n
	}
	p.Tag = argv[2]
	p.N = int(num(argv[3]))
	p.Gap = time.Duration(num(argv[4])) * time.Microsecond
	p.Hold = time.Duration(num(argv[5])) * time.Millisecond
	p.Code = int(num(argv[6]))
	if argv[7] != "-" {
		p.Check = argv[7]
	}
	return p, err == nil
}

// script is the child's whole output, as an ordered series of writes to fd
// 1 and fd 2 with pauses between them. The child runs it with real writes
// and sleeps; the checker runs it into buffers.
func (p childParams) script(emit func(fd int, b []byte), pause func(time.Duration)) {
	for i := range p.N {
		emit(1, fmt.Appendf(nil, "o %s %d %s\n", p.Tag, i, strings.Repeat(string(rune('a'+i%26)), i%40)))
		if i%3 != 1 {
			emit(2, fmt.Appendf(nil, "e %s %d\n", p.Tag, i))
		}
		if i%7 == 3 {
			// Larger than PIPE_BUF, so the pipe may split it between reads.
			n := 500 + (i*7919)%12000
			b := fmt.Appendf(nil, "O %s %d ", p.Tag, i)
			for len(b) < n-1 {
				b = append(b, byte('0'+len(b)%10))
			}
			emit(1, append(b, '\n'))
		}
		if p.Gap > 0 {
			pause(p.Gap)
		}
	}
	if p.Hold > 0 {
		pause(p.Hold)
	}
}

// expected is what the child writes: both streams in write order (a
// combined log) and each stream alone (a framed log).
type expected struct {
	combined, stdout, stderr []byte
}

var (
	expMu    sync.Mutex
	expCache = map[string]*expected{}
)

func expectedOf(p childParams) *expected {
	key := strings.Join(p.argv(""), "\x00")
	expMu.Lock()
	defer expMu.Unlock()
	if e, ok := expCache[key]; ok {
		return e
	}
	var c, o, e bytes.Buffer
	p.script(func(fd int, b []byte) {
		c.Write(b)
		if fd == 1 {
			o.Write(b)
		} else {
			e.Write(b)
		}
	}, func(time.Duration) {})
	x := &expected{combined: c.Bytes(), stdout: o.Bytes(), stderr: e.Bytes()}
	expCache[key] = x
	return x
}

// childMain is the child. A write to a pipe whose reader is gone (its
// supervisor was killed) raises SIGPIPE, which kills a Go program writing
// to fd 1 or 2: the realistic end of such a child.
func childMain(args []string) int {
	p, ok := parseChild(append([]string{"", childMarker}, args...))
	if !ok {
		fmt.Fprintf(os.Stderr, "chaos child: bad arguments %q\n", args)
		return 97
	}
	if p.Check == "fds" {
		// Every descriptor this program opens itself is close-on-exec (Go
		// opens everything so), and an inherited one cannot be, or it
		// would not have survived the exec: the ones without the flag are
		// exactly what the chain above passed down.
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			return 96
		}
		for _, e := range ents {
			fd, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
			if err != nil || flags&unix.FD_CLOEXEC != 0 {
				continue
			}
			target, _ := os.Readlink("/proc/self/fd/" + e.Name())
			fmt.Fprintf(os.Stdout, "fd %d %s\n", fd, target)
		}
	}
	files := [3]*os.File{nil, os.Stdout, os.Stderr}
	failed := false
	p.script(func(fd int, b []byte) {
		if failed {
			return
		}
		if _, err := files[fd].Write(b); err != nil {
			failed = true
		}
	}, time.Sleep)
	if failed {
		return 98
	}
	return p.Code
}
