package runrecord_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-box/agent-box/runrecord"
)

// DefaultRoot's precedence: $AGENT_BOX_STATE_DIR, else
// $XDG_STATE_HOME/agent-box, else ~/.local/state/agent-box. (--state-dir
// comes before all three; cmd/agent-box applies it, and its
// TestStateDirPrecedence tests the whole chain.)
func TestDefaultRootPrecedence(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	const (
		home = "/home/u"
		xdg  = "/xdg/state"
		own  = "/srv/agent-box-state"
	)
	for _, tc := range []struct {
		name           string
		own, xdg, home string
		want           string // "" means an error
	}{
		{"own dir first", own, xdg, home, own},
		{"own dir alone", own, "", "", own},
		{"own dir relative, made absolute", "rel/state", xdg, home, filepath.Join(wd, "rel/state")},
		{"own dir cleaned", "/srv//x/../state/", xdg, home, "/srv/state"},
		{"xdg next", "", xdg, home, "/xdg/state/agent-box"},
		{"xdg without home", "", xdg, "", "/xdg/state/agent-box"},
		{"xdg cleaned", "", "/xdg//state/", home, "/xdg/state/agent-box"},
		// The XDG Base Directory spec: a relative path is invalid and is
		// to be ignored.
		{"xdg relative ignored", "", "rel/xdg", home, "/home/u/.local/state/agent-box"},
		{"home last", "", "", home, "/home/u/.local/state/agent-box"},
		{"nothing set", "", "", "", ""},
		{"only a relative xdg", "", "rel/xdg", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// An empty value is as good as unset to DefaultRoot.
			env := map[string]string{"AGENT_BOX_STATE_DIR": tc.own, "XDG_STATE_HOME": tc.xdg, "HOME": tc.home}
			got, err := runrecord.DefaultRoot(func(k string) string { return env[k] })
			if tc.want == "" {
				if err == nil {
					t.Fatalf("DefaultRoot() = %q, want an error", got)
				}
				for _, hint := range []string{"--state-dir", "AGENT_BOX_STATE_DIR", "HOME"} {
					if !strings.Contains(err.Error(), hint) {
						t.Errorf("error %q does not name %s", err, hint)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("DefaultRoot() failed: %v", err)
			}
			if got != tc.want {
				t.Errorf("DefaultRoot() = %q, want %q", got, tc.want)
			}
		})
	}
}
