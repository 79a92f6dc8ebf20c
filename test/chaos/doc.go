// Package chaos holds agent-box's fault-injection tests: they drive the real
// binary over MCP, SIGKILL MCP servers and per-run supervisors at random
// moments, race starts of one name from several servers, and kill
// supervisors in the middle of their record writes, then check what a fresh
// server reports against the run records, the logs and the live processes.
// The promises they pin are listed in docs/architecture/guarantees.md.
//
// The slow suites are behind the build tag "chaos":
//
//	go test -tags chaos -run 'TestChaos|TestConcurrent|TestKillMidRecordWrite' ./test/chaos/
//
// CHAOS_ROUNDS (or -chaos.rounds) sets the number of chaos rounds (default
// 100) and CHAOS_SEED (or -chaos.seed) replays one; every run prints its
// seed. Without the tag, small smoke versions run in plain go test ./...,
// smaller still with -short, in parallel: each has state dirs of its own
// and sweeps only the children whose tag it gave them. The tagged suites
// run one at a time, each with the machine to itself.
//
// There is no code here outside the tests; this file only carries the
// package comment.
package chaos
