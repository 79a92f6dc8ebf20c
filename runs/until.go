package runs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"time"

	"github.com/agent-box/agent-box/logframe"
	"github.com/agent-box/agent-box/logread"
)

// UntilLineBytes bounds how much of one line until is matched against: the
// last this many bytes of a longer line, so that a line growing by a byte a
// write is not scanned again and again from its start.
const UntilLineBytes = 64 << 10

// Await is what a read that waits for the answer waits for, besides its
// wait_ms: a line of new output that Until matches, or Idle of quiet after
// new output; whichever comes first. Zero: the first new output, as before.
type Await struct {
	Until string        // an RE2 pattern, matched line by line
	Idle  time.Duration // quiet this long after at least one new byte
}

func (a Await) given() bool { return a.Until != "" || a.Idle != 0 }

// compilePattern is the rule of a pattern argument (grep, until): at most
// MaxGrepBytes, valid RE2.
func compilePattern(arg, pattern string) (*regexp.Regexp, error) {
	if len(pattern) > MaxGrepBytes {
		return nil, invalid("%s pattern is %d bytes, at most %d", arg, len(pattern), MaxGrepBytes)
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not a valid RE2 regular expression: %w", ErrInvalid, arg, err)
	}
	return re, nil
}

// check is the one place until and idle_ms are checked, for tail_log and
// process_write alike: both need wait_ms, since they end a wait.
func (a Await) check(m *Manager, wait time.Duration) (*regexp.Regexp, error) {
	if !a.given() {
		return nil, nil
	}
	if err := inRange(m.arg("idle_ms"), a.Idle, time.Millisecond, MaxWait); err != nil {
		return nil, err
	}
	if wait <= 0 {
		return nil, invalid("until and idle_ms end a wait: give wait_ms too (up to %d)", MaxWait.Milliseconds())
	}
	if a.Until == "" {
		return nil, nil
	}
	return compilePattern(m.arg("until"), a.Until)
}

// untilScan finds the first line of a log's new output that a pattern
// matches, reading on from where it stopped: a line (or a character) that
// two writes split is joined before it is matched. A framed log's streams
// are matched each on its own lines (a stderr frame between two stdout
// frames does not break the stdout line), after the frames are decoded.
type untilScan struct {
	re    *regexp.Regexp
	pos   int64             // log bytes read
	done  int64             // the end of the last whole frame (combined: pos)
	demux *logframe.Demuxer // framed logs only
	line  [3][]byte         // the unterminated line of each stream (0: combined)
	buf   []byte
}

func newUntilScan(re *regexp.Regexp, from int64, framed bool) *untilScan {
	s := &untilScan{re: re, pos: from, done: from, buf: make([]byte, 64<<10)}
	if framed {
		s.demux = logframe.NewDemuxer(from)
	}
	return s
}

// scan reads r from where the last scan stopped to size, and returns the
// log offset where the first matching line ends: past its newline, or,
// for an unterminated last line (a prompt), the end of what was read. -1:
// no match yet. A scan of a long log stops between reads once stop says
// so (the wait is over), to go on from there if asked again.
func (s *untilScan) scan(r io.ReaderAt, size int64, stop func() bool) (int64, error) {
	for s.pos < size {
		if stop() {
			return -1, nil
		}
		n, err := r.ReadAt(s.buf[:min(size-s.pos, int64(len(s.buf)))], s.pos)
		if n == 0 && err != nil {
			return -1, err
		}
		chunk, base := s.buf[:n], s.pos
		s.pos += int64(n)
		if s.demux == nil {
			s.done = s.pos
			if i := s.feed(0, chunk); i >= 0 {
				return base + int64(i), nil
			}
			continue
		}
		end := int64(-1)
		err = s.demux.Feed(chunk, func(fr logframe.Frame) error {
			s.done = fr.Offset + int64(fr.Len)
			if end < 0 && s.feed(int(fr.Stream), fr.Payload) >= 0 {
				end = s.done
			}
			return nil
		})
		if err != nil || end >= 0 {
			return end, err
		}
	}
	for _, l := range s.line {
		if len(l) > 0 && s.re.Match(l) {
			return s.done, nil
		}
	}
	return -1, nil
}

// feed adds p to stream st's lines, and returns the index in p just past
// the first whole line that matches, or -1.
func (s *untilScan) feed(st int, p []byte) int {
	for i := 0; i < len(p); {
		nl := bytes.IndexByte(p[i:], '\n')
		if nl < 0 {
			s.line[st] = append(s.line[st], p[i:]...)
			if over := len(s.line[st]) - UntilLineBytes; over > 0 {
				s.line[st] = append(s.line[st][:0], s.line[st][over:]...)
			}
			return -1
		}
		line := p[i : i+nl]
		if len(s.line[st]) > 0 {
			line = append(s.line[st], line...)
			s.line[st] = s.line[st][:0]
		}
		i += nl + 1
		if s.re.Match(line[max(0, len(line)-UntilLineBytes):]) {
			return i
		}
	}
	return -1
}

// await reads the window from the follower's offset once new output
// matches until (to the end of the matching line), once the output has
// been quiet for idle after at least one new byte, when wait passes, or
// when the log can grow no more or ctx is done: whichever comes first.
// It is a look of the follower's one loop, as next is.
func (f *follower) await(ctx context.Context, wait time.Duration, until *regexp.Regexp, idle time.Duration) (TailResult, error) {
	deadline := time.Now().Add(wait)
	from := f.req.Offset
	var scan *untilScan
	if until != nil {
		scan = newUntilScan(until, from, f.req.Framed)
	}
	seen, quiet := from, time.Time{} // the size last seen, and since when
	stopped := func() bool { return ctx.Err() != nil || !time.Now().Before(deadline) }
	return f.wait(ctx, func(s sight) (TailResult, bool, time.Duration, error) {
		now := time.Now()
		if s.size > seen {
			seen, quiet = s.size, now
		}
		end := int64(-1)
		if scan != nil && s.size > from {
			var err error
			if end, err = scan.scan(s.r, s.size, stopped); err != nil {
				return TailResult{}, true, 0, fmt.Errorf("reading log of run %s: %w", f.run.RunID, err)
			}
		}
		idleFor := idle - now.Sub(quiet)
		left := time.Until(deadline)
		// An offset past the end is refused by the read at once, not after
		// the wait.
		over := end >= 0 || (idle > 0 && !quiet.IsZero() && idleFor <= 0) || s.final || left <= 0 || s.size < from
		if over || ctx.Err() != nil {
			res, err := f.readTo(s.r, s.size, end, s.final)
			res.cut = !over
			return res, true, 0, err
		}
		if idle > 0 && !quiet.IsZero() {
			left = min(left, idleFor)
		}
		return TailResult{}, false, left, nil
	})
}

// readTo reads the follower's window of a log of size, up to end when
// until matched there (end >= 0).
func (f *follower) readTo(r io.ReaderAt, size, end int64, final bool) (TailResult, error) {
	lr := f.req
	lr.Final = final
	upTo := size
	if end >= 0 {
		upTo, lr.Final = end, final && end == size
	}
	w, err := logread.Read(r, upTo, lr)
	if err != nil {
		return TailResult{}, mapReadErr(err, f.run)
	}
	w.Truncated = w.Truncated || w.EndOffset < size
	run := f.run
	run.LogBytes = size
	return TailResult{Window: w, Run: run, EOF: final && w.EndOffset == size, Matched: end >= 0}, nil
}
