package proc

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestSignalNameRoundTrip pins the record's exit signal format for every
// Linux signal: the standard names as unix.SignalName gives them, the
// real-time ones as bash's kill -l prints them, SIGn for the rest.
func TestSignalNameRoundTrip(t *testing.T) {
	want := map[unix.Signal]string{
		1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP",
		6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL", 10: "SIGUSR1",
		11: "SIGSEGV", 12: "SIGUSR2", 13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM",
		16: "SIGSTKFLT", 17: "SIGCHLD", 18: "SIGCONT", 19: "SIGSTOP", 20: "SIGTSTP",
		21: "SIGTTIN", 22: "SIGTTOU", 23: "SIGURG", 24: "SIGXCPU", 25: "SIGXFSZ",
		26: "SIGVTALRM", 27: "SIGPROF", 28: "SIGWINCH", 29: "SIGIO", 30: "SIGPWR",
		31: "SIGSYS", 32: "SIG32", 33: "SIG33",
		34: "SIGRTMIN", 35: "SIGRTMIN+1", 36: "SIGRTMIN+2", 37: "SIGRTMIN+3",
		38: "SIGRTMIN+4", 39: "SIGRTMIN+5", 40: "SIGRTMIN+6", 41: "SIGRTMIN+7",
		42: "SIGRTMIN+8", 43: "SIGRTMIN+9", 44: "SIGRTMIN+10", 45: "SIGRTMIN+11",
		46: "SIGRTMIN+12", 47: "SIGRTMIN+13", 48: "SIGRTMIN+14", 49: "SIGRTMIN+15",
		50: "SIGRTMAX-14", 51: "SIGRTMAX-13", 52: "SIGRTMAX-12", 53: "SIGRTMAX-11",
		54: "SIGRTMAX-10", 55: "SIGRTMAX-9", 56: "SIGRTMAX-8", 57: "SIGRTMAX-7",
		58: "SIGRTMAX-6", 59: "SIGRTMAX-5", 60: "SIGRTMAX-4", 61: "SIGRTMAX-3",
		62: "SIGRTMAX-2", 63: "SIGRTMAX-1", 64: "SIGRTMAX",
	}
	seen := map[string]unix.Signal{}
	for sig := unix.Signal(1); sig <= 64; sig++ {
		name := SignalName(sig)
		if name != want[sig] {
			t.Errorf("SignalName(%d) = %q, want %q", int(sig), name, want[sig])
		}
		if std := unix.SignalName(sig); std != "" && name != std {
			t.Errorf("SignalName(%d) = %q, unix.SignalName says %q", int(sig), name, std)
		}
		if other, dup := seen[name]; dup {
			t.Errorf("SignalName(%d) = %q, the same as for %d", int(sig), name, int(other))
		}
		seen[name] = sig
		got, ok := SignalNumber(name)
		if !ok || got != sig {
			t.Errorf("SignalNumber(%q) = %d, %v, want %d, true", name, int(got), ok, int(sig))
		}
	}
}

func TestSignalNumberRejectsJunk(t *testing.T) {
	for _, s := range []string{
		"", "SIG", "sig", "TERM", "sigterm", "SIGterm", " SIGTERM", "SIGTERM ", "SIGTERM\n",
		"SIGFOO", "SIG0", "SIG-1", "SIG+1", "SIG032", "SIG65", "SIG99999999999999999999",
		"SIG15", "SIG34", "SIG64", // numbered spellings of named signals
		"SIGRTMIN+0", "SIGRTMIN+16", "SIGRTMIN+01", "SIGRTMIN-1", "SIGRTMIN+", "SIGRTMIN++1", "SIGRTMIN+ 1",
		"SIGRTMAX-0", "SIGRTMAX-15", "SIGRTMAX-014", "SIGRTMAX+1", "SIGRTMAX-", "SIGRTMAX--1",
		"SIGRTMIN+1x", "RTMIN", "RTMIN+1", "SIGRTMIN+١", "SIG３３",
	} {
		if sig, ok := SignalNumber(s); ok {
			t.Errorf("SignalNumber(%q) = %d, true; want false", s, int(sig))
		}
	}
}

// SignalName names every value, so that an exit is never recorded without
// its signal.
func TestSignalNameOutOfRange(t *testing.T) {
	for _, sig := range []unix.Signal{0, 65, 128, -1} {
		name := SignalName(sig)
		if name == "" {
			t.Errorf("SignalName(%d) is empty", int(sig))
		}
		if _, ok := SignalNumber(name); ok {
			t.Errorf("SignalNumber(SignalName(%d) = %q) accepted a signal Linux does not have", int(sig), name)
		}
	}
}
