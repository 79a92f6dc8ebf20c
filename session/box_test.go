package session

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSSHUserOptionsWin: ssh takes the first value it is given for an
// option, so the user's -o come before connect's defaults: a user's
// ServerAliveInterval or BatchMode is the one that holds.
func TestSSHUserOptionsWin(t *testing.T) {
	b := SSH("box", "", []string{"-o", "ServerAliveInterval=30"})
	user := slices.Index(b.Argv, "ServerAliveInterval=30")
	ours := slices.Index(b.Argv, "ServerAliveInterval=5")
	require.Positive(t, user)
	require.Positive(t, ours)
	require.Less(t, user, ours, "%q", b.Argv)
	require.Equal(t, []string{"-T", "--", "box", DefaultRemoteBin}, b.Argv[len(b.Argv)-4:])
}
