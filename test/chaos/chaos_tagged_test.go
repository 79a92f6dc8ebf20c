//go:build chaos

package chaos

import "testing"

// TestChaos: CHAOS_ROUNDS (or -chaos.rounds) rounds, default 100, with a
// fresh state dir every 10 rounds. Each round starts 3 to 5 runs (combined
// and framed; short, stopped and long children) through one MCP server and
// SIGKILLs the server, one or two supervisors, or both at a random moment;
// then a fresh server must list every run in a state the outcome matrix
// allows for what was killed, every record must decode and every log must
// be prefix-consistent (complete, with the exact exit code, wherever the
// supervisor was left alone).
func TestChaos(t *testing.T) {
	rounds := *roundsFlag
	if rounds <= 0 {
		rounds = envInt("CHAOS_ROUNDS", 100)
	}
	runChaos(t, rounds, 10, seed(t))
}

// TestConcurrentStartMany is TestConcurrentStart with CHAOS_TRIALS (or
// -chaos.trials) trials, default 200.
func TestConcurrentStartMany(t *testing.T) {
	trials := *trialsFlag
	if trials <= 0 {
		trials = envInt("CHAOS_TRIALS", 200)
	}
	runConcurrentStart(t, trials)
}

// TestKillMidRecordWrite is TestKillMidRecordWriteSmoke with CHAOS_TRIALS
// (or -chaos.trials) trials, default 300.
func TestKillMidRecordWrite(t *testing.T) {
	trials := *trialsFlag
	if trials <= 0 {
		trials = envInt("CHAOS_TRIALS", 300)
	}
	runMidWrite(t, trials, seed(t))
}
