// Command testsum reads `go test -json` on stdin and prints each
// package's result and the whole output of the tests that failed (as
// go test -v shows it, === RUN lines included), then one line that says
// which tests skipped and why: a lane that skipped (no sshd, no npm) must
// not pass for one that ran. It exits 1 when a test, a package or a build
// failed.
//
//	go test -json ./... | go run ./internal/testsum
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

// event is one line of test2json (go doc test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

type summary struct {
	out    io.Writer
	failed bool
	buf    map[string][]string // output of running tests, by package and name
	order  map[string][]string // the keys of buf of each package, as they came
	skips  map[string][]string // skip reason → "pkg Test" list
}

func main() {
	s := &summary{out: os.Stdout}
	if err := s.read(os.Stdin); err != nil {
		fmt.Fprintf(os.Stderr, "testsum: %v\n", err)
		os.Exit(1)
	}
	fmt.Fprintln(s.out, s.skipLine())
	if s.failed {
		os.Exit(1)
	}
}

func (s *summary) read(r io.Reader) error {
	s.buf, s.order, s.skips = map[string][]string{}, map[string][]string{}, map[string][]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			// Not test2json (go test's own errors): pass it on.
			fmt.Fprintf(s.out, "%s\n", line)
			continue
		}
		s.event(e)
	}
	return sc.Err()
}

func (s *summary) event(e event) {
	key := e.Package + " " + e.Test
	switch {
	case e.Action == "build-output":
		fmt.Fprint(s.out, e.Output)
	case e.Action == "build-fail" || e.Action == "fail" && e.Test == "":
		s.failed = true
	case e.Test == "" && e.Action == "output":
		// The package's own lines: "ok  pkg 1.2s", "FAIL", a panic; not
		// the "PASS" that -json's verbose mode adds, which plain go test
		// does not print.
		if strings.HasPrefix(e.Output, "FAIL") {
			// A test binary that timed out, or a test that called
			// os.Exit, ends its package with no fail event for the test:
			// what it printed (the timeout's panic and stacks) comes now.
			s.flush(e.Package)
		}
		if e.Output != "PASS\n" {
			fmt.Fprint(s.out, e.Output)
		}
	case e.Test == "":
		// A package's start, pass, or skip ("no test files").
	case e.Action == "output":
		if _, ok := s.buf[key]; !ok {
			s.order[e.Package] = append(s.order[e.Package], key)
		}
		s.buf[key] = append(s.buf[key], e.Output)
	case e.Action == "fail":
		s.failed = true
		fmt.Fprint(s.out, strings.Join(s.buf[key], ""))
		delete(s.buf, key)
	case e.Action == "skip":
		why := reason(s.buf[key])
		s.skips[why] = append(s.skips[why], strings.TrimPrefix(e.Package, modulePrefix(e.Package))+" "+e.Test)
		delete(s.buf, key)
	case e.Action == "pass":
		delete(s.buf, key)
	}
}

// flush prints what the tests of pkg that never ended printed.
func (s *summary) flush(pkg string) {
	for _, key := range s.order[pkg] {
		if out, ok := s.buf[key]; ok {
			fmt.Fprint(s.out, strings.Join(out, ""))
			delete(s.buf, key)
		}
	}
	delete(s.order, pkg)
}

// modulePrefix is the part of a package path shared by the module's
// packages ("github.com/agent-box/agent-box/"), left out for brevity.
func modulePrefix(pkg string) string {
	if i := strings.Index(pkg, "agent-box/agent-box/"); i >= 0 {
		return pkg[:i+len("agent-box/agent-box/")]
	}
	return ""
}

var fileLine = regexp.MustCompile(`^\s*\S+\.go:\d+: `)

// reason is what a skipped test said: its output without the run and
// skip markers and without the file:line prefix of t.Skip.
func reason(out []string) string {
	var parts []string
	for _, l := range out {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		parts = append(parts, strings.TrimSpace(fileLine.ReplaceAllString(l, "")))
	}
	why := strings.Join(parts, " ")
	if len(why) > 160 {
		why = why[:157] + "..."
	}
	if why == "" {
		why = "no reason given"
	}
	return why
}

// skipLine is the one line that ends the run: how many tests skipped,
// grouped by reason.
func (s *summary) skipLine() string {
	if len(s.skips) == 0 {
		return "skipped: none"
	}
	n := 0
	whys := make([]string, 0, len(s.skips))
	for why, tests := range s.skips {
		n += len(tests)
		whys = append(whys, why)
	}
	sort.Strings(whys)
	parts := make([]string, 0, len(whys))
	for _, why := range whys {
		tests := s.skips[why]
		sort.Strings(tests)
		names := strings.Join(tests, ", ")
		if len(tests) > 3 {
			names = strings.Join(tests[:3], ", ") + fmt.Sprintf(" and %d more", len(tests)-3)
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", names, why))
	}
	return fmt.Sprintf("skipped: %d test(s): %s", n, strings.Join(parts, "; "))
}
