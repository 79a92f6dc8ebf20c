//go:build race

package runrecord_test

// raceEnabled says whether the test binary was built with -race.
const raceEnabled = true
