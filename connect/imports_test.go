package connect_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The local side (connect, session, watch, the CLI) runs on the user's laptop, macOS
// included, and speaks to a box only through MCP: none of the box side's
// packages may reach it, directly or through another package.
func TestLocalSideImportsNothingOfTheBox(t *testing.T) {
	const module = "github.com/agent-box/agent-box/"
	// logframe is the frame format alone (the standard library's only),
	// which the resumable reader decodes a framed log with.
	allowed := map[string]bool{"connect": true, "fleet": true, "session": true, "wire": true, "logframe": true, "watch": true, "cli": true}
	for _, pkg := range []string{"../connect", "../fleet", "../session", "../watch", "../cli"} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if rest, ok := strings.CutPrefix(dep, module); ok && !allowed[rest] {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}
