package doctor

import (
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStampedVersion(t *testing.T) {
	for _, c := range []struct {
		ldflags, want string
		ok            bool
	}{
		{"-X main.version=abc123", "abc123", true},
		{"-s -w -X main.version=v1.2.3-dirty", "v1.2.3-dirty", true},
		{"-X=main.version=v2", "v2", true},
		{"-X other.version=v1", "", false},
		{"-X", "", false},
		{"", "", false},
	} {
		got, ok := stampedVersion(c.ldflags)
		assert.Equal(t, c.ok, ok, "%q", c.ldflags)
		assert.Equal(t, c.want, got, "%q", c.ldflags)
	}
}

// TestBuildOfFile reads a Go binary's build without running it (this
// test's own), and refuses a file that is not one.
func TestBuildOfFile(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	b, err := BuildOfFile(exe)
	require.NoError(t, err)
	assert.Equal(t, runtime.Version(), b.Go)
	assert.Equal(t, "dev", b.Version, "a test binary has no -X main.version")
	assert.True(t, BuildOf("dev").SameSource(b), "%v and %v", BuildOf("dev"), b)
	assert.False(t, BuildOf("v2").SameSource(b))
	_, err = BuildOfFile("/etc/passwd")
	assert.Error(t, err)
}
