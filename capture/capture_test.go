package capture_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/agent-box/agent-box/capture"
	"github.com/agent-box/agent-box/logframe"
)

// TestMain lets the test binary re-exec itself as a helper process; see
// runEFBIGHelper.
func TestMain(m *testing.M) {
	if os.Getenv("CAPTURE_TEST_HELPER") == "efbig" {
		efbigHelper()
		return
	}
	os.Exit(m.Run())
}

// fakeFile is an in-memory log file that can fail a write after a given
// number of bytes, the way a full disk does.
type fakeFile struct {
	mu        sync.Mutex
	data      []byte
	limit     int   // writes beyond this many bytes fail; <0: never
	err       error // the failure; nil with a limit: a short write without error
	truncErr  error
	writes    int
	truncates []int64
	closed    bool
}

func (f *fakeFile) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes++
	if f.limit >= 0 && len(f.data)+len(p) > f.limit {
		n := max(0, f.limit-len(f.data))
		f.data = append(f.data, p[:n]...)
		return n, f.err
	}
	f.data = append(f.data, p...)
	return len(p), nil
}

func (f *fakeFile) Truncate(size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.truncates = append(f.truncates, size)
	if f.truncErr != nil {
		return f.truncErr
	}
	f.data = f.data[:size]
	return nil
}

func (f *fakeFile) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

var _ capture.LogFile = (*fakeFile)(nil)

// createFake creates a Log over a fakeFile.
func createFake(t *testing.T, mode capture.Mode, opts capture.Options, f *fakeFile) *capture.Log {
	t.Helper()
	capture.SetOpenFile(t, func(string) (capture.LogFile, error) { return f, nil })
	l, err := capture.Create("fake.log", mode, opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// mustWrite writes p and checks the writer's promise: all of p, no error.
func mustWrite(t *testing.T, w io.Writer, p string) {
	t.Helper()
	n, err := w.Write([]byte(p))
	if n != len(p) || err != nil {
		t.Fatalf("Write(%q) = %d, %v; want %d, nil", p, n, err, len(p))
	}
}

// decode splits a framed log into its streams, requiring it to end on a
// frame boundary.
func decode(t *testing.T, log []byte) (stdout, stderr string, frames int) {
	t.Helper()
	var o, e []byte
	d := logframe.NewDemuxer(0)
	err := d.Feed(log, func(f logframe.Frame) error {
		frames++
		if f.Stream == logframe.Stdout {
			o = append(o, f.Payload...)
		} else {
			e = append(e, f.Payload...)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("log does not decode: %v", err)
	}
	if d.Pending() != 0 {
		t.Fatalf("log ends with %d bytes of a partial frame", d.Pending())
	}
	return string(o), string(e), frames
}

func TestCreate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "run.log")
	l, err := capture.Create(path, capture.Combined, capture.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, l.Stdout(), "out\n")
	mustWrite(t, l.Stderr(), "err\n")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("second Close = %v, want os.ErrClosed", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	if b, _ := os.ReadFile(path); string(b) != "out\nerr\n" {
		t.Errorf("log %q", b)
	}

	if _, err := capture.Create(path, capture.Combined, capture.Options{}); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Create over an existing log = %v, want fs.ErrExist", err)
	}

	// A symlink planted at the log's path must not be followed.
	target := filepath.Join(dir, "target")
	link := filepath.Join(dir, "link.log")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := capture.Create(link, capture.Framed, capture.Options{}); err == nil {
		t.Error("Create through a symlink succeeded")
	}
	if _, err := os.Lstat(target); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("symlink target was created: %v", err)
	}

	for _, bad := range []struct {
		mode capture.Mode
		opts capture.Options
	}{
		{"raw", capture.Options{}},
		{"", capture.Options{}},
		{capture.Combined, capture.Options{MaxBytes: -1}},
	} {
		p := filepath.Join(dir, "bad.log")
		if _, err := capture.Create(p, bad.mode, bad.opts); err == nil {
			t.Errorf("Create(%q, %+v) succeeded", bad.mode, bad.opts)
		}
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Create(%q, %+v) failed but left a file", bad.mode, bad.opts)
		}
	}
}

func TestCombined(t *testing.T) {
	f := &fakeFile{limit: -1}
	l := createFake(t, capture.Combined, capture.Options{}, f)
	mustWrite(t, l.Stdout(), "one ")
	mustWrite(t, l.Stderr(), "two ")
	mustWrite(t, l.Stdout(), "")
	mustWrite(t, l.Stdout(), "three")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if string(f.data) != "one two three" || !f.closed {
		t.Errorf("log %q (closed %v)", f.data, f.closed)
	}
	if st := l.Status(); st != (capture.Status{Bytes: 13}) {
		t.Errorf("Status %+v", st)
	}
	if f.writes != 3 {
		t.Errorf("%d write calls for 3 non-empty Writes", f.writes)
	}
}

// Stop after Close changes nothing: the supervisor stops the log when a
// record write finds the disk full, and the final record comes after the
// log is closed, whole.
func TestStopAfterClose(t *testing.T) {
	f := &fakeFile{limit: -1}
	l := createFake(t, capture.Combined, capture.Options{}, f)
	mustWrite(t, l.Stdout(), "all of it")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l.Stop(errors.New("the disk is full"))
	if st := l.Status(); st != (capture.Status{Bytes: 9}) {
		t.Errorf("Status after Stop of a closed log = %+v, want 9 bytes and no error", st)
	}
}

func TestFramed(t *testing.T) {
	f := &fakeFile{limit: -1}
	l := createFake(t, capture.Framed, capture.Options{}, f)
	big := bytes.Repeat([]byte("0123456789"), logframe.MaxPayload/10+5) // two frames
	mustWrite(t, l.Stdout(), "out1\n")
	mustWrite(t, l.Stderr(), "err1\n")
	mustWrite(t, l.Stdout(), string(big))
	mustWrite(t, l.Stderr(), "")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, frames := decode(t, f.data)
	if stdout != "out1\n"+string(big) || stderr != "err1\n" {
		t.Errorf("stdout %d bytes, stderr %q", len(stdout), stderr)
	}
	if frames != 4 {
		t.Errorf("%d frames, want 4", frames)
	}
	// One write(2) per Write, even for the one that needs two frames.
	if f.writes != 3 {
		t.Errorf("%d write calls, want 3", f.writes)
	}
	if st := l.Status(); st != (capture.Status{Bytes: int64(len(f.data))}) {
		t.Errorf("Status %+v, log is %d bytes", st, len(f.data))
	}
}

func TestCombinedCap(t *testing.T) {
	tests := []struct {
		name    string
		max     int64
		writes  []string
		want    string
		capped  bool
		dropped int64
	}{
		{"under", 100, []string{"hello", "world"}, "helloworld", false, 0},
		{"exactly", 10, []string{"hello", "world"}, "helloworld", false, 0},
		{"cut inside a write", 8, []string{"hello", "world", "more"}, "hellowor", true, 2 + 4},
		{"cut at a write boundary", 5, []string{"hello", "world"}, "hello", true, 5},
		{"first write over", 3, []string{"hello"}, "hel", true, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeFile{limit: -1}
			l := createFake(t, capture.Combined, capture.Options{MaxBytes: tt.max}, f)
			for i, w := range tt.writes {
				if i%2 == 0 {
					mustWrite(t, l.Stdout(), w)
				} else {
					mustWrite(t, l.Stderr(), w)
				}
			}
			st := l.Status()
			if string(f.data) != tt.want {
				t.Errorf("log %q, want %q", f.data, tt.want)
			}
			want := capture.Status{Bytes: int64(len(tt.want)), Dropped: tt.dropped, Capped: tt.capped}
			if tt.capped {
				want.Err = capture.ErrCapped
			}
			if st != want {
				t.Errorf("Status %+v, want %+v", st, want)
			}
		})
	}
}

func TestFramedCap(t *testing.T) {
	frame := func(s logframe.Stream, p string) int64 {
		return int64(len(logframe.AppendFrames(nil, s, []byte(p))))
	}
	three := int64(logframe.MaxLine) * 3
	big := string(bytes.Repeat([]byte{'x'}, 5*logframe.MaxPayload+1))
	tests := []struct {
		name    string
		max     int64
		writes  []string
		wantOut string // stdout in the log (writes alternate stdout, stderr)
		wantErr string
		capped  bool
		dropped int64
	}{
		{"under", 1000, []string{"a", "b"}, "a", "b", false, 0},
		{"exactly", frame(1, "aaa") + frame(2, "bb"), []string{"aaa", "bb"}, "aaa", "bb", false, 0},
		{"frame one byte over", frame(1, "aaa") + frame(2, "bb") - 1, []string{"aaa", "bb", "c"}, "aaa", "", true, 2 + 1},
		// The frame that overflows is cut to what fits: 100 bytes of line
		// hold (100-3)/4*3 = 72 bytes of payload.
		{"a big write's first bytes", three + 100, []string{big}, big[:3*logframe.MaxPayload+72], "", true, int64(len(big) - 3*logframe.MaxPayload - 72)},
		// Issue 9: a cap below one frame kept nothing, and a later, smaller
		// frame of the other stream could follow the cut one.
		{"cap 10 keeps the first 3 bytes", 10, []string{"1\n2\n3\n4\n", "e"}, "1\n2", "", true, 5 + 1},
		{"cap below the smallest frame", 6, []string{"hello", "e"}, "", "", true, 5 + 1},
		{"the smallest frame holds 3 bytes", 7, []string{"hello", "e"}, "hel", "", true, 2 + 1},
		{"cut after a whole write", frame(1, "abc") + 6, []string{"abc", "e", "x"}, "abc", "", true, 1 + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeFile{limit: -1}
			l := createFake(t, capture.Framed, capture.Options{MaxBytes: tt.max}, f)
			for i, w := range tt.writes {
				if i%2 == 0 {
					mustWrite(t, l.Stdout(), w)
				} else {
					mustWrite(t, l.Stderr(), w)
				}
			}
			if int64(len(f.data)) > tt.max {
				t.Errorf("log is %d bytes, cap %d", len(f.data), tt.max)
			}
			stdout, stderr, _ := decode(t, f.data)
			if stdout != tt.wantOut || stderr != tt.wantErr {
				t.Errorf("stdout %d bytes, stderr %q; want %d, %q", len(stdout), stderr, len(tt.wantOut), tt.wantErr)
			}
			want := capture.Status{Bytes: int64(len(f.data)), Dropped: tt.dropped, Capped: tt.capped}
			if tt.capped {
				want.Err = capture.ErrCapped
			}
			if st := l.Status(); st != want {
				t.Errorf("Status %+v, want %+v", st, want)
			}
		})
	}
}

// TestFramedCapKeepsTheFirstBytes: for every cap up to a few frames, the
// framed log is at most the cap, decodes to a prefix of the output in the
// order it was written (no later frame after a cut one), and keeps all the
// output that fits: when some is dropped, not even one more frame line of
// one byte (7 bytes) would have fit.
func TestFramedCapKeepsTheFirstBytes(t *testing.T) {
	writes := []string{"one\n", "err-a\n", strings.Repeat("x", 50), "b", "err-b is longer\n", strings.Repeat("y", 300), "z"}
	var all string
	for _, w := range writes {
		all += w
	}
	for max := int64(1); max <= 700; max++ {
		f := &fakeFile{limit: -1}
		l := createFake(t, capture.Framed, capture.Options{MaxBytes: max}, f)
		for i, w := range writes {
			if i%2 == 0 {
				mustWrite(t, l.Stdout(), w)
			} else {
				mustWrite(t, l.Stderr(), w)
			}
		}
		if int64(len(f.data)) > max {
			t.Fatalf("cap %d: log is %d bytes", max, len(f.data))
		}
		var kept []byte
		d := logframe.NewDemuxer(0)
		if err := d.Feed(f.data, func(fr logframe.Frame) error { kept = append(kept, fr.Payload...); return nil }); err != nil || d.Pending() != 0 {
			t.Fatalf("cap %d: log does not decode: %v, %d bytes pending", max, err, d.Pending())
		}
		if !strings.HasPrefix(all, string(kept)) {
			t.Fatalf("cap %d: kept %q, not a prefix of the output in order", max, kept)
		}
		st := l.Status()
		if int64(len(kept))+st.Dropped != int64(len(all)) {
			t.Fatalf("cap %d: kept %d + dropped %d != %d", max, len(kept), st.Dropped, len(all))
		}
		if len(kept) < len(all) && (max-int64(len(f.data)) >= int64(logframe.FrameLen(1)) || !st.Capped) {
			t.Fatalf("cap %d: kept %d of %d bytes with %d bytes of room left (capped %v)", max, len(kept), len(all), max-int64(len(f.data)), st.Capped)
		}
	}
}

func TestWriteError(t *testing.T) {
	tests := []struct {
		name      string
		mode      capture.Mode
		limit     int // bytes the file takes before failing
		err       error
		truncErr  error
		writes    []string
		wantLog   string // combined: the log; framed: stdout of the decoded log
		wantIs    []error
		dropped   int64
		callsMade int
	}{
		{
			name: "ENOSPC mid-write", mode: capture.Combined, limit: 7, err: syscall.ENOSPC,
			writes: []string{"hello", "world", "after"}, wantLog: "hello",
			wantIs: []error{syscall.ENOSPC}, dropped: 5 + 5, callsMade: 2,
		},
		{
			name: "EIO on first write", mode: capture.Combined, limit: 0, err: syscall.EIO,
			writes: []string{"hello", "x"}, wantLog: "",
			wantIs: []error{syscall.EIO}, dropped: 6, callsMade: 1,
		},
		{
			name: "short write without error", mode: capture.Combined, limit: 3, err: nil,
			writes: []string{"hello", "x"}, wantLog: "",
			wantIs: []error{io.ErrShortWrite}, dropped: 6, callsMade: 1,
		},
		{
			name: "EFBIG mid-frame", mode: capture.Framed, limit: 20, err: syscall.EFBIG,
			writes: []string{"hello", "world", "after"}, wantLog: "hello",
			wantIs: []error{syscall.EFBIG}, dropped: 5 + 5, callsMade: 2,
		},
		{
			name: "truncate fails too", mode: capture.Combined, limit: 7, err: syscall.ENOSPC, truncErr: syscall.EROFS,
			writes: []string{"hello", "world"}, wantLog: "hellowo",
			wantIs: []error{syscall.ENOSPC, syscall.EROFS}, dropped: 5, callsMade: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeFile{limit: tt.limit, err: tt.err, truncErr: tt.truncErr}
			l := createFake(t, tt.mode, capture.Options{}, f)
			for _, w := range tt.writes {
				mustWrite(t, l.Stdout(), w)
			}
			if f.writes != tt.callsMade {
				t.Errorf("%d write calls, want %d: writing must stop at the first error", f.writes, tt.callsMade)
			}
			got := string(f.data)
			if tt.mode == capture.Framed {
				got, _, _ = decode(t, f.data)
			}
			if got != tt.wantLog {
				t.Errorf("log %q, want %q", got, tt.wantLog)
			}
			st := l.Status()
			for _, target := range tt.wantIs {
				if !errors.Is(st.Err, target) {
					t.Errorf("Status.Err = %v, want it to wrap %v", st.Err, target)
				}
			}
			if st.Capped || errors.Is(st.Err, capture.ErrCapped) {
				t.Errorf("a write error reported as the cap: %+v", st)
			}
			if st.Dropped != tt.dropped {
				t.Errorf("Dropped = %d, want %d", st.Dropped, tt.dropped)
			}
			if tt.truncErr == nil && st.Bytes != int64(len(f.data)) {
				t.Errorf("Bytes = %d, file has %d", st.Bytes, len(f.data))
			}
			if err := l.Close(); err != nil {
				t.Errorf("Close = %v", err)
			}
			if f.writes != tt.callsMade {
				t.Errorf("Close wrote: %d write calls", f.writes)
			}
		})
	}
}

// TestEFBIG writes past a real RLIMIT_FSIZE in a helper process: the
// process must survive SIGXFSZ (the Go runtime ignores it) and the log must
// be cut back to the last complete write.
func TestEFBIG(t *testing.T) {
	for _, mode := range []capture.Mode{capture.Combined, capture.Framed} {
		t.Run(string(mode), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "run.log")
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "CAPTURE_TEST_HELPER=efbig", "CAPTURE_TEST_PATH="+path, "CAPTURE_TEST_MODE="+string(mode))
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("helper: %v (output %q)", err, out)
			}
			var rep efbigReport
			if err := json.Unmarshal(out, &rep); err != nil {
				t.Fatalf("helper output %q: %v", out, err)
			}
			if !rep.IsEFBIG {
				t.Errorf("Status.Err = %q, want EFBIG", rep.Err)
			}
			log, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(log)) != rep.Bytes || len(log) > efbigLimit {
				t.Errorf("log is %d bytes, Status.Bytes %d, limit %d", len(log), rep.Bytes, efbigLimit)
			}
			var chunks int
			if mode == capture.Combined {
				if len(log)%len(efbigChunk) != 0 || !bytes.Equal(log, bytes.Repeat(efbigChunk, len(log)/len(efbigChunk))) {
					t.Errorf("log is not cut on a write boundary: %d bytes", len(log))
				}
				chunks = len(log) / len(efbigChunk)
			} else {
				stdout, _, _ := decode(t, log)
				chunks = len(stdout) / len(efbigChunk)
			}
			if chunks == 0 || rep.Dropped != int64((efbigWrites-chunks)*len(efbigChunk)) {
				t.Errorf("%d writes kept, Dropped %d", chunks, rep.Dropped)
			}
		})
	}
}

const (
	efbigLimit  = 1000
	efbigWrites = 20
)

var efbigChunk = []byte("0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz\n")

type efbigReport struct {
	Bytes, Dropped int64
	Err            string
	IsEFBIG        bool
}

// efbigHelper runs in the re-executed test binary: it lowers its own file
// size limit, which would be unsafe in the test process itself.
func efbigHelper() {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "efbig helper:", err)
		os.Exit(2)
	}
	lim := &syscall.Rlimit{Cur: efbigLimit, Max: efbigLimit}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, lim); err != nil {
		fail(err)
	}
	l, err := capture.Create(os.Getenv("CAPTURE_TEST_PATH"), capture.Mode(os.Getenv("CAPTURE_TEST_MODE")), capture.Options{})
	if err != nil {
		fail(err)
	}
	for range efbigWrites {
		l.Stdout().Write(efbigChunk)
	}
	if err := l.Close(); err != nil {
		fail(err)
	}
	st := l.Status()
	rep := efbigReport{Bytes: st.Bytes, Dropped: st.Dropped, IsEFBIG: errors.Is(st.Err, syscall.EFBIG)}
	if st.Err != nil {
		rep.Err = st.Err.Error()
	}
	if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
		fail(err)
	}
}

func TestSecrets(t *testing.T) {
	secrets := capture.Options{Secrets: bs("hunter2", "", "abc")}
	t.Run("combined", func(t *testing.T) {
		f := &fakeFile{limit: -1}
		l := createFake(t, capture.Combined, secrets, f)
		mustWrite(t, l.Stdout(), "pw=hun")
		mustWrite(t, l.Stdout(), "ter2;")
		mustWrite(t, l.Stderr(), " tail hunt")
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if got, want := string(f.data), "pw=[redacted]; tail hunt"; got != want {
			t.Errorf("log %q, want %q", got, want)
		}
	})
	t.Run("combined is one stream", func(t *testing.T) {
		// Redacting stdout alone would emit "sec" and hold back "ab",
		// which might start "abc"; stderr's "ret" would then follow "sec"
		// in the file. One Redactor over the file's bytes cannot do that.
		f := &fakeFile{limit: -1}
		l := createFake(t, capture.Combined, capture.Options{Secrets: bs("secret", "abc")}, f)
		mustWrite(t, l.Stdout(), "secab")
		mustWrite(t, l.Stderr(), "ret")
		mustWrite(t, l.Stdout(), "secret")
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if got, want := string(f.data), "secabret[redacted]"; got != want {
			t.Errorf("log %q, want %q", got, want)
		}
	})
	t.Run("framed keeps streams apart", func(t *testing.T) {
		f := &fakeFile{limit: -1}
		l := createFake(t, capture.Framed, secrets, f)
		mustWrite(t, l.Stdout(), "pw=hun")
		mustWrite(t, l.Stderr(), "ter2 is not stdout's")
		mustWrite(t, l.Stdout(), "ter2;")
		mustWrite(t, l.Stderr(), " hunter2 at end: hunter2")
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		stdout, stderr, _ := decode(t, f.data)
		if stdout != "pw=[redacted];" || stderr != "ter2 is not stdout's [redacted] at end: [redacted]" {
			t.Errorf("stdout %q\nstderr %q", stdout, stderr)
		}
	})
	t.Run("cap counts redacted bytes", func(t *testing.T) {
		f := &fakeFile{limit: -1}
		l := createFake(t, capture.Combined, capture.Options{Secrets: bs("hunter2"), MaxBytes: 12}, f)
		mustWrite(t, l.Stdout(), "hunter2 hunter2")
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if got := string(f.data); got != "[redacted] [" {
			t.Errorf("log %q", got)
		}
		if st := l.Status(); !st.Capped || st.Dropped != int64(len(capture.Mask))-1 {
			t.Errorf("Status %+v", st)
		}
	})
	t.Run("held back bytes dropped after error", func(t *testing.T) {
		f := &fakeFile{limit: 3, err: syscall.ENOSPC}
		l := createFake(t, capture.Combined, capture.Options{Secrets: bs("hunter2")}, f)
		mustWrite(t, l.Stdout(), "abcdef hun") // "hun" held back; "abcdef " fails
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if st := l.Status(); st.Dropped != 10 || len(f.data) != 0 {
			t.Errorf("Status %+v, log %q", st, f.data)
		}
	})
}

// TestConcurrent writes both streams from several goroutines while Status is
// polled; run with -race. Each write is one frame that must arrive whole.
func TestConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.log")
	l, err := capture.Create(path, capture.Framed, capture.Options{Secrets: bs("s3cret")})
	if err != nil {
		t.Fatal(err)
	}
	const writers, writes = 4, 200
	var wg sync.WaitGroup
	done := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for {
			select {
			case <-done:
				return
			default:
				if st := l.Status(); st.Err != nil {
					t.Errorf("Status.Err %v", st.Err)
					return
				}
			}
		}
	}()
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := l.Stdout()
			if g%2 == 1 {
				w = l.Stderr()
			}
			for i := range writes {
				fmt.Fprintf(w, "<g%d i%d>\n", g, i)
			}
		}()
	}
	wg.Wait()
	close(done)
	<-polled
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	next := make([]int, writers)
	d := logframe.NewDemuxer(0)
	err = d.Feed(log, func(f logframe.Frame) error {
		var g, i int
		if _, err := fmt.Sscanf(string(f.Payload), "<g%d i%d>\n", &g, &i); err != nil {
			return fmt.Errorf("frame %q: %w", f.Payload, err)
		}
		if want := logframe.Stream(1 + g%2); f.Stream != want || i != next[g] {
			return fmt.Errorf("frame %q on %v, want write %d on %v", f.Payload, f.Stream, next[g], want)
		}
		next[g]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for g, n := range next {
		if n != writes {
			t.Errorf("writer %d: %d frames, want %d", g, n, writes)
		}
	}
	if st := l.Status(); st.Bytes != int64(len(log)) || st.Dropped != 0 {
		t.Errorf("Status %+v, log %d bytes", st, len(log))
	}
}

// benchLog writes 1 MiB chunks of log-like text through open's writer to a
// real file; every 256 MiB it starts a new file and deletes the old one,
// outside the timer, so the benchmark neither fills the disk nor waits for
// writeback (deleted dirty pages are dropped unwritten): it measures the
// cost of getting bytes into the page cache, where capture's own overhead
// shows most. It also reports CPU time per MiB (user+sys, from getrusage),
// which a busy machine distorts less than wall time.
func benchLog(b *testing.B, open func(path string) (io.Writer, func() error)) {
	dir := b.TempDir()
	line := []byte("2024-01-01T00:00:00Z INFO a log line of ordinary text, 64 bytes\n")
	p := bytes.Repeat(line, (1<<20)/len(line))
	b.SetBytes(int64(len(p)))
	var (
		w       io.Writer
		closeFn func() error
		path    string
		written int64
		files   int
	)
	next := func() {
		b.StopTimer()
		if closeFn != nil {
			if err := closeFn(); err != nil {
				b.Fatal(err)
			}
			os.Remove(path)
		}
		path = filepath.Join(dir, strconv.Itoa(files))
		files++
		w, closeFn = open(path)
		written = 0
		b.StartTimer()
	}
	next()
	cpu0 := cpuTime(b)
	for b.Loop() {
		if written >= 256<<20 {
			next()
		}
		w.Write(p)
		written += int64(len(p))
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
	if err := closeFn(); err != nil {
		b.Fatal(err)
	}
}

// cpuTime is this process's user+sys time so far, in nanoseconds.
func cpuTime(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func openCapture(b *testing.B, mode capture.Mode, opts capture.Options) func(string) (io.Writer, func() error) {
	return func(path string) (io.Writer, func() error) {
		l, err := capture.Create(path, mode, opts)
		if err != nil {
			b.Fatal(err)
		}
		return l.Stdout(), func() error {
			if err := l.Close(); err != nil {
				return err
			}
			return l.Status().Err
		}
	}
}

// BenchmarkRawFile is the baseline, what `cmd > file` does: write(2) of
// each chunk to the file.
func BenchmarkRawFile(b *testing.B) {
	benchLog(b, func(path string) (io.Writer, func() error) {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		return f, f.Close
	})
}

func BenchmarkCaptureCombined(b *testing.B) {
	benchLog(b, openCapture(b, capture.Combined, capture.Options{}))
}

func BenchmarkCaptureFramed(b *testing.B) {
	benchLog(b, openCapture(b, capture.Framed, capture.Options{}))
}

func BenchmarkCaptureCombinedSecrets(b *testing.B) {
	benchLog(b, openCapture(b, capture.Combined, capture.Options{Secrets: bs("hunter2", "ghp_16C7e42F292c6912E7710c838347Ae178B4a")}))
}
