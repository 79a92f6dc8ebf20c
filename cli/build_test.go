package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
