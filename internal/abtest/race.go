//go:build race

package abtest

// RaceEnabled says whether this test binary was built with -race; Build
// builds agent-box the same way.
const RaceEnabled = true
