package tools

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agent-box/agent-box/logread"
	"github.com/agent-box/agent-box/runs"
)

// The text renderings are for a model to read: short, one run a line.
// Everything that comes from a user or a process (command, argv, cwd,
// reasons quoting errors) is Go-quoted, so a newline or a "state: exited"
// inside a command cannot pass for a field of ours. Names and run ids are
// validated and need no quoting.

func q(s string) string { return strconv.Quote(s) }

// textFieldMax bounds a command, an argv or a cwd in the text, in bytes
// before quoting: every answer about a run repeats its line, and a
// generated script can be 100 KiB. Structured content has them whole.
const textFieldMax = 200

// clipped is q(s), cut to about max bytes of s; the cut says so, outside
// the quotes.
func clipped(s string, max int) string {
	if len(s) <= max {
		return q(s)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return q(s[:cut]) + fmt.Sprintf("...(%d bytes in all)", len(s))
}

func commandOf(r runs.Run) string {
	if len(r.Argv) > 0 {
		var b strings.Builder
		b.WriteString("argv=[")
		used := 0
		for i, a := range r.Argv {
			if i > 0 {
				b.WriteByte(' ')
			}
			if used >= textFieldMax {
				fmt.Fprintf(&b, "...(%d more)", len(r.Argv)-i)
				break
			}
			b.WriteString(clipped(a, textFieldMax-used))
			used += len(a)
		}
		b.WriteByte(']')
		return b.String()
	}
	return "command=" + clipped(r.Command, textFieldMax)
}

func stateOf(r runs.Run) string {
	switch {
	case r.Signal != "":
		s := "exited (killed by " + r.Signal
		if r.OutOfMemory() {
			s += ": out of memory"
			if r.Limits != nil && r.Limits.MemoryMB > 0 {
				s += ", limit " + strconv.Itoa(r.Limits.MemoryMB) + " MiB"
			}
		}
		if r.TimedOut {
			// The run's timeout_s, not a wait's: say whose.
			s += " at its timeout_s"
		}
		return s + ")"
	case r.ExitCode != nil:
		s := "exited (code " + strconv.Itoa(*r.ExitCode)
		if r.TimedOut {
			s += ", after its timeout_s"
		}
		return s + ")"
	}
	return string(r.State)
}

// runLine is one run on one line.
func runLine(r runs.Run) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s run_id=%s state=%s", r.Name, r.RunID, stateOf(r))
	if r.PID > 0 {
		fmt.Fprintf(&b, " pid=%d", r.PID)
	}
	if r.StatusOf == runs.StatusOfShell {
		b.WriteString(" status_of=shell")
	}
	if r.Pty {
		fmt.Fprintf(&b, " pty=%dx%d", r.Cols, r.Rows)
	}
	if len(r.Survivors) > 0 {
		fmt.Fprintf(&b, " survivors=%v", r.Survivors)
	}
	b.WriteString(usageText(r.Usage))
	if r.Limits != nil {
		b.WriteString(" limits=" + runs.DescribeLimits(*r.Limits))
	}
	b.WriteString(reasonText(r))
	fmt.Fprintf(&b, " log_bytes=%d", r.LogBytes)
	b.WriteString(logText(r))
	if r.StartedAt != nil {
		fmt.Fprintf(&b, " started=%s", r.StartedAt.UTC().Format(time.RFC3339))
	}
	if r.Command != "" || len(r.Argv) > 0 {
		b.WriteString(" " + commandOf(r))
	}
	if r.Cwd != "" {
		fmt.Fprintf(&b, " cwd=%s", clipped(r.Cwd, textFieldMax))
	}
	return b.String()
}

// usageText is what the run uses, compactly: " mem=104M peak_mem=110M
// cpu=1.2s procs=3" while it runs, " at_exit: peak_mem=110M cpu=1.2s"
// after; "" when it is not known.
func usageText(u *runs.Usage) string {
	if u == nil {
		return ""
	}
	var b strings.Builder
	if u.From == runs.UsageAtExit {
		b.WriteString(" at_exit:")
	} else {
		fmt.Fprintf(&b, " mem=%s", bytesText(u.MemoryBytes))
	}
	if u.PeakMemoryBytes > 0 {
		fmt.Fprintf(&b, " peak_mem=%s", bytesText(u.PeakMemoryBytes))
	}
	fmt.Fprintf(&b, " cpu=%s", u.CPU())
	if u.Procs > 0 {
		fmt.Fprintf(&b, " procs=%d", u.Procs)
	}
	return b.String()
}

// bytesText is n in binary units, as ps and top show memory: 512K,
// 104M, 1.5G; three significant figures at most.
func bytesText(n int64) string {
	units := "BKMGTPE"
	v, i := float64(n), 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	switch {
	case i == 0:
		return fmt.Sprintf("%dB", n)
	case v < 10:
		return fmt.Sprintf("%.1f%c", v, units[i])
	}
	return fmt.Sprintf("%.0f%c", v, units[i])
}

// runBrief is a run as the answer about one act on it (a start, a wait)
// says it: its name, its state, and only the facts that change what to do
// next. Its id, command, cwd, start time and limits are the caller's own
// or process_list's, and in structured content; a model reading them again
// in every answer pays for each.
func runBrief(r runs.Run) string {
	var b strings.Builder
	b.WriteString(r.Name + " " + stateOf(r))
	if r.PID > 0 && r.State == "running" {
		fmt.Fprintf(&b, " pid=%d", r.PID)
		if r.StatusOf == runs.StatusOfShell {
			b.WriteString(" status_of=shell")
		}
	}
	if len(r.Survivors) > 0 {
		fmt.Fprintf(&b, " survivors=%v", r.Survivors)
	}
	b.WriteString(reasonText(r))
	b.WriteString(logText(r))
	return b.String()
}

// reasonText is the run's reason, unless it only restates its state: an
// exited run's restates its exit unless it adds something (survivors,
// output still open, forks refused at its cap).
func reasonText(r runs.Run) string {
	restates := r.State == "exited" && !strings.Contains(r.Reason, ";")
	if r.Reason == "" || r.Reason == string(r.State) || restates {
		return ""
	}
	return " reason=" + clipped(r.Reason, 2*textFieldMax)
}

// logText says what is wrong with a run's log, if anything.
func logText(r runs.Run) string {
	var b strings.Builder
	if r.LogDropped > 0 {
		fmt.Fprintf(&b, " log_dropped=%d", r.LogDropped)
	}
	if r.LogCapped {
		b.WriteString(" log_capped=true")
	}
	if r.LogError != "" {
		fmt.Fprintf(&b, " log_error=%s", clipped(r.LogError, 2*textFieldMax))
	}
	return b.String()
}

func startText(res runs.StartResult) string {
	verb := "started "
	if res.Reused {
		verb = "reused the running "
	}
	s := verb + runBrief(res.Run)
	if w := res.Waited; w != nil {
		s += afterText(w.End)
	}
	// What the run got that the call may not have said: the terminal's
	// size, the server's default limits.
	if r := res.Run; r.Pty {
		s += fmt.Sprintf(" pty=%dx%d", r.Cols, r.Rows)
	}
	if r := res.Run; r.Limits != nil {
		s += " limits=" + runs.DescribeLimits(*r.Limits)
	}
	if r := res.ReadyResult; r != nil {
		switch {
		case r.Ready && r.Offset != nil:
			s += fmt.Sprintf("\nready after %dms: the log matched at offset %d", *res.ReadyAfterMS, *r.Offset)
		case r.Ready:
			s += fmt.Sprintf("\nready after %dms", *res.ReadyAfterMS)
		default:
			s += "\nnot ready: " + r.Why
			if r.Output != "" && res.Waited == nil { // else the end's tail shows it
				s += fmt.Sprintf("\n[last lines of output; %d bytes follow]\n%s", len(r.Output), r.Output)
			}
		}
	}
	return s
}

// listTextMax bounds the runs listText shows one by one: a model's context
// is no place for ten thousand lines.
const listTextMax = 50

func listText(page runs.Page, changes bool) string {
	// The cursor is for the next call; a model that reads only the text
	// must still find it.
	cursor := "\ncursor=" + page.Cursor + " (process_list changed_since=cursor lists what starts or ends after this)"
	rs := page.Runs
	if len(rs) == 0 && changes {
		return "no run started or ended since that cursor" + cursor
	}
	if len(rs) == 0 {
		return "no runs" + cursor
	}
	shown := rs
	var b strings.Builder
	if page.NextBefore != "" {
		fmt.Fprintf(&b, "%d of %d runs, the newest; older ones: process_list with before=%s\n", len(rs), page.Total, page.NextBefore)
	}
	if len(rs) > listTextMax {
		shown = worthShowing(rs, listTextMax)
		counts := map[string]int{}
		for _, r := range rs {
			counts[string(r.State)]++
		}
		fmt.Fprintf(&b, "%d runs (running %d, exited %d, unknown %d); %d below: every running or unknown one first, then the newest; all of them in structured content:\n",
			len(rs), counts["running"], counts["exited"], counts["unknown"], len(shown))
	} else {
		what := "run(s)"
		if changes {
			what = "run(s) started or ended since that cursor"
		}
		fmt.Fprintf(&b, "%d %s:\n", len(rs), what)
	}
	for i, r := range shown {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(runLine(r))
	}
	b.WriteString(cursor)
	return b.String()
}

// worthShowing picks n of rs for the text: the runs that are not over
// (running, or unknown and worth a look) before any exited one, then the
// newest. They keep rs's order (the newest first).
func worthShowing(rs []runs.Run, n int) []runs.Run {
	idx := make([]int, len(rs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		ra, rb := rs[idx[a]], rs[idx[b]]
		if ea, eb := ra.State == "exited", rb.State == "exited"; ea != eb {
			return !ea
		}
		return ra.RunID > rb.RunID // run ids sort by start time
	})
	idx = idx[:n]
	sort.Ints(idx)
	out := make([]runs.Run, len(idx))
	for i, k := range idx {
		out[i] = rs[k]
	}
	return out
}

// grepCounts says how many matching and context lines a grep answer has.
func grepCounts(matching, context int) string {
	s := fmt.Sprintf(" %d matching lines", matching)
	if matching == 1 {
		s = " 1 matching line"
	}
	if context > 0 {
		s += fmt.Sprintf(" and %d context lines", context)
	}
	if matching+context > 0 {
		s += ", each after its byte offset"
	}
	if context > 0 {
		s += ` (context: "offset-", groups split by "--")`
	}
	return s
}

// continuesText says how many context lines are the lines after a match
// before offset, which the answer does not hold: a grep resumed from its
// end offset owes them; from another offset they have no match to follow.
func continuesText(ms []logread.Match, offset int64) string {
	n := 0
	for _, m := range ms {
		if m.Continues {
			n++
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d of the context lines follow a match before offset %d, not in this answer)", n, offset)
}

// tailText puts our one header line first, then the output verbatim: the
// header says how many bytes of output follow, so the output cannot pose
// as a header.
func tailText(o TailOutput) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s state=%s log bytes %d..%d of %d", o.Name, o.State, o.Offset, o.EndOffset, o.LogBytes)
	if o.ExitCode != nil {
		fmt.Fprintf(&b, " exit_code=%d", *o.ExitCode)
	}
	if o.Signal != "" {
		fmt.Fprintf(&b, " signal=%s", o.Signal)
	}
	if o.Matched != nil {
		b.WriteString(untilText(*o.Matched))
	}
	switch {
	case o.EOF:
		b.WriteString(" eof")
	case o.Truncated:
		fmt.Fprintf(&b, " more: offset=%d", o.EndOffset)
		switch {
		case o.EndOffset != o.Offset || len(o.Matches) > 0:
		case o.grep && o.context:
			// Or, with context, lines that a match yet to be written
			// would return before it.
			b.WriteString(" (nothing to return yet: a line is still being written, or the last lines wait for what follows them; wait_ms waits)")
		case o.grep:
			// An empty grep before the end: what follows is a line the
			// process is still writing.
			b.WriteString(" (nothing complete yet: a line is still being written; wait_ms waits for it)")
		case o.Encoding == "text":
			// An empty window before the end: what follows is a character
			// the process is still writing.
			b.WriteString(" (nothing complete yet: a character is still being written; wait_ms waits for it)")
		}
	}
	if o.SkippedBytes > 0 {
		fmt.Fprintf(&b, " skipped %d bytes (first from offset %d)", o.SkippedBytes, o.Skipped[0].From)
	}
	if o.Lossy {
		b.WriteString(" lossy: invalid UTF-8 replaced, use encoding=base64 for exact bytes")
	}
	if o.LogCapped {
		b.WriteString(" log capped: output past the cap was not written")
	}
	if o.LogError != "" {
		fmt.Fprintf(&b, " log incomplete: %s", q(o.LogError))
	}
	if o.LogDropped > 0 {
		fmt.Fprintf(&b, " (%d bytes of output missing from its end)", o.LogDropped)
	}
	if o.CleanedBytes > 0 {
		fmt.Fprintf(&b, " clean: %d bytes of escapes and redrawn text left out", o.CleanedBytes)
	}
	if sc := o.Screen; sc != nil {
		return screenText(&b, sc, o.Offset)
	}
	body := o.Content
	switch {
	case o.grep:
		var n int
		body, n = grepText(o.Matches)
		b.WriteString(grepCounts(n, len(o.Matches)-n))
		b.WriteString(continuesText(o.Matches, o.Offset))
	case o.Chunks != nil:
		body = markStderr(o.Chunks)
	}
	if o.Encoding == "base64" {
		// Exact bytes are for programs, which read structured content;
		// repeating a megabyte of base64 here would only double the reply.
		b.WriteString("; the bytes are in structured content (content, or stdout and stderr), base64]")
		return b.String()
	}
	fmt.Fprintf(&b, "; %d bytes of %s follow]\n", len(body), o.Encoding)
	b.WriteString(body)
	return b.String()
}

// screenText ends tailText's header with the screen's size, cursor and
// rows, and the rows follow, one a line: an empty row is an empty line,
// so a row's number is its line's.
func screenText(b *strings.Builder, sc *ScreenOutput, from int64) string {
	fmt.Fprintf(b, " screen %dx%d cursor row %d col %d", sc.Cols, sc.Rows, sc.Cursor.Row, sc.Cursor.Col)
	if sc.Partial {
		fmt.Fprintf(b, " partial: replayed from offset %d, rows drawn before it may be missing", from)
	}
	body := strings.Join(sc.Lines, "\n")
	if body != "" {
		body += "\n"
	}
	fmt.Fprintf(b, "; rows 1..%d of %d follow (the rest empty), %d bytes]\n", len(sc.Lines), sc.Rows, len(body))
	b.WriteString(body)
	return b.String()
}

// grepText is a grep answer as grep -b prints it: each line after its
// offset (and stream), ": " for a match and "- " for context, "--"
// between groups, a cut line saying how long it is, and a part of a line
// longer than a window saying so (its length is not known); n counts the
// matches.
func grepText(ms []logread.Match) (body string, n int) {
	var b strings.Builder
	for i, m := range ms {
		if m.Group && i > 0 {
			b.WriteString("--\n")
		}
		sep := ":"
		if m.Context {
			sep = "-"
		} else {
			n++
		}
		if m.Stream != "" {
			fmt.Fprintf(&b, "%d %s%s %s", m.Offset, m.Stream, sep, m.Line)
		} else {
			fmt.Fprintf(&b, "%d%s %s", m.Offset, sep, m.Line)
		}
		switch {
		case m.Part && m.Bytes > 0:
			fmt.Fprintf(&b, " ...[cut: part of a line longer than a window; this part is %d bytes, from offset %d]", m.Bytes, m.Offset)
		case m.Part:
			fmt.Fprintf(&b, " [part of a line longer than a window, from offset %d]", m.Offset)
		case m.Bytes > 0:
			fmt.Fprintf(&b, " ...[cut: the line is %d bytes, from offset %d]", m.Bytes, m.Offset)
		}
		b.WriteByte('\n')
	}
	return b.String(), n
}

// stderrMark starts each line of stderr in the text of a framed run's
// output, so that a model reading only the text tells the streams apart.
const stderrMark = "[stderr] "

// markStderr is the chunks' text with stderrMark before each line (or
// part of one) that stderr wrote.
func markStderr(chunks []logread.Chunk) string {
	var b strings.Builder
	for _, c := range chunks {
		if c.Stream != "stderr" {
			b.WriteString(c.Text)
			continue
		}
		for rest := c.Text; rest != ""; {
			line, after, nl := strings.Cut(rest, "\n")
			b.WriteString(stderrMark + line)
			if nl {
				b.WriteByte('\n')
			}
			rest = after
		}
	}
	return b.String()
}

// waitHint is the one line that says what to do next, if anything: wait
// again, or wait for (or stop) the processes that outlived the leader.
func waitHint(res runs.WaitResult, waited time.Duration) string {
	switch {
	case res.WaitTimedOut && res.Shortened:
		return fmt.Sprintf("still running after waiting %s, the most a call without a progress token waits; call process_wait again to keep waiting",
			waited)
	case res.WaitTimedOut:
		return fmt.Sprintf("still running after waiting %s; call process_wait again to keep waiting", waited)
	case res.Run.State == "exited" && len(res.Run.Survivors) > 0:
		return fmt.Sprintf("the leader exited but %d process(es) of the run still run (pids %s): process_wait with survivors=true waits for them, process_kill stops them",
			len(res.Run.Survivors), joinPids(res.Run.Survivors))
	}
	return ""
}

func joinPids(pids []int) string {
	s := make([]string, len(pids))
	for i, p := range pids {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, " ")
}

func waitText(res runs.WaitResult, waited time.Duration) string {
	var b strings.Builder
	if h := waitHint(res, waited); h != "" {
		b.WriteString(h + "\n")
	}
	for i, e := range append([]runs.End{res.End}, res.Ends...) {
		// An output that ends without a newline (a prompt) must not run
		// into the next run's line.
		if i > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s%s\n", runBrief(e.Run), afterText(e))
		b.WriteString(endText(e))
	}
	if len(res.Others) > 0 || len(res.Running) > 0 {
		if !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
	}
	for _, o := range res.Others {
		if !slices.Contains(res.Running, o.Name) {
			fmt.Fprintf(&b, "also waited on: %s\n", runBrief(o))
		}
	}
	// Named, so that a caller that waits again drops the runs that ended
	// (or it is answered the same end at once).
	if len(res.Running) > 0 {
		fmt.Fprintf(&b, "still running: %s\n", strings.Join(res.Running, ", "))
	}
	return b.String()
}

// afterText is how long e's run ran (so far), and what it used.
func afterText(e runs.End) string {
	s := ""
	if e.DurationKnown {
		s = " after " + e.Duration.Round(time.Millisecond).String()
	}
	return s + usageText(e.Run.Usage)
}

// endText is the end of e's output as a wait answers it.
func endText(e runs.End) string {
	var b strings.Builder
	// A capped log kept the start of the output: its last lines are not
	// the last the process wrote, which may be the ones that matter.
	capped := ""
	if e.Run.LogCapped {
		capped = fmt.Sprintf(" (the log was capped at %d bytes: output past the cap was not kept, so these are not the last lines written)", e.Run.LogBytes)
	}
	// Say what the tail leaves out, and where to read it: from where the
	// caller is (since_offset), not from the start it already has.
	from := func(at int64) string {
		if e.OutputWhole {
			return ""
		}
		return fmt.Sprintf(", from log offset %d of %d (tail_log from offset %d for the rest)", at, e.Run.LogBytes, e.Since)
	}
	cut := func(c bool) string {
		if c {
			return ", the first line cut to its end"
		}
		return ""
	}
	if e.Stderr != "" {
		fmt.Fprintf(&b, "[last lines of stderr%s%s%s; %d bytes follow]\n%s", capped, from(e.StderrFrom), cut(e.StderrCut), len(e.Stderr), e.Stderr)
	}
	if e.Output != "" {
		out := e.Output
		if e.OutputChunks != nil {
			out = markStderr(e.OutputChunks)
		}
		cleaned := ""
		if e.CleanedBytes > 0 {
			cleaned = fmt.Sprintf(", clean: %d bytes of escapes and redrawn text left out", e.CleanedBytes)
		}
		fmt.Fprintf(&b, "[last lines of output%s%s%s%s; %d bytes follow]\n%s", capped, from(e.OutputFrom), cut(e.OutputCut), cleaned, len(out), out)
	}
	return b.String()
}

// startWaitText is what process_start's text adds for the wait for its
// run's end (w).
func startWaitText(w runs.WaitResult, waited time.Duration) string {
	var b strings.Builder
	if h := waitHint(w, waited); h != "" {
		b.WriteString("\n" + h)
	}
	if t := endText(w.End); t != "" {
		b.WriteString("\n" + t)
	}
	return b.String()
}

func removeText(res runs.RemoveResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "removed %d run(s)", len(res.Removed))
	for _, r := range res.Removed {
		fmt.Fprintf(&b, "\n  %s run_id=%s", r.Name, r.RunID)
	}
	if len(res.Kept) > 0 {
		fmt.Fprintf(&b, "\nkept %d unfinished run(s)", len(res.Kept))
		for _, r := range res.Kept {
			fmt.Fprintf(&b, "\n  %s run_id=%s state=%s", r.Name, r.RunID, r.State)
		}
	}
	return b.String()
}
