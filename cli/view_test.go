package cli

import "testing"

// Only encoding/json's HTML escapes are undone; an escaped backslash
// before "u0026" is text, and stays as it was.
func TestReadableJSON(t *testing.T) {
	for in, want := range map[string]string{
		`"a \u0026\u0026 b \u003e c \u003C"`: `"a && b > c <"`,
		`"\\u0026"`:                          `"\\u0026"`,
		`"\\\u0026"`:                         `"\\&"`,
		`"\u00e9 \n \" \\"`:                  `"\u00e9 \n \" \\"`,
		`"\`:                                 `"\`,
	} {
		if got := string(readableJSON([]byte(in))); got != want {
			t.Errorf("%s: got %s, want %s", in, got, want)
		}
	}
}

// ps's STATE says what a bare status hides, and LIMITS the caps.
func TestStateWordAndLimits(t *testing.T) {
	three := 3
	for _, c := range []struct {
		r    run
		want string
	}{
		{run{State: "exited", Signal: "SIGKILL", OOMKilled: true}, "exited(SIGKILL, out of memory)"},
		{run{State: "exited", Signal: "SIGTERM", TimedOut: true}, "exited(SIGTERM, timed out)"},
		{run{State: "exited", ExitCode: &three, PidsMaxHit: 7}, "exited(3, 7 forks refused)"},
		{run{State: "exited", ExitCode: &three}, "exited(3)"},
		{run{State: "unknown", Reason: "another boot"}, "unknown: another boot"},
		{run{State: "running", Reason: "running"}, "running"},
	} {
		if got := stateWord(c.r); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
	r := run{}
	if got := limitsCell(r); got != "-" {
		t.Errorf("no limits: %q", got)
	}
	r.Limits = &struct {
		MemoryMB   int `json:"memory_mb"`
		CPUPercent int `json:"cpu_percent"`
		Pids       int `json:"pids"`
	}{MemoryMB: 512, CPUPercent: 50, Pids: 100}
	if got := limitsCell(r); got != "mem=512M,cpu=50%,pids=100" {
		t.Errorf("limits: %q", got)
	}
}
