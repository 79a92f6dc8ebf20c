package proc

import (
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Linux's real-time signals as the C library exposes them: glibc keeps 32
// and 33 for itself, so SIGRTMIN is 34; SIGRTMAX is 64.
const (
	sigRTMin = 34
	sigRTMax = 64
	// rtFromMin is how far above SIGRTMIN bash's kill -l still counts
	// (SIGRTMIN+15); higher ones it counts down from SIGRTMAX.
	rtFromMin = 15
)

// SignalName is the name a run record's exit signal field
// (runrecord.Exit.Signal) holds for sig. Standard signals have their usual
// names, as unix.SignalName gives them ("SIGTERM"). Real-time signals are named as bash's kill -l prints
// them: SIGRTMIN, SIGRTMIN+1 … SIGRTMIN+15, SIGRTMAX-14 … SIGRTMAX-1,
// SIGRTMAX. Any other number is "SIG" and the number ("SIG32"), so that a
// signal is never recorded without a name.
func SignalName(sig unix.Signal) string {
	switch n := int(sig); {
	case n == sigRTMin:
		return "SIGRTMIN"
	case n == sigRTMax:
		return "SIGRTMAX"
	case n > sigRTMin && n <= sigRTMin+rtFromMin:
		return "SIGRTMIN+" + strconv.Itoa(n-sigRTMin)
	case n > sigRTMin+rtFromMin && n < sigRTMax:
		return "SIGRTMAX-" + strconv.Itoa(sigRTMax-n)
	}
	if name := unix.SignalName(sig); name != "" {
		return name
	}
	return "SIG" + strconv.Itoa(int(sig))
}

// SignalNumber maps a name that SignalName gives for a Linux signal (1..64)
// back to the signal. It accepts exactly those spellings: no other case, no
// missing "SIG", no "SIGRTMIN+0", no "SIG15" for SIGTERM.
func SignalNumber(name string) (unix.Signal, bool) {
	rest, ok := strings.CutPrefix(name, "SIG")
	if !ok {
		return 0, false
	}
	n := 0
	switch {
	case rest == "RTMIN":
		n = sigRTMin
	case rest == "RTMAX":
		n = sigRTMax
	case strings.HasPrefix(rest, "RTMIN+"):
		k, ok := smallNumber(rest[len("RTMIN+"):])
		if !ok {
			return 0, false
		}
		n = sigRTMin + k
	case strings.HasPrefix(rest, "RTMAX-"):
		k, ok := smallNumber(rest[len("RTMAX-"):])
		if !ok {
			return 0, false
		}
		n = sigRTMax - k
	case rest != "" && rest[0] >= '0' && rest[0] <= '9':
		k, ok := smallNumber(rest)
		if !ok {
			return 0, false
		}
		n = k
	default:
		sig := unix.SignalNum(name)
		if sig == 0 {
			return 0, false
		}
		n = int(sig)
	}
	// Only the canonical spelling of a signal Linux has: this also rejects
	// out-of-range offsets (SIGRTMIN+16) and numbered names of named
	// signals (SIG15).
	sig := unix.Signal(n)
	if n < 1 || n > sigRTMax || SignalName(sig) != name {
		return 0, false
	}
	return sig, true
}

// smallNumber parses a positive decimal without sign or leading zeros, of
// at most two digits.
func smallNumber(s string) (int, bool) {
	if len(s) == 0 || len(s) > 2 || s[0] == '0' {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}
