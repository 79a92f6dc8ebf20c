package runrecord_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agent-box/agent-box/runrecord"
)

// plantBrokenName makes runs/<name> a symlink to a dir holding a valid
// run: a name dir that cannot be listed (never followed).
func plantBrokenName(t *testing.T, s *runrecord.Store, name string) {
	t.Helper()
	elsewhere := t.TempDir()
	r := create(t, s, "elsewhere")
	if err := os.CopyFS(filepath.Join(elsewhere, r.RunID), os.DirFS(s.RunDir(r.Name, r.RunID))); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(r.Name, r.RunID); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(s.Root, "runs", name)); err != nil {
		t.Fatal(err)
	}
}

// List asks want about a name dir it cannot list, as (name, ""), and
// leaves it out when refused: before, it was listed whatever want said.
func TestListAsksAboutUnlistableNames(t *testing.T) {
	s := newStore(t)
	a := create(t, s, "a")
	plantBrokenName(t, s, "zz")

	var asked []string
	got, err := s.List("", func(name, runID string) bool {
		asked = append(asked, name+"/"+runID)
		return false
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("List refusing everything = %+v, want no entries", got)
	}
	if want := []string{"a/" + a.RunID, "zz/"}; !slices.Equal(asked, want) {
		t.Errorf("want was asked about %v, want %v", asked, want)
	}

	got, err = s.List("", func(name, runID string) bool { return runID == "" })
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "zz" || got[0].RunID != "" || got[0].Record != nil || !errors.Is(got[0].Err, runrecord.ErrSymlink) {
		t.Errorf("List accepting only names = %+v, want the zz entry wrapping ErrSymlink", got)
	}

	// With no want it is listed, once.
	all, err := s.List("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].RunID != a.RunID || all[1].Name != "zz" || !errors.Is(all[1].Err, runrecord.ErrSymlink) {
		t.Errorf("List = %+v, want a's run and the zz entry", all)
	}
	if _, err := s.List("zz", nil); !errors.Is(err, runrecord.ErrSymlink) {
		t.Errorf("List(zz) = %v, want ErrSymlink", err)
	}
}

func TestIndex(t *testing.T) {
	s := newStore(t)
	if idx, err := s.Index(""); err != nil || len(idx) != 0 {
		t.Errorf("Index of an empty store = %+v, %v", idx, err)
	}
	a1 := create(t, s, "a")
	b := create(t, s, "b")
	a2 := create(t, s, "a")
	plantBrokenName(t, s, "zz")
	unlock, err := s.LockName("lockonly", 0)
	if err != nil {
		t.Fatal(err)
	}
	unlock()
	if err := os.WriteFile(filepath.Join(s.Root, "runs", "stray"), nil, 0o600); err != nil {
		t.Fatal(err)
	}

	idx, err := s.Index("")
	if err != nil {
		t.Fatal(err)
	}
	if len(idx) != 3 {
		t.Fatalf("Index = %+v, want a, b and zz", idx)
	}
	if idx[0].Name != "a" || !slices.Equal(idx[0].IDs, []string{a1.RunID, a2.RunID}) || idx[0].Err != nil {
		t.Errorf("Index[0] = %+v, want a's two runs", idx[0])
	}
	if idx[1].Name != "b" || !slices.Equal(idx[1].IDs, []string{b.RunID}) || idx[1].Err != nil {
		t.Errorf("Index[1] = %+v, want b's run", idx[1])
	}
	if idx[2].Name != "zz" || idx[2].IDs != nil || !errors.Is(idx[2].Err, runrecord.ErrSymlink) {
		t.Errorf("Index[2] = %+v, want zz with ErrSymlink", idx[2])
	}

	one, err := s.Index("zz")
	if err != nil || len(one) != 1 || one[0].Name != "zz" || !errors.Is(one[0].Err, runrecord.ErrSymlink) {
		t.Errorf("Index(zz) = %+v, %v; want zz with ErrSymlink", one, err)
	}
	one, err = s.Index("a")
	if err != nil || len(one) != 1 || !slices.Equal(one[0].IDs, []string{a1.RunID, a2.RunID}) {
		t.Errorf("Index(a) = %+v, %v", one, err)
	}
	for _, n := range []string{"nosuch", "lockonly"} {
		if _, err := s.Index(n); !errors.Is(err, runrecord.ErrNotFound) {
			t.Errorf("Index(%s) = %v, want ErrNotFound", n, err)
		}
	}
	if _, err := s.Index("../x"); !errors.Is(err, runrecord.ErrInvalidName) {
		t.Errorf("Index(../x) = %v, want ErrInvalidName", err)
	}
}

// A name dir without read permission: listed by Index and List with the
// error, offered to List's want.
func TestUnreadableNameDir(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads a dir without read permission")
	}
	s := newStore(t)
	create(t, s, "locked")
	dir := filepath.Join(s.Root, "runs", "locked")
	if err := os.Chmod(dir, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(dir, 0o700) })
	idx, err := s.Index("")
	if err != nil || len(idx) != 1 || !errors.Is(idx[0].Err, os.ErrPermission) {
		t.Errorf("Index = %+v, %v; want locked with a permission error", idx, err)
	}
	got, err := s.List("", func(string, string) bool { return false })
	if err != nil || len(got) != 0 {
		t.Errorf("List refusing everything = %+v, %v", got, err)
	}
	got, err = s.List("", nil)
	if err != nil || len(got) != 1 || !errors.Is(got[0].Err, os.ErrPermission) {
		t.Errorf("List = %+v, %v; want locked with a permission error", got, err)
	}
}
