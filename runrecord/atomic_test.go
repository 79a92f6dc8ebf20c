package runrecord_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agent-box/agent-box/runrecord"
)

// Failure injection into the atomic write, step by step (the seams are in
// export_test.go). A returned error must leave the old record or the new
// one, whole, and no temp file; TestCrashConsistency does the same with
// real kills.

// fault makes one step of the atomic write fail once, with an error
// wrapping errno; later calls of the step are real, so a retry shows that
// the failure left nothing in its way.
type fault struct {
	name   string
	errno  syscall.Errno
	faults func(t *testing.T, fail func() error) runrecord.Faults
}

// faultCase is a fault and where it leaves the write.
type faultCase struct {
	fault
	landed bool // the rename was done: the new record or run is in place
}

// once returns err on its first call and nil after.
func once(err error) func() error {
	done := false
	return func() error {
		if done {
			return nil
		}
		done = true
		return err
	}
}

// tempFaults fail the steps on the temp file, all before the rename.
var tempFaults = []fault{
	{"write", syscall.EIO, func(t *testing.T, fail func() error) runrecord.Faults {
		return runrecord.Faults{Write: func(f *os.File, b []byte) (int, error) {
			if err := fail(); err != nil {
				return 0, err
			}
			return f.Write(b)
		}}
	}},
	{"short write", syscall.ENOSPC, func(t *testing.T, fail func() error) runrecord.Faults {
		// What a full disk does midway: part of the record is in the
		// temp file, and Write says how much and why it stopped.
		return runrecord.Faults{Write: func(f *os.File, b []byte) (int, error) {
			if err := fail(); err != nil {
				n, werr := f.Write(b[:len(b)/2])
				if werr != nil || n == 0 {
					t.Errorf("writing half the record: %d, %v", n, werr)
				}
				return n, err
			}
			return f.Write(b)
		}}
	}},
	{"fsync", syscall.EIO, func(t *testing.T, fail func() error) runrecord.Faults {
		return runrecord.Faults{Sync: func(f *os.File) error {
			if err := fail(); err != nil {
				return err
			}
			return f.Sync()
		}}
	}},
	{"close", syscall.EIO, func(t *testing.T, fail func() error) runrecord.Faults {
		// Close really closes, as close(2) does even when it fails.
		return runrecord.Faults{Close: func(f *os.File) error {
			cerr := f.Close()
			if err := fail(); err != nil {
				return err
			}
			return cerr
		}}
	}},
	{"rename", syscall.EIO, func(t *testing.T, fail func() error) runrecord.Faults {
		return runrecord.Faults{Rename: func(oldpath, newpath string) error {
			if err := fail(); err != nil {
				return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
			}
			return os.Rename(oldpath, newpath)
		}}
	}},
}

// failSyncDir fails the first fsync of a directory that match accepts.
func failSyncDir(match func(dir string) bool) func(t *testing.T, fail func() error) runrecord.Faults {
	return func(t *testing.T, fail func() error) runrecord.Faults {
		return runrecord.Faults{SyncDir: func(dir string) error {
			if match(dir) {
				if err := fail(); err != nil {
					return fmt.Errorf("sync directory %s: %w", dir, err)
				}
			}
			return runrecord.FsyncDir(dir)
		}}
	}
}

// injected is a distinct error per case, so that errors.Is tells the
// injected failure from any other.
func (f fault) injected() error {
	return fmt.Errorf("injected failure of the %s: %w", f.name, f.errno)
}

func TestWriteFailureInjection(t *testing.T) {
	var cases []faultCase
	for _, f := range tempFaults {
		cases = append(cases, faultCase{f, false})
	}
	cases = append(cases, faultCase{fault{"directory fsync after the rename", syscall.EIO,
		failSyncDir(func(string) bool { return true })}, true})

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			old := create(t, s, "web")
			dir := s.RunDir(old.Name, old.RunID)
			oldData := readFile(t, filepath.Join(dir, "record.json"))
			changed := *old
			changed.LogBytes = 999
			// Big enough that half of it is many pages: a torn record
			// could not pass for either version.
			changed.Command = strings.Repeat("y", 64<<10)
			newData, err := runrecord.Encode(&changed)
			if err != nil {
				t.Fatal(err)
			}

			inj := tc.injected()
			runrecord.SetFaults(t, tc.faults(t, once(inj)))
			err = s.Write(&changed)
			if !errors.Is(err, inj) {
				t.Fatalf("Write = %v, want the injected error", err)
			}
			if got := errors.Is(err, runrecord.ErrNotDurable); got != tc.landed {
				t.Errorf("errors.Is(%v, ErrNotDurable) = %v, want %v", err, got, tc.landed)
			}
			want, wantData, say := old, oldData, "record.json unchanged"
			if tc.landed {
				want, wantData, say = &changed, newData, "readers see the new record.json, but a crash may bring back the old one"
			}
			if !strings.Contains(err.Error(), say) {
				t.Errorf("Write = %q, want it to say %q", err, say)
			}
			checkRun(t, s, want, wantData)

			// The failure left nothing in the way: the same Write again
			// (all steps real now) puts the new record in place.
			if err := s.Write(&changed); err != nil {
				t.Fatalf("Write after the failure: %v", err)
			}
			checkRun(t, s, &changed, newData)
		})
	}
}

func TestCreateFailureInjection(t *testing.T) {
	var cases []faultCase
	for _, f := range tempFaults {
		cases = append(cases, faultCase{f, false})
	}
	cases = append(cases,
		faultCase{fault{"fsync of the hidden run dir", syscall.EIO, failSyncDir(func(dir string) bool {
			return strings.HasPrefix(filepath.Base(dir), ".new-")
		})}, false},
		faultCase{fault{"fsync of the name dir after the rename", syscall.EIO, failSyncDir(func(dir string) bool {
			return filepath.Base(dir) == "fresh"
		})}, true},
		faultCase{fault{"fsync of runs/ after the rename", syscall.EIO, failSyncDir(func(dir string) bool {
			return filepath.Base(dir) == "runs"
		})}, true},
	)

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			r := sample("fresh", clock.Add(time.Hour))
			data, err := runrecord.Encode(r)
			if err != nil {
				t.Fatal(err)
			}
			inj := tc.injected()
			runrecord.SetFaults(t, tc.faults(t, once(inj)))
			err = s.Create(r)
			if !errors.Is(err, inj) {
				t.Fatalf("Create = %v, want the injected error", err)
			}
			if got := errors.Is(err, runrecord.ErrNotDurable); got != tc.landed {
				t.Errorf("errors.Is(%v, ErrNotDurable) = %v, want %v", err, got, tc.landed)
			}
			if tc.landed {
				if say := "the run is listed, but a crash may lose it"; !strings.Contains(err.Error(), say) {
					t.Errorf("Create = %q, want it to say %q", err, say)
				}
				checkRun(t, s, r, data)
				// Create again is refused, the run being there; Write
				// of the same record is the safe retry.
				if err := s.Create(r); !errors.Is(err, fs.ErrExist) {
					t.Errorf("Create again = %v, want fs.ErrExist", err)
				}
				if err := s.Write(r); err != nil {
					t.Errorf("Write after ErrNotDurable: %v", err)
				}
				checkRun(t, s, r, data)
				return
			}

			if _, err := os.Lstat(s.RunDir(r.Name, r.RunID)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("failed Create left its run dir: %v", err)
			}
			if _, err := runIDs(s, r.Name); !errors.Is(err, runrecord.ErrNotFound) {
				t.Errorf("Index after a failed Create = %v, want ErrNotFound", err)
			}
			if ents, err := os.ReadDir(filepath.Join(s.Root, "runs", r.Name)); err != nil || len(ents) != 0 {
				t.Errorf("name dir after a failed Create: %v, %v; want it empty", names(ents), err)
			}
			if all, err := s.List("", nil); err != nil || len(all) != 0 {
				t.Errorf("List after a failed Create = %+v, %v; want nothing", all, err)
			}
			// Nothing left in the way: the same Create again succeeds.
			if err := s.Create(r); err != nil {
				t.Fatalf("Create after the failure: %v", err)
			}
			checkRun(t, s, r, data)
		})
	}
}

// TestLeftoverTempFiles plants what a kill at each point of a write or a
// create leaves (the cleanup of a failed write does not run in a killed
// process) and checks that readers and listers see through it.
func TestLeftoverTempFiles(t *testing.T) {
	s := newStore(t)
	r := create(t, s, "web")
	dir := s.RunDir(r.Name, r.RunID)
	data := readFile(t, filepath.Join(dir, "record.json"))

	var temp string
	runrecord.SetFaults(t, runrecord.Faults{Write: func(f *os.File, b []byte) (int, error) {
		temp = f.Name()
		return f.Write(b)
	}})
	changed := *r
	changed.LogBytes = 999
	newData, err := runrecord.Encode(&changed)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write(r); err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(temp) != dir || !strings.HasPrefix(filepath.Base(temp), ".record.json") {
		t.Errorf("temp file %s is not a dot file next to the record", temp)
	}

	// In the run dir: a temp file killed mid-write, and one killed between
	// its fsync and the rename (whole, and newer than the record).
	plant(t, temp, newData[:len(newData)/2])
	plant(t, temp+"1", newData)
	// In the name dir: hidden run dirs of Creates killed mid-write and
	// between the hidden dir's fsync and its rename.
	half := sample("web", clock.Add(time.Hour))
	whole := sample("web", clock.Add(2*time.Hour))
	halfData, err := runrecord.Encode(half)
	if err != nil {
		t.Fatal(err)
	}
	wholeData, err := runrecord.Encode(whole)
	if err != nil {
		t.Fatal(err)
	}
	nameDir := filepath.Dir(dir)
	plant(t, filepath.Join(nameDir, ".new-"+half.RunID, ".record.json42"), halfData[:len(halfData)/2])
	plant(t, filepath.Join(nameDir, ".new-"+whole.RunID, "record.json"), wholeData)

	got, err := s.Read(r.Name, r.RunID)
	if err != nil || !bytes.Equal(readFile(t, filepath.Join(dir, "record.json")), data) || got.LogBytes != r.LogBytes {
		t.Errorf("Read with leftover temp files: %+v, %v; want the old record", got, err)
	}
	all, err := s.List("", nil)
	if err != nil || len(all) != 1 || all[0].RunID != r.RunID || all[0].Err != nil || all[0].Record.LogBytes != r.LogBytes {
		t.Errorf("List with leftover temp files = %+v, %v; want the one run", all, err)
	}
	if ids, err := runIDs(s, "web"); err != nil || !slices.Equal(ids, []string{r.RunID}) {
		t.Errorf("Index with leftover temp files = %v, %v", ids, err)
	}
	if e, err := s.Latest("web"); err != nil || e.RunID != r.RunID || e.Err != nil {
		t.Errorf("Latest with leftover temp files = %+v, %v; want %s", e, err, r.RunID)
	}
	// A write still replaces the record, leftovers or not.
	if err := s.Write(&changed); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Read(r.Name, r.RunID); err != nil || got.LogBytes != changed.LogBytes {
		t.Errorf("Read after a Write past leftovers: %+v, %v", got, err)
	}
}

// checkRun checks that the run of want holds exactly wantData as its record
// and nothing else (no temp file), and that Read and List decode it.
func checkRun(t *testing.T, s *runrecord.Store, want *runrecord.Record, wantData []byte) {
	t.Helper()
	dir := s.RunDir(want.Name, want.RunID)
	if got := readFile(t, filepath.Join(dir, "record.json")); !bytes.Equal(got, wantData) {
		t.Errorf("record.json is %d bytes, not exactly the %d of the expected record", len(got), len(wantData))
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 1 || ents[0].Name() != "record.json" {
		t.Errorf("run dir holds %v, %v; want only record.json", names(ents), err)
	}
	got, err := s.Read(want.Name, want.RunID)
	if err != nil || got.LogBytes != want.LogBytes || got.Command != want.Command {
		t.Errorf("Read = %+v, %v; want LogBytes %d", got, err, want.LogBytes)
	}
	all, err := s.List(want.Name, nil)
	if err != nil || len(all) != 1 || all[0].Err != nil || all[0].Record.LogBytes != want.LogBytes {
		t.Errorf("List = %+v, %v; want the one run", all, err)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func plant(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func names(ents []fs.DirEntry) []string {
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// WriteVisible puts the new record where readers see it without the fsync
// of the run dir, which is left to its durable; the supervisor reports a
// child's pid in between.
func TestWriteVisibleDefersTheDirectoryFsync(t *testing.T) {
	s := newStore(t)
	old := create(t, s, "web")
	dir := s.RunDir(old.Name, old.RunID)
	var synced []string
	runrecord.SetFaults(t, runrecord.Faults{SyncDir: func(d string) error {
		synced = append(synced, d)
		return runrecord.FsyncDir(d)
	}})
	changed := *old
	changed.PID = 4242
	durable, err := s.WriteVisible(&changed)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Read(old.Name, old.RunID)
	if err != nil || got.PID != 4242 {
		t.Fatalf("Read before durable = %+v, %v; want the new record", got, err)
	}
	if len(synced) != 0 {
		t.Fatalf("WriteVisible fsynced %v; that is durable's job", synced)
	}
	if err := durable(); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(synced, dir) {
		t.Fatalf("durable fsynced %v, not the run dir %s", synced, dir)
	}
}
