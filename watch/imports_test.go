package watch

import (
	"go/build"
	"strings"
	"testing"
)

// watch is the local side: it reaches every box, this machine's too,
// through session.Tools, and builds on macOS. Besides the standard
// library it imports the session, the wire's words, renameio (the cursor
// file) and x/sys (its lock).
func TestWatchImportsOnlyTheLocalSide(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"github.com/agent-box/agent-box/session": true, "github.com/agent-box/agent-box/wire": true,
		"github.com/google/renameio/v2": true, "golang.org/x/sys/unix": true}
	for _, imp := range pkg.Imports {
		first, _, _ := strings.Cut(imp, "/")
		if strings.Contains(first, ".") && !allowed[imp] {
			t.Errorf("watch imports %s; reach the box through the session", imp)
		}
	}
}
