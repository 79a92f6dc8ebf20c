package runrecord

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// newPrefix starts the name of a run dir being built (CreateWith).
const newPrefix = ".new-"

// RemoveAbandoned deletes the run dirs of name that a start left half
// built (".new-<run id>": an agent-box killed inside process_start) and
// returns how many it removed. Call it holding the name's lock
// (LockName): every start builds its dir under that lock, so none is
// being built by a live agent-box. A supervisor started inside one is
// kept waiting for a spec that never comes (the spec is sent only once the
// dir is in place), and exits at the EOF of its dead server's pipe; one
// that the dir's record names and that live says is still there keeps the
// dir until it has gone. Nothing is followed: a symlink planted under such
// a name is removed, never its target.
func (s *Store) RemoveAbandoned(name string, live func(*Record) bool) (int, error) {
	if err := ValidName(name); err != nil {
		return 0, err
	}
	dir, err := openDirNoFollow(s.nameDir(name))
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("tidy %s: %w", name, err)
	}
	ents, err := dir.ReadDir(-1)
	dirfd := int(dir.Fd())
	defer dir.Close()
	if err != nil {
		return 0, fmt.Errorf("tidy %s: %w", name, err)
	}
	removed := 0
	var errs []error
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), newPrefix) {
			continue
		}
		if e.IsDir() {
			if rec, err := readRecordAt(dirfd, filepath.Join(e.Name(), RecordFile), nil); err == nil && live(rec) {
				continue
			}
		}
		// RemoveAll unlinks a symlink rather than following it, and
		// never follows one inside the directory either.
		if err := os.RemoveAll(filepath.Join(s.nameDir(name), e.Name())); err != nil {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	if removed > 0 {
		if err := syncDir(s.nameDir(name)); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return removed, fmt.Errorf("tidy %s: %w", name, err)
	}
	return removed, nil
}

// RemoveNameIfEmpty deletes runs/<name> when nothing but its lock is left
// in it, and reports whether it did. Call it holding the name's lock: the
// lock file goes first, and LockName checks that the file it locked is
// still the one at the path, so an agent-box that opened the old lock
// before it was removed tries again instead of starting a run beside
// another that holds a new one.
func (s *Store) RemoveNameIfEmpty(name string) (bool, error) {
	if err := ValidName(name); err != nil {
		return false, err
	}
	dir := s.nameDir(name)
	if err := checkDir(dir, "run name directory"); err != nil {
		if errors.Is(err, ErrNotFound) {
			return false, nil
		}
		return false, err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("tidy %s: %w", name, err)
	}
	for _, e := range ents {
		if e.Name() != lockFile {
			return false, nil
		}
	}
	if err := os.Remove(filepath.Join(dir, lockFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("tidy %s: %w", name, err)
	}
	if err := unix.Rmdir(dir); err != nil {
		if err == unix.ENOTEMPTY || err == unix.EEXIST {
			return false, nil // a run was made meanwhile (without the lock): keep it
		}
		return false, fmt.Errorf("tidy %s: %w", name, &fs.PathError{Op: "rmdir", Path: dir, Err: err})
	}
	return true, syncDir(s.runsPath())
}

// Tidy removes what starts cut short left of name (RemoveAbandoned) and
// then the name's directory if nothing but its lock is left
// (RemoveNameIfEmpty); of every name when name is "", including names
// that hold no run, which Index and List leave out. Best effort, and only
// under the name's lock taken without waiting: a start in progress holds
// it, and then there is nothing to tidy that is provably abandoned. A name
// that is not a directory (missing, or a symlink, never followed) is left
// alone: LockName would make its directory.
func (s *Store) Tidy(name string, live func(*Record) bool) {
	if name != "" {
		s.tidy(name, live)
		return
	}
	_ = s.eachName(func(n string, bad error) error {
		if bad == nil {
			s.tidy(n, live)
		}
		return nil
	})
}

func (s *Store) tidy(name string, live func(*Record) bool) {
	if ValidName(name) != nil || checkDir(s.nameDir(name), "run name directory") != nil {
		return
	}
	unlock, err := s.LockName(name, 0)
	if err != nil {
		return
	}
	defer unlock()
	_, _ = s.RemoveAbandoned(name, live)
	_, _ = s.RemoveNameIfEmpty(name)
}
