package cli

import (
	"go/build"
	"strings"
	"testing"
)

// The CLI is a caller of runs like the MCP tools, not a second reader of
// the state dir (issue 13, item 5): besides the standard library it
// imports runs alone, so logs, records and frames are read in one place.
func TestCLIImportsOnlyRuns(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		first, _, _ := strings.Cut(imp, "/")
		if strings.Contains(first, ".") && imp != "github.com/agent-box/agent-box/runs" {
			t.Errorf("cli imports %s; go through package runs", imp)
		}
	}
}
