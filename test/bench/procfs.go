package main

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// memInfo is a process's resident memory from /proc/PID/status.
type memInfo struct {
	RSS int64 // VmRSS, bytes
	HWM int64 // VmHWM (peak RSS), bytes
}

func readMem(pid int) (memInfo, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return memInfo{}, err
	}
	var m memInfo
	for line := range strings.SplitSeq(string(data), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var dst *int64
		switch key {
		case "VmRSS":
			dst = &m.RSS
		case "VmHWM":
			dst = &m.HWM
		default:
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if err != nil {
			return memInfo{}, fmt.Errorf("/proc/%d/status %s: %w", pid, key, err)
		}
		*dst = kb << 10
	}
	if m.HWM == 0 {
		// A zombie has no memory lines left.
		return memInfo{}, fmt.Errorf("/proc/%d/status: no VmHWM (exited?)", pid)
	}
	return m, nil
}

// clockTick is USER_HZ, 100 on every Linux architecture agent-box targets
// (sysconf(_SC_CLK_TCK); proc(5) says utime is "in clock ticks").
const clockTick = 10 * time.Millisecond

// readCPU returns the user and system time a process has used so far
// (fields 14 and 15 of /proc/PID/stat).
func readCPU(pid int) (user, sys time.Duration, err error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// comm may hold spaces: the fields after it start past the last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	// f[0] is field 3 (state), so field n is f[n-3].
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("/proc/%d/stat: malformed times", pid)
	}
	return time.Duration(u) * clockTick, time.Duration(s) * clockTick, nil
}

// cpuWithChildren is a process's CPU time plus that of its children it has
// waited for (fields 16 and 17, cutime and cstime): for the server, that
// includes the supervisors it reaped, and theirs the children they reaped.
func cpuWithChildren(pid int) time.Duration {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 15 {
		return 0
	}
	var sum int64
	for _, k := range []int{11, 12, 13, 14} {
		v, err := strconv.ParseInt(f[k], 10, 64)
		if err != nil {
			return 0
		}
		sum += v
	}
	return time.Duration(sum) * clockTick
}

func cpuOf(pid int) time.Duration {
	u, s, err := readCPU(pid)
	if err != nil {
		return 0
	}
	return u + s
}

// percentile returns the nearest-rank p-th percentile (0 < p <= 100).
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	k := int(float64(len(s))*p/100+0.999999) - 1
	return s[max(0, min(k, len(s)-1))]
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// mibPerSec is a throughput in MiB/s.
func mibPerSec(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return mib(n) / d.Seconds()
}
