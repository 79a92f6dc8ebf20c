//go:build linux

package doctor

import (
	"encoding/json"
	"fmt"
	"io"
)

// Text writes the checks for a terminal: one line each, and the fix of a
// warn or fail indented below it.
func Text(w io.Writer, cs []Check) {
	for _, c := range cs {
		fmt.Fprintf(w, "%-4s  %s: %s\n", c.Level, c.Name, c.Detail)
		if c.Fix != "" {
			fmt.Fprintf(w, "      fix: %s\n", c.Fix)
		}
	}
	fails, warns := 0, 0
	for _, c := range cs {
		switch c.Level {
		case Fail:
			fails++
		case Warn:
			warns++
		}
	}
	fmt.Fprintf(w, "%d failed, %d warnings, %d checks\n", fails, warns, len(cs))
}

// JSON writes the checks for scripts.
func JSON(w io.Writer, cs []Check) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(struct {
		OK     bool    `json:"ok"`
		Checks []Check `json:"checks"`
	}{!Failed(cs), cs})
}
