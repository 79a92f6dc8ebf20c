package proc_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agent-box/agent-box/proc"
)

func TestParsePeakRSS(t *testing.T) {
	for _, tt := range []struct {
		name, status string
		want         int64
	}{
		{"real", "Name:\tpython3\nVmPeak:\t  120000 kB\nVmHWM:\t  104512 kB\nVmRSS:\t  100000 kB\n", 104512 << 10},
		{"last line, no newline", "Name:\tx\nVmHWM:\t1 kB", 1024},
		{"kernel thread: none", "Name:\tkthreadd\nState:\tS (sleeping)\n", 0},
		{"a name that says VmHWM", "Name:\tVmHWM: 99 kB\nVmHWM:\t2 kB\n", 2048},
		{"not a number", "VmHWM:\tlots kB\n", 0},
		{"negative", "VmHWM:\t-5 kB\n", 0},
		{"another unit", "VmHWM:\t5 MB\n", 0},
		{"huge", "VmHWM:\t99999999999999999999 kB\n", 0},
		{"empty", "", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := proc.ParsePeakRSS([]byte(tt.status)); got != tt.want {
				t.Errorf("ParsePeakRSS = %d, want %d", got, tt.want)
			}
		})
	}
}

func FuzzParsePeakRSS(f *testing.F) {
	f.Add([]byte("VmHWM:\t  104512 kB\n"))
	if data, err := os.ReadFile("/proc/self/status"); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got := proc.ParsePeakRSS(data); got < 0 {
			t.Fatalf("ParsePeakRSS = %d", got)
		}
	})
}

// fakeProcess writes /proc/PID/stat (the usage.stat fixture: comm with
// spaces and parentheses) and a status under root.
func fakeProcess(t *testing.T, root, pid, stat, status string) {
	t.Helper()
	dir := filepath.Join(root, pid)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(fixtures, stat))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stat"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if status != "" {
		if err := os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReadUsage(t *testing.T) {
	root := t.TempDir()
	proc.SetProcRoot(t, root)
	fakeProcess(t, root, "114", "usage.stat", "Name:\tmy (usage) ) R 9\nVmHWM:\t204800 kB\n")
	fakeProcess(t, root, "107", "zombie.stat", "Name:\tdefunct kid\n")
	fakeProcess(t, root, "101", "spaces.stat", "Name:\tmy prog  v2\nVmHWM:\t4 kB\n")

	got, err := proc.ReadUsage(114, 9000)
	if err != nil {
		t.Fatal(err)
	}
	want := proc.Usage{CPUMS: 3000, RSSBytes: 25600 * proc.PageSize, PeakRSSBytes: 200 << 20}
	if got != want {
		t.Errorf("ReadUsage = %+v, want %+v (300 ticks of 10 ms; 25600 pages)", got, want)
	}
	// A VmHWM below rss (read at another moment) is raised to it.
	if got, err := proc.ReadUsage(101, 1000); err != nil || got.PeakRSSBytes != 355*proc.PageSize {
		t.Errorf("ReadUsage(101) = %+v, %v; want the peak raised to rss", got, err)
	}
	for _, tt := range []struct {
		name  string
		pid   int
		start uint64
	}{
		{"another start time: the pid was reused", 114, 8999},
		{"zombie", 107, 7000},
		{"gone", 999, 1},
		{"no pid", 0, 1},
	} {
		if got, err := proc.ReadUsage(tt.pid, tt.start); !errors.Is(err, proc.ErrNoProcess) {
			t.Errorf("%s: ReadUsage = %+v, %v; want ErrNoProcess", tt.name, got, err)
		}
	}
}

func TestReadUsageSelf(t *testing.T) {
	st, err := proc.ReadStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	var u proc.Usage
	// CPU time grows in ticks of 10 ms: spin until one is counted.
	for deadline := time.Now().Add(10 * time.Second); u.CPUMS == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no CPU time counted after 10 s of spinning")
		}
		for i := 0; i < 1e6; i++ {
			_ = i * i
		}
		if u, err = proc.ReadUsage(os.Getpid(), st.StartTime); err != nil {
			t.Fatal(err)
		}
	}
	if u.RSSBytes <= 0 || u.PeakRSSBytes < u.RSSBytes {
		t.Errorf("ReadUsage(self) = %+v: want rss > 0 and peak >= rss", u)
	}
	if _, err := proc.ReadUsage(os.Getpid(), st.StartTime+1); !errors.Is(err, proc.ErrNoProcess) {
		t.Errorf("ReadUsage with another start time: %v, want ErrNoProcess", err)
	}
}

func TestCPUMillis(t *testing.T) {
	if got := proc.CPUMillis(123); got != 1230 {
		t.Errorf("CPUMillis(123) = %d, want 1230", got)
	}
	if got := proc.CPUMillis(^uint64(0)); got <= 0 {
		t.Errorf("CPUMillis(max) = %d, want a positive bound", got)
	}
}
