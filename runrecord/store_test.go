package runrecord_test

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/runrecord"
)

func perm(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestOpenCreatesPrivateDirs(t *testing.T) {
	root := filepath.Join(t.TempDir(), "a", "state")
	s, warn, err := runrecord.Open(root)
	if err != nil || warn != "" {
		t.Fatalf("Open = %v, %q", err, warn)
	}
	if s.Root != root {
		t.Errorf("Root = %q, want %q", s.Root, root)
	}
	for _, dir := range []string{root, filepath.Join(root, "runs")} {
		if got := perm(t, dir); got != 0o700 {
			t.Errorf("%s: mode %v, want 0700", dir, got)
		}
	}
	if _, warn, err := runrecord.Open(root); err != nil || warn != "" {
		t.Errorf("second Open = %v, %q", err, warn)
	}
}

func TestOpenTightensPermissions(t *testing.T) {
	root := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(filepath.Join(root, "runs"), 0o700); err != nil {
		t.Fatal(err)
	}
	// Chmod, not Mkdir's mode, which the umask would cut.
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, "runs"), 0o770); err != nil {
		t.Fatal(err)
	}
	_, warn, err := runrecord.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(warn, root+" had mode 0755") || !strings.Contains(warn, "runs had mode 0770") || !strings.Contains(warn, "tightened to 0700") {
		t.Errorf("warning %q does not say what was tightened", warn)
	}
	for _, dir := range []string{root, filepath.Join(root, "runs")} {
		if got := perm(t, dir); got != 0o700 {
			t.Errorf("%s: mode %v after Open, want 0700", dir, got)
		}
	}
	if _, warn, _ := runrecord.Open(root); warn != "" {
		t.Errorf("Open after tightening still warns: %q", warn)
	}
}

func TestOpenRefuses(t *testing.T) {
	tmp := t.TempDir()
	real := filepath.Join(tmp, "real")
	if err := os.Mkdir(real, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(tmp, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(tmp, "dangling")
	if err := os.Symlink(filepath.Join(tmp, "nowhere"), dangling); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(tmp, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	runsLink := filepath.Join(tmp, "runslink")
	if err := os.Mkdir(runsLink, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(runsLink, "runs")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, root string
		want       error
		say        string
	}{
		{"symlink", link, runrecord.ErrSymlink, "is a symlink"},
		{"dangling symlink", dangling, runrecord.ErrSymlink, "is a symlink"},
		{"runs is a symlink", runsLink, runrecord.ErrSymlink, "runs is a symlink"},
		{"file", file, nil, "not a directory"},
		{"empty", "", nil, "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _, err := runrecord.Open(tt.root)
			if err == nil || s != nil {
				t.Fatalf("Open(%s) = %v, %v; want an error", tt.root, s, err)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("error %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.say) {
				t.Errorf("error %q does not say %q", err, tt.say)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(real, "runs")); err == nil {
		t.Error("Open followed the symlink and created runs/ in its target")
	}
}

func TestOpenRefusesOtherOwner(t *testing.T) {
	root := filepath.Join(t.TempDir(), "state")
	if os.Geteuid() == 0 {
		if err := os.Mkdir(root, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(root, 4242, 4242); err != nil {
			t.Fatal(err)
		}
	} else {
		root = "/" // owned by root, not by us
	}
	_, _, err := runrecord.Open(root)
	if err == nil || !strings.Contains(err.Error(), "owned by uid") {
		t.Errorf("Open(%s owned by another uid) = %v, want a refusal", root, err)
	}
}

func TestCreateWriteRead(t *testing.T) {
	s := newStore(t)
	r := create(t, s, "web")

	dir := s.RunDir(r.Name, r.RunID)
	if want := filepath.Join(s.Root, "runs", "web", r.RunID); dir != want {
		t.Errorf("RunDir = %q, want %q", dir, want)
	}
	if want := filepath.Join(dir, "log"); s.LogPath(r.Name, r.RunID) != want {
		t.Errorf("LogPath = %q, want %q", s.LogPath(r.Name, r.RunID), want)
	}
	for path, want := range map[string]fs.FileMode{
		filepath.Join(s.Root, "runs", "web"): 0o700,
		dir:                                  0o700,
		filepath.Join(dir, "record.json"):    0o600,
	} {
		if got := perm(t, path); got != want {
			t.Errorf("%s: mode %v, want %v", path, got, want)
		}
	}

	got, err := s.Read(r.Name, r.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Errorf("Read after Create:\n got %+v\nwant %+v", got, r)
	}

	if err := s.Create(r); !errors.Is(err, fs.ErrExist) {
		t.Errorf("second Create = %v, want fs.ErrExist", err)
	}

	code := 0
	r.Exit = &runrecord.Exit{Code: &code, At: r.StartedAt.Add(time.Minute)}
	r.OutputClosed = true
	if err := s.Write(r); err != nil {
		t.Fatal(err)
	}
	got, err = s.Read(r.Name, r.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Exit == nil || *got.Exit.Code != 0 || !got.OutputClosed {
		t.Errorf("Read after Write: exit %+v, output closed %v", got.Exit, got.OutputClosed)
	}
	if got := perm(t, filepath.Join(dir, "record.json")); got != 0o600 {
		t.Errorf("record mode after rewrite: %v, want 0600", got)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("run dir holds %d entries after writes, want only record.json", len(ents))
	}
}

func TestWriteNeedsCreate(t *testing.T) {
	s := newStore(t)
	r := sample("never", clock)
	if err := s.Write(r); !errors.Is(err, runrecord.ErrNotFound) {
		t.Errorf("Write before Create = %v, want ErrNotFound", err)
	}
}

func TestReadNotFound(t *testing.T) {
	s := newStore(t)
	r := create(t, s, "web")
	other := runrecord.NewRunID(clock.Add(time.Hour))
	for _, tt := range []struct{ name, runID string }{
		{"nosuchname", r.RunID},
		{"web", other},
	} {
		_, err := s.Read(tt.name, tt.runID)
		if !errors.Is(err, runrecord.ErrNotFound) {
			t.Errorf("Read(%s, %s) = %v, want ErrNotFound", tt.name, tt.runID, err)
			continue
		}
		if !strings.Contains(err.Error(), tt.name+"/"+tt.runID) {
			t.Errorf("error %q does not name the run", err)
		}
	}
	// A run dir without a record (a crash between mkdir and write).
	if err := os.Mkdir(s.RunDir("web", other), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read("web", other); !errors.Is(err, runrecord.ErrNotFound) {
		t.Errorf("Read of an empty run dir = %v, want ErrNotFound", err)
	}
}

func TestReadRefusesNonRecords(t *testing.T) {
	s := newStore(t)
	big := create(t, s, "big")
	if err := os.WriteFile(filepath.Join(s.RunDir(big.Name, big.RunID), "record.json"), make([]byte, runrecord.MaxRecordBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(big.Name, big.RunID); !errors.Is(err, runrecord.ErrCorrupt) || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("Read of an oversized record = %v, want ErrCorrupt", err)
	}

	// A FIFO must neither hang the reader nor pass for a record.
	fifo := create(t, s, "fifo")
	path := filepath.Join(s.RunDir(fifo.Name, fifo.RunID), "record.json")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(fifo.Name, fifo.RunID); !errors.Is(err, runrecord.ErrCorrupt) {
		t.Errorf("Read of a FIFO = %v, want ErrCorrupt", err)
	}

	dir := create(t, s, "dir")
	path = filepath.Join(s.RunDir(dir.Name, dir.RunID), "record.json")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(dir.Name, dir.RunID); err == nil {
		t.Error("Read of a directory named record.json: no error")
	}
}

func TestInvalidArguments(t *testing.T) {
	s := newStore(t)
	good := create(t, s, "ok")
	outside := filepath.Dir(s.Root)
	for _, name := range []string{"", "../x", "..", ".lock", "a/b", "x\x00"} {
		r := sample("ok", clock)
		r.Name = name
		calls := map[string]error{
			"Create": s.Create(r),
			"Write":  s.Write(r),
			"Remove": s.Remove(name, good.RunID),
		}
		_, calls["Read"] = s.Read(name, good.RunID)
		_, calls["Latest"] = s.Latest(name)
		_, calls["LockName"] = s.LockName(name, 0)
		if name != "" { // List("") and Index("") list everything
			_, calls["List"] = s.List(name, nil)
			_, calls["Index"] = s.Index(name)
		}
		for call, err := range calls {
			if !errors.Is(err, runrecord.ErrInvalidName) {
				t.Errorf("%s(%q) = %v, want ErrInvalidName", call, name, err)
			}
		}
	}
	for _, id := range []string{"", "..", "../../x", "latest", good.RunID + "/.."} {
		r := sample("ok", clock)
		r.RunID = id
		calls := map[string]error{
			"Create": s.Create(r),
			"Write":  s.Write(r),
			"Remove": s.Remove("ok", id),
		}
		_, calls["Read"] = s.Read("ok", id)
		for call, err := range calls {
			if !errors.Is(err, runrecord.ErrInvalidRunID) {
				t.Errorf("%s(run id %q) = %v, want ErrInvalidRunID", call, id, err)
			}
		}
	}
	ents, err := os.ReadDir(outside)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 {
		t.Errorf("something was written next to the state dir: %v", ents)
	}
	if _, err := s.Read(good.Name, good.RunID); err != nil {
		t.Errorf("the good run was harmed: %v", err)
	}
}

// TestSymlinks plants a symlink at each level the store descends through
// and checks that nothing follows it.
func TestSymlinks(t *testing.T) {
	s := newStore(t)
	elsewhere := filepath.Join(filepath.Dir(s.Root), "elsewhere")
	if err := os.Mkdir(elsewhere, 0o700); err != nil {
		t.Fatal(err)
	}
	target := create(t, s, "target")
	// elsewhere/<runid>/record.json holds a valid record: following a
	// symlink would succeed, so only a refusal passes.
	if err := os.CopyFS(filepath.Join(elsewhere, target.RunID), os.DirFS(s.RunDir(target.Name, target.RunID))); err != nil {
		t.Fatal(err)
	}
	elsewhereRecord := filepath.Join(elsewhere, target.RunID, "record.json")
	before, err := os.ReadFile(elsewhereRecord)
	if err != nil {
		t.Fatal(err)
	}

	// runs/linkedname -> elsewhere
	if err := os.Symlink(elsewhere, filepath.Join(s.Root, "runs", "linkedname")); err != nil {
		t.Fatal(err)
	}
	// runs/linkedrun/<runid> -> elsewhere/<runid>
	lr := create(t, s, "linkedrun")
	if err := os.RemoveAll(s.RunDir(lr.Name, lr.RunID)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(elsewhere, target.RunID), s.RunDir(lr.Name, lr.RunID)); err != nil {
		t.Fatal(err)
	}
	// runs/linkedrecord/<runid>/record.json -> elsewhere/<runid>/record.json
	lrec := create(t, s, "linkedrecord")
	recPath := filepath.Join(s.RunDir(lrec.Name, lrec.RunID), "record.json")
	if err := os.Remove(recPath); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhereRecord, recPath); err != nil {
		t.Fatal(err)
	}
	// runs/linkedlock/.lock -> elsewhere/lock
	if err := os.Mkdir(filepath.Join(s.Root, "runs", "linkedlock"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(elsewhere, "lock"), filepath.Join(s.Root, "runs", "linkedlock", ".lock")); err != nil {
		t.Fatal(err)
	}

	expectSymlink := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, runrecord.ErrSymlink) {
			t.Errorf("%s = %v, want ErrSymlink", what, err)
		}
	}
	_, err = s.Read("linkedname", target.RunID)
	expectSymlink("Read through a symlinked name dir", err)
	_, err = s.Read(lr.Name, lr.RunID)
	expectSymlink("Read through a symlinked run dir", err)
	_, err = s.Read(lrec.Name, lrec.RunID)
	expectSymlink("Read of a symlinked record", err)
	_, err = runIDs(s, "linkedname")
	expectSymlink("Index of a symlinked name dir", err)
	_, err = s.List("linkedname", nil)
	expectSymlink("List of a symlinked name dir", err)
	_, err = s.LockName("linkedname", 0)
	expectSymlink("LockName in a symlinked name dir", err)
	_, err = s.LockName("linkedlock", 0)
	expectSymlink("LockName of a symlinked lock file", err)

	w := *target
	w.Name = "linkedname"
	expectSymlink("Write through a symlinked name dir", s.Write(&w))
	expectSymlink("Create in a symlinked name dir", s.Create(&w))
	w = *lr
	expectSymlink("Write through a symlinked run dir", s.Write(&w))
	expectSymlink("Remove in a symlinked name dir", s.Remove("linkedname", target.RunID))

	// Writing where record.json is a symlink replaces the link itself.
	w = *lrec
	w.LogBytes = 4242
	if err := s.Write(&w); err != nil {
		t.Errorf("Write over a symlinked record: %v", err)
	}
	if fi, err := os.Lstat(recPath); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("record.json after Write: %v, %v; want a regular file", fi, err)
	}

	// List reports each planted link instead of following or dropping it.
	if err := os.Remove(recPath); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhereRecord, recPath); err != nil {
		t.Fatal(err)
	}
	all, err := s.List("", nil)
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	for _, e := range all {
		if e.Err != nil {
			if !errors.Is(e.Err, runrecord.ErrSymlink) {
				t.Errorf("entry %s/%s: %v, want ErrSymlink", e.Name, e.RunID, e.Err)
			}
			if e.Record != nil {
				t.Errorf("entry %s/%s has both a record and an error", e.Name, e.RunID)
			}
			bad = append(bad, e.Name)
		}
	}
	if want := []string{"linkedname", "linkedrecord", "linkedrun"}; !slices.Equal(bad, want) {
		t.Errorf("entries with errors: %v, want %v", bad, want)
	}
	idx, err := s.Index("")
	if err != nil {
		t.Fatal(err)
	}
	var listed, unlistable []string
	for _, nr := range idx {
		if nr.Err != nil {
			expectSymlink("Index entry "+nr.Name, nr.Err)
			unlistable = append(unlistable, nr.Name)
			continue
		}
		listed = append(listed, nr.Name)
	}
	// linkedlock holds no run, only its planted lock.
	if want := []string{"linkedrecord", "linkedrun", "target"}; !slices.Equal(listed, want) {
		t.Errorf("Index names = %v, want %v", listed, want)
	}
	if want := []string{"linkedname"}; !slices.Equal(unlistable, want) {
		t.Errorf("Index names that cannot be listed = %v, want %v", unlistable, want)
	}

	// Tidy leaves planted links and their targets alone (checked below).
	s.Tidy("", func(*runrecord.Record) bool { return false })
	if fi, err := os.Lstat(filepath.Join(s.Root, "runs", "linkedname")); err != nil || fi.Mode().Type() != fs.ModeSymlink {
		t.Errorf("runs/linkedname after Tidy: %v, %v; want the link", fi, err)
	}

	// Remove of a symlinked run dir unlinks the link, not its target.
	if err := s.Remove(lr.Name, lr.RunID); err != nil {
		t.Errorf("Remove of a symlinked run dir: %v", err)
	}
	after, err := os.ReadFile(elsewhereRecord)
	if err != nil || string(after) != string(before) {
		t.Errorf("the record outside the store changed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(elsewhere, "lock")); err == nil {
		t.Error("LockName created a lock file through a symlink")
	}
}

func TestListIndexLatest(t *testing.T) {
	s := newStore(t)
	if all, err := s.List("", nil); err != nil || len(all) != 0 {
		t.Errorf("List of an empty store = %v, %v", all, err)
	}
	if idx, err := s.Index(""); err != nil || len(idx) != 0 {
		t.Errorf("Index of an empty store = %v, %v", idx, err)
	}

	web1 := create(t, s, "web")
	db := create(t, s, "db")
	web2 := create(t, s, "web")
	web3 := create(t, s, "web")
	corrupt := create(t, s, "web")
	if err := os.WriteFile(filepath.Join(s.RunDir("web", corrupt.RunID), "record.json"), []byte(`{"version": 1, "name": "web"`), 0o600); err != nil {
		t.Fatal(err)
	}
	future := create(t, s, "db")
	if err := os.WriteFile(filepath.Join(s.RunDir("db", future.RunID), "record.json"), []byte(`{"version": 7}`), 0o600); err != nil {
		t.Fatal(err)
	}
	unlock, err := s.LockName("lockonly", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	unlock()

	// Debris that must be ignored, not listed: temp files of a crashed
	// write, the lock, stray files, invalid names.
	junk := map[string]string{
		"runs/.hidden/x":                             "",
		"runs/-dash/x":                               "",
		"runs/web/.lock":                             "",
		"runs/web/notes.txt":                         "",
		"runs/web/.record.json123456":                "{",
		"runs/web/" + web1.RunID + "/.record.json42": "{",
		"runs/web/" + web1.RunID + "/log":            "hello\n",
		"runs/README":                                "",
	}
	for path, content := range junk {
		full := filepath.Join(s.Root, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A regular file named like a run: listed as unreadable.
	fileRun := runrecord.NewRunID(clock.Add(time.Hour))
	if err := os.WriteFile(filepath.Join(s.Root, "runs", "db", fileRun), nil, 0o600); err != nil {
		t.Fatal(err)
	}

	all, err := s.List("", nil)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		name, runID string
		err         error
	}
	want := []row{
		{"db", db.RunID, nil},
		{"db", future.RunID, runrecord.ErrUnsupportedVersion},
		{"db", fileRun, errors.New("not a directory")},
		{"web", web1.RunID, nil},
		{"web", web2.RunID, nil},
		{"web", web3.RunID, nil},
		{"web", corrupt.RunID, runrecord.ErrCorrupt},
	}
	if len(all) != len(want) {
		t.Fatalf("List = %d entries, want %d: %+v", len(all), len(want), all)
	}
	for i, e := range all {
		w := want[i]
		if e.Name != w.name || e.RunID != w.runID {
			t.Errorf("entry %d = %s/%s, want %s/%s", i, e.Name, e.RunID, w.name, w.runID)
		}
		switch {
		case w.err == nil && (e.Err != nil || e.Record == nil || e.Record.RunID != e.RunID):
			t.Errorf("entry %d: record %v, err %v; want a record", i, e.Record, e.Err)
		case w.err != nil && (e.Err == nil || e.Record != nil):
			t.Errorf("entry %d: record %v, err %v; want error %v", i, e.Record, e.Err, w.err)
		case w.err != nil && !errors.Is(e.Err, w.err) && !strings.Contains(e.Err.Error(), w.err.Error()):
			t.Errorf("entry %d: err %v, want %v", i, e.Err, w.err)
		}
	}

	web, err := s.List("web", nil)
	if err != nil || len(web) != 4 {
		t.Errorf("List(web) = %d entries, %v", len(web), err)
	}
	if _, err := s.List("nosuch", nil); !errors.Is(err, runrecord.ErrNotFound) {
		t.Errorf("List(nosuch) = %v, want ErrNotFound", err)
	}
	if _, err := s.List("lockonly", nil); !errors.Is(err, runrecord.ErrNotFound) {
		t.Errorf("List(lockonly) = %v, want ErrNotFound", err)
	}

	// The ids from the listings alone: the file named like a run is
	// one, the lock-only name has none and is left out.
	idx, err := s.Index("")
	if err != nil {
		t.Fatal(err)
	}
	wantIdx := []runrecord.NameRuns{
		{Name: "db", IDs: []string{db.RunID, future.RunID, fileRun}},
		{Name: "web", IDs: []string{web1.RunID, web2.RunID, web3.RunID, corrupt.RunID}},
	}
	if !reflect.DeepEqual(idx, wantIdx) {
		t.Errorf("Index = %+v, want %+v", idx, wantIdx)
	}
	ids, err := runIDs(s, "web")
	if err != nil || !slices.Equal(ids, wantIdx[1].IDs) {
		t.Errorf("Index(web) = %v, %v; want %v", ids, err, wantIdx[1].IDs)
	}
	for _, name := range []string{"nosuch", "lockonly"} {
		if _, err := s.Index(name); !errors.Is(err, runrecord.ErrNotFound) {
			t.Errorf("Index(%s) = %v, want ErrNotFound", name, err)
		}
		if _, err := s.Latest(name); !errors.Is(err, runrecord.ErrNotFound) {
			t.Errorf("Latest(%s) = %v, want ErrNotFound", name, err)
		}
	}

	// The newest web run is corrupt: Latest says so in the entry, with its
	// run id, as List does.
	e, err := s.Latest("web")
	if err != nil || e.RunID != corrupt.RunID || e.Record != nil || !errors.Is(e.Err, runrecord.ErrCorrupt) {
		t.Errorf("Latest(web) = %+v, %v; want the corrupt run's entry", e, err)
	}
	if err := s.Remove("web", corrupt.RunID); err != nil {
		t.Fatal(err)
	}
	e, err = s.Latest("web")
	if err != nil || e.RunID != web3.RunID || e.Record == nil || e.Record.RunID != web3.RunID {
		t.Errorf("Latest(web) after removal = %+v, %v; want %s", e, err, web3.RunID)
	}
}

// TestListMany goes through the parallel path and checks it keeps the order
// and every record (run under -race in CI).
func TestListMany(t *testing.T) {
	s := newStore(t)
	n := 300
	if testing.Short() {
		n = 100
	}
	want := make([]string, n)
	for i := range n {
		r := create(t, s, "many")
		want[i] = r.RunID
	}
	bad := want[n/2]
	if err := os.WriteFile(filepath.Join(s.RunDir("many", bad), "record.json"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := s.List("many", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("List = %d entries, want %d", len(got), n)
	}
	for i, e := range got {
		if e.RunID != want[i] {
			t.Fatalf("entry %d = %s, want %s", i, e.RunID, want[i])
		}
		if e.RunID == bad {
			if !errors.Is(e.Err, runrecord.ErrCorrupt) {
				t.Errorf("corrupt entry: %v", e.Err)
			}
			continue
		}
		if e.Err != nil || e.Record == nil || e.Record.RunID != e.RunID {
			t.Errorf("entry %d: %+v", i, e)
		}
	}
}

func TestRecordInTheWrongPlace(t *testing.T) {
	s := newStore(t)
	a := create(t, s, "a")
	a2 := create(t, s, "a")
	b := create(t, s, "b")
	// b's record copied into both run dirs of a: one of another name, one
	// of another run id of the same name.
	data, err := os.ReadFile(filepath.Join(s.RunDir(b.Name, b.RunID), "record.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*runrecord.Record{a, a2} {
		if err := os.WriteFile(filepath.Join(s.RunDir(r.Name, r.RunID), "record.json"), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	b2 := create(t, s, "b")
	if err := os.WriteFile(filepath.Join(s.RunDir(b2.Name, b2.RunID), "record.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*runrecord.Record{a, a2, b2} {
		if _, err := s.Read(r.Name, r.RunID); !errors.Is(err, runrecord.ErrCorrupt) || !strings.Contains(err.Error(), "the record is of run b/"+b.RunID) {
			t.Errorf("Read of a misplaced record = %v, want ErrCorrupt naming its run", err)
		}
	}
	ents, err := s.List("", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if wantOK := e.RunID == b.RunID; wantOK != (e.Err == nil) || !wantOK && !errors.Is(e.Err, runrecord.ErrCorrupt) {
			t.Errorf("List entry %s/%s: %v", e.Name, e.RunID, e.Err)
		}
	}
	if len(ents) != 4 {
		t.Errorf("List = %d entries, want 4", len(ents))
	}
}

func TestRemove(t *testing.T) {
	s := newStore(t)
	r := create(t, s, "gone")
	keep := create(t, s, "gone")
	if err := os.WriteFile(s.LogPath(r.Name, r.RunID), []byte("log"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(r.Name, r.RunID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(s.RunDir(r.Name, r.RunID)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("run dir still there: %v", err)
	}
	if _, err := s.Read(r.Name, r.RunID); !errors.Is(err, runrecord.ErrNotFound) {
		t.Errorf("Read after Remove = %v, want ErrNotFound", err)
	}
	if err := s.Remove(r.Name, r.RunID); !errors.Is(err, runrecord.ErrNotFound) {
		t.Errorf("second Remove = %v, want ErrNotFound", err)
	}
	if err := s.Remove("nosuch", r.RunID); !errors.Is(err, runrecord.ErrNotFound) {
		t.Errorf("Remove of an unknown name = %v, want ErrNotFound", err)
	}
	if _, err := s.Read(keep.Name, keep.RunID); err != nil {
		t.Errorf("Remove harmed another run: %v", err)
	}
}

func TestLockNameExcludes(t *testing.T) {
	s := newStore(t)
	unlock, err := s.LockName("web", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := perm(t, filepath.Join(s.Root, "runs", "web", ".lock")); got != 0o600 {
		t.Errorf(".lock mode %v, want 0600", got)
	}
	// flock locks belong to the open file description, so a second
	// LockName in this process conflicts like another process would.
	if _, err := s.LockName("web", 20*time.Millisecond); !errors.Is(err, runrecord.ErrLocked) {
		t.Errorf("second LockName = %v, want ErrLocked", err)
	}
	other, err := s.LockName("db", 0)
	if err != nil {
		t.Fatalf("a lock on web blocks db: %v", err)
	}
	other()
	unlock()
	unlock() // idempotent
	again, err := s.LockName("web", 0)
	if err != nil {
		t.Fatalf("LockName after unlock = %v", err)
	}
	again()
}

// TestLockNameWaits checks that a waiting LockName gets the lock once the
// holder lets go within the timeout.
func TestLockNameWaits(t *testing.T) {
	s := newStore(t)
	unlock, err := s.LockName("web", 0)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		close(started)
		u, err := s.LockName("web", time.Minute)
		if err == nil {
			u()
		}
		got <- err
	}()
	<-started
	unlock()
	if err := <-got; err != nil {
		t.Errorf("waiting LockName = %v, want the lock", err)
	}
}

// TestLockNameAcrossProcesses: a lock held by another process excludes us,
// and the kernel releases it when that process is killed.
func TestLockNameAcrossProcesses(t *testing.T) {
	s := newStore(t)
	cmd := helper("lock", s.Root, "web")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "locked\n" {
		t.Fatalf("helper said %q, %v", line, err)
	}
	if _, err := s.LockName("web", 0); !errors.Is(err, runrecord.ErrLocked) {
		t.Errorf("LockName while another process holds it = %v, want ErrLocked", err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	unlock, err := s.LockName("web", 0)
	if err != nil {
		t.Fatalf("LockName after the holder died = %v", err)
	}
	unlock()
}

// CreateWith's ready is the last step before the run becomes visible: the
// record is written in the dir being built by then, and an error from it
// undoes the create as one of prepare's does.
func TestCreateWithReady(t *testing.T) {
	for _, fail := range []bool{false, true} {
		s := newStore(t)
		r := sample("ready", clock.Add(time.Hour))
		refused := errors.New("the supervisor did not take the run")
		var built string
		err := s.CreateWith(r, func(dir string) (func() error, error) {
			built = dir
			return func() error {
				if _, err := os.Lstat(filepath.Join(built, runrecord.RecordFile)); err != nil {
					t.Errorf("ready before the record was written: %v", err)
				}
				if _, err := os.Lstat(s.RunDir(r.Name, r.RunID)); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("ready after the run became visible: %v", err)
				}
				if fail {
					return refused
				}
				return nil
			}, nil
		})
		if !fail {
			if err != nil {
				t.Fatalf("CreateWith: %v", err)
			}
			if _, err := s.Read(r.Name, r.RunID); err != nil {
				t.Errorf("Read after CreateWith: %v", err)
			}
			continue
		}
		if !errors.Is(err, refused) {
			t.Fatalf("CreateWith = %v, want ready's error", err)
		}
		for _, dir := range []string{built, s.RunDir(r.Name, r.RunID)} {
			if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s after ready failed: %v", dir, err)
			}
		}
	}
}

// Newest passes over run ids from the future, unless they are all there
// is (a clock set back since they were made).
func TestNewestPassesOverTheFuture(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	past, at, future := runrecord.NewRunID(now.Add(-time.Hour)), runrecord.NewRunID(now), runrecord.NewRunID(now.Add(time.Nanosecond))
	far := "20991231T235959.000000000Z-aaaaaa"
	for _, tc := range []struct {
		ids  []string
		want string
	}{
		{[]string{past}, past},
		{[]string{past, at}, at},
		{[]string{past, future}, past},
		{[]string{past, at, future, far}, at},
		{[]string{future, far}, far},
	} {
		if got := runrecord.Newest(tc.ids, now); got != tc.want {
			t.Errorf("Newest(%v) = %s, want %s", tc.ids, got, tc.want)
		}
	}
}
