// Package e2e drives the built agent-box from the outside, the way agents
// reach it: through a real ssh connection to a real sshd (ssh_test.go), in
// both MCP revisions byte by byte (protocol_test.go), with the official
// TypeScript SDK's client (tsclient_test.go) and the MCP Inspector's CLI
// (inspector_test.go), and installed and configured exactly as the README
// says, as root and as a normal user of a stock sshd (install_test.go), and
// inside a container through `docker exec -i` (docker_test.go). The
// in-process harness in cmd/agent-box covers the tools in depth; this
// package checks what only a real transport shows: that runs survive
// connections dying under them, and that third-party clients can use the
// tools as published.
//
// The tools these lanes need (sshd, the pinned inspector and SDK, the
// install lane's user, dockerd and busybox-static) are installed by
// .ci/setup. Without them a lane skips, except under CI=true, where a
// missing dependency is a broken setup and fails; the one exception is a
// machine where .ci/setup found that dockerd cannot start at all.
package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-box/agent-box/internal/abtest"
)

const module = "github.com/agent-box/agent-box"

var (
	// binary is agent-box built once for the package, with -race when the
	// tests are; the same file serves MCP and is each run's supervisor.
	binary string
	// repoRoot is the module's directory.
	repoRoot string
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	if len(os.Args) == 2 && os.Args[1] == fakeMCPServerArg {
		return fakeMCPServer()
	}
	flag.Parse()
	abtest.WaitBoundParallel()
	if testing.Short() {
		return m.Run() // every test here skips in -short mode: build nothing
	}
	root, err := findRepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	repoRoot = root
	// Not t.TempDir: the binary must outlive no test, but every test uses it.
	dir, err := os.MkdirTemp("", "agent-box-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "agent-box")
	if err := abtest.BuildInto(root, dir, "agent-box"); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building agent-box:", err)
		return 1
	}
	code := m.Run()
	removeDockerImage()
	return code
}

// findRepoRoot walks up from the working directory (the package's, under
// go test) to the go.mod of this module.
func findRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && modulePath(b) == module {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod of " + module + " above the working directory")
		}
		dir = parent
	}
}

func modulePath(gomod []byte) string {
	s := bufio.NewScanner(bytes.NewReader(gomod))
	for s.Scan() {
		if f := strings.Fields(s.Text()); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}

// missing skips the test for an absent dependency, or fails it in CI.
func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	abtest.Missing(t, format, args...)
}
