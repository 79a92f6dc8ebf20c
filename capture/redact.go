package capture

import "math"

// The Redactor runs one Aho–Corasick automaton (Aho and Corasick, "Efficient
// string matching", CACM 18(6), 1975) compiled to a DFA: every input byte is
// one table lookup, whatever the number of secrets. To keep the table small,
// bytes that occur in no secret share one column ("class 0"), so the table is
// states × (distinct secret bytes + 1) entries of 4 bytes; states are at most
// the total length of the secrets plus one. A hundred 40-byte secrets take
// about 1 MiB.
//
// Masking is defined on the whole stream, so that the chunking cannot change
// it: every byte covered by an occurrence of any secret is masked, and each
// maximal run of masked bytes — overlapping, adjacent, repeated or nested
// occurrences alike — becomes a single Mask. Raw bytes are emitted once no
// future occurrence can cover them, and a run's Mask once no future
// occurrence can touch the run. A future occurrence starts no earlier than
// pos-depth, where depth is the automaton state's depth: the longest suffix
// of the input that is a prefix of some secret. That suffix is exactly what
// is held back.

type automaton struct {
	class [256]uint32 // input byte → column
	nc    uint32      // number of columns
	// next[state*nc+class] is the premultiplied next state (state*nc), which
	// saves a multiply per byte.
	next []uint32
	// firstMatch is the first premultiplied state at which a secret ends;
	// all later states are such states too.
	firstMatch uint32
	depth      []int32 // per state: length of the prefix it stands for
	match      []int32 // per state: longest secret that is a suffix of it, or 0
}

func compile(secrets [][]byte) *automaton {
	a := &automaton{}
	total := a.classes(secrets)
	if total == 0 {
		return nil
	}
	if uint64(total+1)*uint64(a.nc) >= math.MaxUint32 {
		// That would be a 16 GiB table; no real set of secrets gets here.
		panic("capture: secrets too large for the redaction automaton")
	}
	trie, term := a.trie(secrets, total)
	a.link(trie, term)
	a.renumber(trie)
	return a
}

// classes gives each byte that occurs in a secret a column of its own,
// and every other byte column 0; it returns the secrets' total length.
func (a *automaton) classes(secrets [][]byte) (total int) {
	var used [256]bool
	for _, s := range secrets {
		for _, c := range s {
			used[c] = true
		}
		total += len(s)
	}
	a.nc = 1
	for c, u := range used {
		if u {
			a.class[c] = a.nc
			a.nc++
		}
	}
	return total
}

// trie builds the secrets' trie in the table that becomes the DFA (-1 is
// "no child yet"), and a.depth; term[state] is the length of the secret
// that ends there, or 0.
func (a *automaton) trie(secrets [][]byte, total int) (trie, term []int32) {
	nc := int(a.nc)
	trie = make([]int32, nc, (total+1)*nc)
	for i := range trie {
		trie[i] = -1
	}
	a.depth = append(make([]int32, 0, total+1), 0)
	term = append(make([]int32, 0, total+1), 0)
	for _, s := range secrets {
		u := 0
		for _, c := range s {
			i := u*nc + int(a.class[c])
			if trie[i] < 0 {
				trie[i] = int32(len(a.depth))
				a.depth = append(a.depth, a.depth[u]+1)
				term = append(term, 0)
				for range nc {
					trie = append(trie, -1)
				}
			}
			u = int(trie[i])
		}
		if len(s) > 0 {
			term[u] = int32(len(s))
		}
	}
	return trie, term
}

// link turns the trie into the DFA, in place, and sets a.match. It goes
// breadth-first, so that a state's failure link (always shallower) is
// complete before the state itself: missing edges become the failure
// state's edge, and each state's longest match is its own secret or its
// failure state's.
func (a *automaton) link(trie, term []int32) {
	nc := int(a.nc)
	n := len(a.depth)
	fail := make([]int32, n)
	a.match = make([]int32, n)
	queue := make([]int32, 0, n)
	for c := range nc {
		if v := trie[c]; v >= 0 {
			fail[v] = 0
			a.match[v] = term[v]
			queue = append(queue, v)
		} else {
			trie[c] = 0
		}
	}
	for len(queue) > 0 {
		u := int(queue[0])
		queue = queue[1:]
		f := int(fail[u])
		for c := range nc {
			if v := trie[u*nc+c]; v >= 0 {
				fail[v] = trie[f*nc+c]
				if term[v] > 0 {
					a.match[v] = term[v]
				} else {
					a.match[v] = a.match[fail[v]]
				}
				queue = append(queue, v)
			} else {
				trie[u*nc+c] = trie[f*nc+c]
			}
		}
	}
}

// renumber fills a.next from the DFA so that the states at which a secret
// ends come last: the per-byte test for a match is then one comparison of
// the state itself, which keeps the byte loop's dependency chain to a load
// and an add.
func (a *automaton) renumber(dfa []int32) {
	nc := int(a.nc)
	n := len(a.depth)
	perm := make([]uint32, n)
	id := uint32(0)
	for _, want := range []bool{false, true} {
		for u := range n {
			if (a.match[u] > 0) == want {
				perm[u] = id
				id++
			}
		}
	}
	depth, match := make([]int32, n), make([]int32, n)
	a.next = make([]uint32, len(dfa))
	for u := range n {
		pu := int(perm[u])
		depth[pu], match[pu] = a.depth[u], a.match[u]
		for c := range nc {
			a.next[pu*nc+c] = perm[dfa[u*nc+c]] * a.nc
		}
	}
	a.depth, a.match = depth, match
	a.firstMatch = uint32(n) * a.nc
	for u := range n {
		if match[u] > 0 {
			a.firstMatch = uint32(u) * a.nc
			break
		}
	}
}

// span is a pending masked run of input offsets [s, e).
type span struct{ s, e int64 }

// Redactor masks secrets in a byte stream whose chunks may cut a secret
// anywhere. It holds back the longest tail of the input that could still
// begin a secret, and matches all secrets at once (Aho–Corasick), so its
// cost does not grow with the number of secrets times the input.
//
// Every byte of every occurrence of a secret is masked, and each maximal run
// of masked bytes (overlapping, adjacent, repeated or nested secrets) is
// replaced by one Mask. The output is the same for every chunking of the
// input; a run's Mask is emitted once the byte after it is known not to
// extend it, or at Flush.
//
// Only the input is matched: a secret that is a substring of Mask (say
// "red") still shows in the Mask text itself, which says nothing about the
// input.
//
// Write and Flush must not be called concurrently; String may be called at
// any time, from any goroutine.
type Redactor struct {
	a *automaton // nil: no secrets, output is input

	state uint32 // premultiplied automaton state
	pos   int64  // input bytes consumed
	done  int64  // input before done has been emitted (raw or as a Mask)
	runs  []span // masked runs not yet emitted: sorted, disjoint, not adjacent
	// hold is input[holdAt:pos]: every byte still to be emitted raw, plus
	// whatever lies between them. It never exceeds the longest secret.
	holdAt int64
	hold   []byte
}

// NewRedactor returns a Redactor for secrets; empty secrets are ignored.
func NewRedactor(secrets [][]byte) *Redactor {
	return &Redactor{a: compile(secrets)}
}

// Write appends to dst the redacted output that is now safe to emit for
// input p, and returns it.
func (r *Redactor) Write(dst, p []byte) []byte {
	if r.a == nil {
		return append(dst, p...)
	}
	if len(p) == 0 {
		return dst
	}
	a := r.a
	next, class := a.next, &a.class
	state, first := r.state, a.firstMatch
	base := r.pos
	for i := 0; i < len(p); i++ {
		state = next[state+class[p[i]]]
		if state >= first {
			end := base + int64(i) + 1
			r.mark(end-int64(a.match[state/a.nc]), end)
		}
	}
	r.state = state
	r.pos = base + int64(len(p))
	dst = r.emit(dst, p, base, r.pos-int64(a.depth[state/a.nc]))
	r.keep(p, base)
	return dst
}

// Flush appends everything still held back (redacted) and resets the stream.
func (r *Redactor) Flush(dst []byte) []byte {
	if r.a == nil {
		return dst
	}
	// No byte can follow, so no run can grow: every run is final.
	dst = r.emit(dst, nil, r.pos, math.MaxInt64)
	r.state, r.pos, r.done, r.holdAt = 0, 0, 0, 0
	r.runs, r.hold = r.runs[:0], r.hold[:0]
	return dst
}

// String redacts a whole string at once (for record fields).
func (r *Redactor) String(s string) string {
	if r.a == nil || s == "" {
		return s
	}
	one := Redactor{a: r.a}
	out := one.Write(make([]byte, 0, len(s)+len(Mask)), []byte(s))
	return string(one.Flush(out))
}

// mark records that input [s, e) is masked. e only grows from call to call,
// so the runs it touches (ending at or after s) are the last ones.
func (r *Redactor) mark(s, e int64) {
	n := len(r.runs)
	for n > 0 && r.runs[n-1].e >= s {
		s = min(s, r.runs[n-1].s)
		n--
	}
	r.runs = append(r.runs[:n], span{s, e})
}

// emit appends what is final once no future occurrence can start before
// from: runs that end before it, and raw bytes before it and before the
// first pending run. p is the current input chunk, starting at offset base.
func (r *Redactor) emit(dst, p []byte, base, from int64) []byte {
	k := 0
	for ; k < len(r.runs) && r.runs[k].e < from; k++ {
		dst = r.appendInput(dst, p, base, r.done, r.runs[k].s)
		dst = append(dst, Mask...)
		r.done = r.runs[k].e
	}
	r.runs = r.runs[:copy(r.runs, r.runs[k:])]
	limit := min(from, r.pos)
	if len(r.runs) > 0 {
		limit = min(limit, r.runs[0].s)
	}
	if limit > r.done {
		dst = r.appendInput(dst, p, base, r.done, limit)
		r.done = limit
	}
	return dst
}

// appendInput appends input [from, to), which lies in hold and p.
func (r *Redactor) appendInput(dst, p []byte, base, from, to int64) []byte {
	if from >= to {
		return dst
	}
	if from < base {
		end := min(to, base)
		dst = append(dst, r.hold[from-r.holdAt:end-r.holdAt]...)
		from = end
	}
	if from < to {
		dst = append(dst, p[from-base:to-base]...)
	}
	return dst
}

// keep moves into hold the input that a later emit may still need: from
// done on, skipping the first pending run's bytes when it starts at done
// (a Mask replaces them and a run may grow without bound).
func (r *Redactor) keep(p []byte, base int64) {
	at := r.done
	if len(r.runs) > 0 && r.runs[0].s == at {
		at = r.runs[0].e
	}
	if at >= base {
		r.hold = append(r.hold[:0], p[at-base:]...)
	} else {
		n := copy(r.hold, r.hold[at-r.holdAt:])
		r.hold = append(r.hold[:n], p...)
	}
	r.holdAt = at
}
