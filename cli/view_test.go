package cli

import "testing"

// Only encoding/json's HTML escapes are undone; an escaped backslash
// before "u0026" is text, and stays as it was.
func TestReadableJSON(t *testing.T) {
	for in, want := range map[string]string{
		`"a \u0026\u0026 b \u003e c \u003C"`: `"a && b > c <"`,
		`"\\u0026"`:                          `"\\u0026"`,
		`"\\\u0026"`:                         `"\\&"`,
		`"\u00e9 \n \" \\"`:                  `"\u00e9 \n \" \\"`,
		`"\`:                                 `"\`,
	} {
		if got := string(readableJSON([]byte(in))); got != want {
			t.Errorf("%s: got %s, want %s", in, got, want)
		}
	}
}
