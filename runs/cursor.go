package runs

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash/fnv"
	"time"

	"github.com/agent-box/agent-box/runrecord"
)

// A cursor is what an agent knew of the runs when a process_list answer
// was made, so that process_list {changed_since} can answer with what it
// does not know yet: runs that started since, and runs that ended since,
// exactly once each (docs/architecture/README.md, "The exit inbox").
//
// It is computed from the records on disk, never from memory, so a cursor
// outlives the connection that issued it; it holds no names or paths, only
// hashes of run ids, and nothing in it is trusted: a made-up cursor
// changes which runs one answer lists, nothing else.
type cursor struct {
	At   time.Time // when the listing that issued it began
	Boot uint32    // hash of the boot id then
	// Full: Open holds every run that was running at At (an answer of
	// changed_since, which reads every record it must). A plain listing
	// holds only the runs of its page.
	Full bool
	Open map[uint64]bool // runs known running
	Done map[uint64]bool // runs known ended, started or ended within cursorLag of At
}

// cursorLag covers the time between a run id being made (from the clock
// of the agent-box starting it) and its directory being visible: the
// supervisor is launched in between, within the start timeout. A run
// whose id is older than At by more than this was visible at At.
const cursorLag = time.Minute

// Bounds on a cursor given back to us: a listing of 100,000 runs is
// the most one answer holds.
const maxCursorRuns = MaxListLimit

const cursorPrefix = "c1."

var errBadCursor = errors.New("changed_since is not a cursor of process_list (pass the cursor field of an earlier answer unchanged)")

func runKey(name, runID string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	h.Write([]byte{'/'})
	h.Write([]byte(runID))
	return h.Sum64()
}

func bootKey(boot string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(boot))
	return h.Sum32()
}

func (c *cursor) String() string {
	b := make([]byte, 0, 14+8*(len(c.Open)+len(c.Done))+2*binary.MaxVarintLen64)
	flags := byte(0)
	if c.Full {
		flags = 1
	}
	b = append(b, flags)
	b = binary.BigEndian.AppendUint64(b, uint64(c.At.UnixNano()))
	b = binary.BigEndian.AppendUint32(b, c.Boot)
	for _, set := range []map[uint64]bool{c.Open, c.Done} {
		b = binary.AppendUvarint(b, uint64(len(set)))
		for k := range set {
			b = binary.BigEndian.AppendUint64(b, k)
		}
	}
	return cursorPrefix + base64.RawURLEncoding.EncodeToString(b)
}

func parseCursor(s string) (*cursor, error) {
	if len(s) < len(cursorPrefix) || s[:len(cursorPrefix)] != cursorPrefix || len(s) > 2*8*maxCursorRuns {
		return nil, errBadCursor
	}
	b, err := base64.RawURLEncoding.DecodeString(s[len(cursorPrefix):])
	if err != nil || len(b) < 13 || b[0] > 1 {
		return nil, errBadCursor
	}
	c := &cursor{Full: b[0] == 1, At: time.Unix(0, int64(binary.BigEndian.Uint64(b[1:9]))), Boot: binary.BigEndian.Uint32(b[9:13])}
	b = b[13:]
	for _, set := range []*map[uint64]bool{&c.Open, &c.Done} {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > maxCursorRuns || uint64(len(b)-k) < 8*n {
			return nil, errBadCursor
		}
		b = b[k:]
		*set = make(map[uint64]bool, n)
		for range n {
			(*set)[binary.BigEndian.Uint64(b)] = true
			b = b[8:]
		}
	}
	if len(b) != 0 {
		return nil, errBadCursor
	}
	return c, nil
}

// recent reports whether run started (by its run id, as changes reads
// them) or finished within cursorLag before At, or after it.
func (c *cursor) recent(r Run) bool {
	since := c.At.Add(-cursorLag)
	return r.RunID >= runrecord.RunIDAt(since) || r.FinishedAt != nil && r.FinishedAt.After(since)
}

// note adds run, as seen now, to what the cursor knows.
func (c *cursor) note(r Run) {
	k := runKey(r.Name, r.RunID)
	switch {
	case !r.Ended():
		c.Open[k] = true
	case r.rec == nil:
		// Unreadable: known as it is (unknown), so not news again while it
		// stays so. Should it become readable, its state is news only if
		// it is recent.
		c.Done[k] = true
	case c.recent(r):
		c.Done[k] = true
	}
}

// changed reports whether run, as seen now, is news to an agent that
// holds c, booted as boot now.
func (c *cursor) changed(r Run, boot uint32) bool {
	k := runKey(r.Name, r.RunID)
	switch {
	case c.Open[k]:
		return r.Ended()
	case c.Done[k]:
		return false
	case r.FinishedAt != nil && r.FinishedAt.Before(c.At):
		// It ended before the cursor was issued: whether or not the
		// listing showed it, its end is not news (the lag below is for
		// runs not yet visible then, which have not ended by then).
		return false
	case c.Full:
		// Not known at all, so not visible at At: new (changes reads only
		// the runs it holds and the recent ones).
		return true
	}
	if c.recent(r) {
		return true
	}
	// A run that ended without an end time: the machine rebooted since
	// the cursor, and its exit was never recorded. (One whose supervisor
	// was lost is news only if the cursor knew it running.)
	rec := r.rec
	return rec != nil && rec.Exit == nil && rec.StartError == "" && r.Ended() &&
		bootKey(rec.BootID) == c.Boot && c.Boot != boot
}
