package logread_test

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/agent-box/agent-box/logread"
)

// A client that calls again from each window's EndOffset gets the log
// back byte for byte, whatever MaxBytes cuts.
func ExampleRead_resume() {
	log := strings.NewReader("build ok\ntests: 3 passed\n")
	var got strings.Builder
	for off := int64(0); ; {
		w, err := logread.Read(log, log.Size(), logread.Request{Offset: off, MaxBytes: 10, Final: true})
		if err != nil {
			panic(err)
		}
		fmt.Printf("[%d,%d) %q\n", w.Offset, w.EndOffset, w.Content)
		got.WriteString(w.Content)
		if !w.Truncated {
			break
		}
		off = w.EndOffset
	}
	fmt.Println(got.String() == "build ok\ntests: 3 passed\n")
	// Output:
	// [0,10) "build ok\nt"
	// [10,20) "ests: 3 pa"
	// [20,25) "ssed\n"
	// true
}

// TailLines reads the last lines, and says what it left out before them.
func ExampleRead_tailLines() {
	log := strings.NewReader("one\ntwo\nthree\n")
	w, err := logread.Read(log, log.Size(), logread.Request{TailLines: 2, MaxBytes: 1024, Final: true})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%q from %d, skipped %v\n", w.Content, w.Offset, w.Skipped)
	// Output:
	// "two\nthree\n" from 4, skipped [{0 4}]
}

// Grep returns the matching lines with their offsets, and the ranges of
// the log that hold none.
func ExampleRead_grep() {
	log := strings.NewReader("ok 1\nFAIL: disk\nok 2\nFAIL: net\n")
	w, err := logread.Read(log, log.Size(), logread.Request{Grep: regexp.MustCompile("FAIL"), MaxBytes: 1024, Final: true})
	if err != nil {
		panic(err)
	}
	for _, m := range w.Matches {
		fmt.Printf("%d %q\n", m.Offset, m.Line)
	}
	fmt.Println(w.Skipped)
	// Output:
	// 5 "FAIL: disk"
	// 21 "FAIL: net"
	// [{0 5} {16 5}]
}
