package runrecord

import (
	"errors"
	"path/filepath"
)

// DefaultRoot is where runs live unless --state-dir says otherwise:
// $AGENT_BOX_STATE_DIR, else $XDG_STATE_HOME/agent-box, else
// $HOME/.local/state/agent-box. Persistent storage on purpose, not /run or
// /tmp: records must survive a reboot to say "rebooted" instead of nothing.
//
// getenv reads those variables (main passes os.Getenv): a library reads no
// environment of its own. An empty value counts as unset, as for
// os.UserHomeDir.
func DefaultRoot(getenv func(string) string) (string, error) {
	if d := getenv("AGENT_BOX_STATE_DIR"); d != "" {
		return filepath.Abs(d)
	}
	if d := getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "agent-box"), nil
	}
	home := getenv("HOME")
	if home == "" {
		return "", errors.New("no state directory: set --state-dir, AGENT_BOX_STATE_DIR or HOME")
	}
	return filepath.Join(home, ".local", "state", "agent-box"), nil
}
