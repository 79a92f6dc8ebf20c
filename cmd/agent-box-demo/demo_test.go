package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/agent-box/agent-box/internal/abtest"
)

// TestDemo plays the whole scripted session against a freshly built
// agent-box, as make demo does, and requires every check to pass.
func TestDemo(t *testing.T) {
	bin, cleanup, err := abtest.Build()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	var out, serverErr bytes.Buffer
	err = run(bin, t.TempDir(), &out, &serverErr)
	if err != nil {
		t.Errorf("demo failed: %v", err)
	}
	if !strings.HasSuffix(out.String(), "\ndemo: all checks passed\n") {
		t.Errorf("demo output does not end with the all-passed line")
	}
	if t.Failed() {
		t.Logf("demo output:\n%s\nserver stderr:\n%s", out.String(), serverErr.String())
	}
}

// TestDemoServerGone: a "server" that exits at once is a failure, not a
// silent pass.
func TestDemoServerGone(t *testing.T) {
	var out, serverErr bytes.Buffer
	err := run("/bin/false", t.TempDir(), &out, &serverErr)
	if err == nil {
		t.Fatalf("run against /bin/false succeeded; output:\n%s", out.String())
	}
	if strings.Contains(out.String(), "all checks passed") {
		t.Errorf("output claims success:\n%s", out.String())
	}
}
