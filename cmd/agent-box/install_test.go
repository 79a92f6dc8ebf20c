package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agent-box/agent-box/cli"
)

// install.go cannot import cli (it builds for darwin); its usage status
// is cli's.
func TestInstallExitUsage(t *testing.T) {
	t.Parallel()
	assert.Equal(t, cli.ExitUsage, exitUsage)
}
