package cgroup

import (
	"os/exec"
	"strconv"
)

func newSleep() *exec.Cmd { return exec.Command("sleep", "60") }

func itoa(n int) string { return strconv.Itoa(n) }
