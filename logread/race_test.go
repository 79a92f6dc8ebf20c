//go:build race

package logread_test

// raceEnabled: the race detector makes sync.Pool drop items, so that
// regexp allocates on every match and allocation counts mean nothing.
const raceEnabled = true
