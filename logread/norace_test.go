//go:build !race

package logread_test

const raceEnabled = false
