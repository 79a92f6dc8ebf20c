package wire

import (
	"strings"
	"testing"
)

func TestValidRequestID(t *testing.T) {
	for id, want := range map[string]bool{
		"a": true, "A-z_0.9": true, ".": true, "..": true, strings.Repeat("x", MaxRequestID): true,
		"": false, strings.Repeat("x", MaxRequestID+1): false, "a/b": false, "a b": false, "é": false, "x\x00": false, "a\n": false,
	} {
		if got := ValidRequestID(id); got != want {
			t.Errorf("ValidRequestID(%q) = %v, want %v", id, got, want)
		}
	}
}
