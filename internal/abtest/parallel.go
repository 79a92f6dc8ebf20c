package abtest

import (
	"flag"
	"runtime"
	"strconv"
)

// WaitBoundParallel raises go test's -parallel, for a package whose tests
// spend their time waiting for the processes they start rather than
// computing, unless the command line gave -parallel: to four tests per CPU,
// or two under -race. The default, one test per CPU, leaves a small machine
// idle while such tests wait. Under -race the servers and supervisors the
// tests start are race-built and busy the CPUs more, so fewer run at once;
// but one per CPU still left them idle a good part of the time, and more
// than two per CPU bought nothing (docs/architecture/performance.md, "The
// test suite"). Call it from TestMain, before m.Run.
func WaitBoundParallel() {
	if !flag.Parsed() {
		flag.Parse()
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if given {
		return
	}
	perCPU := 4
	if RaceEnabled {
		perCPU = 2
	}
	flag.Set("test.parallel", strconv.Itoa(perCPU*runtime.GOMAXPROCS(0)))
}
