package cli

import (
	"go/build"
	"strings"
	"testing"
)

// The CLI is a client of agent-box's tools like any other, not a second
// reader of the state dir (issue 13, item 5) nor a second implementation
// of what a tool does: besides the standard library it imports the session
// (which calls the tools) and the wire's words alone. So it builds
// wherever the local side does, macOS included.
func TestCLIImportsOnlyTheSession(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"github.com/agent-box/agent-box/session": true, "github.com/agent-box/agent-box/wire": true,
		// attach's raw mode and window size, on macOS too.
		"github.com/charmbracelet/x/term": true}
	for _, imp := range pkg.Imports {
		first, _, _ := strings.Cut(imp, "/")
		if strings.Contains(first, ".") && !allowed[imp] {
			t.Errorf("cli imports %s; call the box's tools through the session", imp)
		}
	}
}
