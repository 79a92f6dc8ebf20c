package runrecord

import (
	"errors"
	"os"
	"path/filepath"
)

// DefaultRoot is where runs live unless --state-dir says otherwise:
// $AGENT_BOX_STATE_DIR, else $XDG_STATE_HOME/agent-box, else
// ~/.local/state/agent-box. Persistent storage on purpose, not /run or
// /tmp: records must survive a reboot to say "rebooted" instead of nothing.
func DefaultRoot() (string, error) {
	if d := os.Getenv("AGENT_BOX_STATE_DIR"); d != "" {
		return filepath.Abs(d)
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "agent-box"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", errors.New("no state directory: set --state-dir, AGENT_BOX_STATE_DIR or HOME")
	}
	return filepath.Join(home, ".local", "state", "agent-box"), nil
}
