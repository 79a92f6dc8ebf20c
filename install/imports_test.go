package install

import (
	"os/exec"
	"strings"
	"testing"
)

// install is the local side: it runs on the user's machine, macOS too, and
// reaches the box through ssh alone. It imports the standard library only
// (none of the box side's runs, supervisor, runrecord, proc or cgroup,
// which are Linux's), and builds for darwin.
func TestImportsStdlibOnly(t *testing.T) {
	t.Parallel()
	for _, goos := range []string{"linux", "darwin"} {
		cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".")
		cmd.Env = append(cmd.Environ(), "GOOS="+goos, "GOARCH=arm64", "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("GOOS=%s go list: %v\n%s", goos, err, out)
		}
		if deps := strings.Fields(string(out)); len(deps) != 1 || deps[0] != "github.com/agent-box/agent-box/install" {
			t.Errorf("GOOS=%s: install depends on %v; it may import the standard library only", goos, deps)
		}
	}
}
