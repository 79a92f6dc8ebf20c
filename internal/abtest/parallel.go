package abtest

import (
	"flag"
	"runtime"
	"strconv"
)

// WaitBoundParallel raises go test's -parallel, for a package whose tests
// spend their time waiting for the processes they start rather than
// computing, to four tests per CPU, unless the command line gave -parallel
// or the tests run with -race. The default, one test per CPU, leaves a
// small machine idle while such tests wait; under -race the servers and
// supervisors they start keep the CPUs busy, and more tests at once would
// only stretch each one. Call it from TestMain, before m.Run.
func WaitBoundParallel() {
	if !flag.Parsed() {
		flag.Parse()
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if given || RaceEnabled {
		return
	}
	flag.Set("test.parallel", strconv.Itoa(4*runtime.GOMAXPROCS(0)))
}
