package abtest

import (
	"fmt"
	"strings"
)

// InOrder joins shell commands into one run's command that starts each
// only once the run's log, under stateDir, has grown past what the one
// before wrote. Writes to stdout and to stderr close together may be read,
// and so logged, in either order (framed mode logs them in the order the
// supervisor read them), and no sleep between them orders them on a
// loaded machine; waiting for the log does. Every step but the last must
// write something the log keeps; a step that does not is waited for 10 s.
func InOrder(stateDir string, steps ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `L=%s/runs/"$AGENT_BOX_NAME"/"$AGENT_BOX_RUN_ID"/log; size() { stat -c %%s "$L" 2>/dev/null || echo 0; }`, shellQuote(stateDir))
	for i, step := range steps {
		if i == len(steps)-1 {
			fmt.Fprintf(&b, "; %s", step)
			break
		}
		fmt.Fprintf(&b, `; n=$(size); %s; i=0; while [ "$(size)" -le "$n" ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done`, step)
	}
	return b.String()
}

// shellQuote quotes s for sh as one word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
