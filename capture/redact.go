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
	// runOf[column] is the column itself for the columns whose runs are
	// one token (a terminal's blanks and line ends, and bytes of no
	// secret), else noRun; nil for a raw automaton. See terminalForms.
	runOf []uint32
	// runCap bounds a run taken as one token, in bytes (terminalForms).
	runCap int
	// longest is the longest secret as the automaton has it.
	longest int
	// next[state*nc+class] is the premultiplied next state (state*nc), which
	// saves a multiply per byte.
	next []uint32
	// firstMatch is the first premultiplied state at which a secret ends;
	// all later states are such states too.
	firstMatch uint32
	depth      []int32 // per state: length of the prefix it stands for
	match      []int32 // per state: longest secret that is a suffix of it, or 0
}

func compile(secrets [][]byte, terminal bool) *automaton {
	a := &automaton{}
	var rep *[256]byte
	if terminal {
		rep = &terminalRep
		secrets, a.runCap = terminalForms(secrets)
	}
	total := a.classes(secrets, rep)
	if total == 0 {
		return nil
	}
	for _, s := range secrets {
		a.longest = max(a.longest, len(s))
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
// With rep (a terminal's automaton), every byte shares the column of the
// byte that stands for it, and runOf says which columns' runs are tokens.
func (a *automaton) classes(secrets [][]byte, rep *[256]byte) (total int) {
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
	if rep != nil {
		for c := range a.class {
			a.class[c] = a.class[rep[c]]
		}
		a.runOf = make([]uint32, a.nc)
		for col := range a.runOf {
			a.runOf[col] = noRun
		}
		a.runOf[0] = 0
		for _, c := range []byte{'\n', ' '} {
			if col := a.class[c]; col != 0 {
				a.runOf[col] = col
			}
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

// noRun is runOf's "no run": a column whose bytes are each a token.
const noRun = ^uint32(0)

// terminalRep maps each byte to the byte that stands for every form a
// terminal's output processing can give it (termios(3), and Linux's
// n_tty do_output_char in drivers/tty/n_tty.c):
//
//   - OLCUC writes a lowercase byte in uppercase, by the kernel's
//     toupper, which takes Latin-1 (lib/ctype.c): a-z and 0xdf-0xfe but
//     0xf7 become the byte 0x20 lower. Such pairs share a byte (0xff,
//     0xdf and 0xbf, whose pairs chain, share one).
//   - ONLCR writes "\n" as "\r\n", OCRNL "\r" as "\n", ONOCR drops a "\r"
//     at column 0: "\r" and "\n" share "\n", and a run of them is one
//     token (Redactor).
//   - TAB3 (XTABS) writes a tab as the 1 to 8 spaces to the next tab stop,
//     which depends on the column: tab and space share " ", and a run of
//     them is one token.
//
// ONLRET and IUTF8 change only the column, which the runs absorb. Flags
// change at any time (stty, tcsetattr), between any two writes: matching
// every form at once does not depend on knowing them.
var terminalRep = func() (rep [256]byte) {
	for c := range rep {
		rep[c] = byte(c)
	}
	lower := func(c int) bool { return 'a' <= c && c <= 'z' || 0xdf <= c && c != 0xf7 }
	// In ascending order, so that a chain's lower member is done before
	// the upper one takes its rep: 0xff's pair is 0xdf, whose own is 0xbf.
	for c := range rep {
		if lower(c) {
			rep[c] = rep[c-0x20]
		}
	}
	rep['\r'], rep['\t'] = '\n', ' '
	return rep
}()

// runFactor bounds how much longer a terminal makes a run: a tab is at
// most 8 spaces, a line end at most 2 bytes ("\r\n").
const runFactor = 8

// terminalForms returns secrets as a terminal's automaton matches them:
// each byte replaced by terminalRep, each run of line ends or of blanks
// cut to one byte, and line ends at the start dropped (ONOCR drops a "\r"
// written at column 0; nothing is lost, the rest of the secret is still
// masked). runCap is how long a run of the output may be and still be one
// token: the longest run in a secret as a terminal can write it. Past it
// a run counts as tokens of runCap bytes, so the bytes held back for a
// match in progress stay bounded.
func terminalForms(secrets [][]byte) (forms [][]byte, runCap int) {
	forms = make([][]byte, 0, len(secrets))
	longestRun := 1
	for _, s := range secrets {
		f := make([]byte, 0, len(s))
		run := 0
		for _, c := range s {
			r := terminalRep[c]
			blank := r == '\n' || r == ' '
			if blank && len(f) > 0 && f[len(f)-1] == r {
				run++
				longestRun = max(longestRun, run)
				continue
			}
			run = 1
			f = append(f, r)
		}
		if t := bytesTrimLeft(f, '\n'); len(t) > 0 {
			f = t
		}
		forms = append(forms, f)
	}
	return forms, runFactor * longestRun
}

func bytesTrimLeft(b []byte, c byte) []byte {
	for len(b) > 0 && b[0] == c {
		b = b[1:]
	}
	return b
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
	// whatever lies between them. It never exceeds the longest secret (a
	// terminal's: its tokens, each at most runCap bytes).
	holdAt int64
	hold   []byte

	// A terminal's Redactor matches tokens (see terminalRep): starts is
	// a ring of the input offsets at which the last tokens began, tok
	// counts the tokens, and run is the column of the run the last byte
	// is in (noRun: none), runLen its length so far.
	starts []int64
	tok    int64
	run    uint32
	runLen int
}

// NewRedactor returns a Redactor for secrets; empty secrets are ignored.
func NewRedactor(secrets [][]byte) *Redactor {
	return &Redactor{a: compile(secrets, false)}
}

// NewTerminalRedactor returns a Redactor for the output of a terminal's
// master: it masks secrets in every form the terminal's output processing
// can give them, whatever its flags were at the write (see terminalRep):
// in uppercase, with "\r" and "\n" for one another, "\r\n" for "\n",
// spaces for a tab. It also masks what only looks like such a form (the
// secret's case changed, its blanks or line ends changed in number): a
// terminal's output cannot tell them apart.
func NewTerminalRedactor(secrets [][]byte) *Redactor {
	return newRedactor(compile(secrets, true))
}

func newRedactor(a *automaton) *Redactor {
	r := &Redactor{a: a, run: noRun}
	if a != nil && a.runOf != nil {
		n := 1
		for n < a.longest {
			n *= 2
		}
		r.starts = make([]int64, n)
	}
	return r
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
	if r.starts != nil {
		return r.writeTokens(dst, p)
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

// writeTokens is Write for a terminal's Redactor: the automaton reads a
// token per byte, but one per run of a column that runOf makes a run (at
// most runCap bytes of it), and a match or a match in progress begins
// where its first token began.
func (r *Redactor) writeTokens(dst, p []byte) []byte {
	a := r.a
	next, class, runOf := a.next, &a.class, a.runOf
	state, first := r.state, a.firstMatch
	starts, mask := r.starts, int64(len(r.starts)-1)
	tok, run, runLen, runCap := r.tok, r.run, r.runLen, a.runCap
	base := r.pos
	for i := 0; i < len(p); i++ {
		col := class[p[i]]
		if col == run && runLen < runCap {
			runLen++
			continue
		}
		run, runLen = runOf[col], 1
		at := base + int64(i)
		starts[tok&mask] = at
		tok++
		state = next[state+col]
		if state >= first {
			r.mark(starts[(tok-int64(a.match[state/a.nc]))&mask], at+1)
		}
	}
	r.state, r.tok, r.run, r.runLen = state, tok, run, runLen
	r.pos = base + int64(len(p))
	from := r.pos
	if d := int64(a.depth[state/a.nc]); d > 0 {
		from = starts[(tok-d)&mask]
	}
	dst = r.emit(dst, p, base, from)
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
	r.tok, r.run, r.runLen = 0, noRun, 0
	return dst
}

// String redacts a whole string at once (for record fields).
func (r *Redactor) String(s string) string {
	if r.a == nil || s == "" {
		return s
	}
	one := newRedactor(r.a)
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
