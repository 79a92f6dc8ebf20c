package proc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// ClockTicks is the unit of the CPU times and start time in
// /proc/PID/stat: sysconf(_SC_CLK_TCK), which is USER_HZ, and USER_HZ is
// 100 on every architecture Linux runs agent-box on: the kernel converts
// to it for user space whatever its own HZ (include/asm-generic/param.h,
// "#define USER_HZ 100"; proc(5) "divide by sysconf(_SC_CLK_TCK)"). Go
// cannot call sysconf without cgo, hence the constant.
const ClockTicks = 100

// PageSize is the size of the pages rss (field 24) counts.
var PageSize = int64(os.Getpagesize())

// CPUMillis is ticks of ClockTicks in milliseconds.
func CPUMillis(ticks uint64) int64 {
	return int64(min(ticks, 1<<53) * (1000 / ClockTicks))
}

// Usage is what one process uses now.
type Usage struct {
	CPUMS int64 // its CPU time and that of the children it waited for
	// RSSBytes is its resident memory now. Pages it shares with other
	// processes (libraries, memory a fork has not yet copied) count in
	// each of them, as ps(1) counts them.
	RSSBytes int64
	// PeakRSSBytes is the most it has been resident at once
	// (VmHWM), at least RSSBytes.
	PeakRSSBytes int64
}

// ReadUsage reads what pid uses, if pid is still the process that started
// at start: VmHWM from /proc/PID/status, then /proc/PID/stat. The stat is
// read second so that its start time vouches for the status read before
// it: a pid handed to another process in between has another start time.
// A process that is gone, a zombie or another is ErrNoProcess.
func ReadUsage(pid int, start uint64) (Usage, error) {
	data, err := readPIDFile(pid, "status")
	if err != nil {
		return Usage{}, err
	}
	peak := ParsePeakRSS(data)
	st, err := ReadStat(pid)
	if err != nil {
		return Usage{}, err
	}
	if st.Dead() || st.StartTime != start {
		return Usage{}, fmt.Errorf("pid %d: not the process that started at %d: %w", pid, start, ErrNoProcess)
	}
	rss := st.RSSPages * PageSize
	if st.RSSPages > (1<<62)/PageSize {
		rss = 1 << 62
	}
	return Usage{CPUMS: CPUMillis(st.CPUTicks), RSSBytes: rss, PeakRSSBytes: max(peak, rss)}, nil
}

// ParsePeakRSS returns the VmHWM line of a /proc/PID/status, in bytes
// (the kernel prints kB, meaning KiB); 0 when there is none (a kernel
// thread, a zombie) or it is not a number (fuzzed).
func ParsePeakRSS(status []byte) int64 {
	for line := range bytes.Lines(status) {
		rest, ok := bytes.CutPrefix(line, []byte("VmHWM:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil || kb < 0 || kb > 1<<52 {
			return 0
		}
		return kb << 10
	}
	return 0
}
