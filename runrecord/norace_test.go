//go:build !race

package runrecord_test

const raceEnabled = false
