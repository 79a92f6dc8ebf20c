package watch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/google/renameio/v2"
	"golang.org/x/sys/unix"
)

// store is the cursor file and its two sidecars: F.lock, which every
// report-and-advance holds (flock), and F.owner, the token of the newest
// blocking watch.
type store struct{ path string }

// cursors is the cursor file: one process_list cursor per box, keyed by
// the box's name as given.
type cursors struct {
	Version int               `json:"version"`
	Cursors map[string]string `json:"cursors"`
}

const cursorsVersion = 1

// lock takes the exclusive lock of the cursor file, creating its
// directory (0700) and the lock file (0600) as needed. flock, not fcntl:
// two watches in one process (the tests) must exclude each other too, and
// flock works alike on Linux and macOS.
func (s store) lock(ctx context.Context) (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return nil, fmt.Errorf("the cursor file's directory: %w", err)
	}
	f, err := os.OpenFile(s.path+".lock", os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("the cursor file's lock: %w", err)
	}
	// Without blocking, again and again: a watch that holds the lock
	// while its report's reader stalls must not keep a signal from ending
	// this one.
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			break
		}
		t := time.NewTimer(lockRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", f.Name(), err)
	}
	return func() { f.Close() }, nil // closing the last descriptor releases the lock
}

// lockRetry is how often a watch tries again for a lock another holds.
const lockRetry = 10 * time.Millisecond

// read reads the cursor file; a missing file holds no cursors. A file that
// is not a cursor file is an error, never taken as empty: that would
// report nothing of what ended before it was spoiled.
func (s store) read() (cursors, error) {
	c := cursors{Version: cursorsVersion, Cursors: map[string]string{}}
	b, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("reading the cursor file: %w", err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("%s is not a cursor file of agent-box watch (remove it to start afresh): %w", s.path, err)
	}
	if c.Version != cursorsVersion {
		return c, fmt.Errorf("%s has version %d; this agent-box reads version %d (remove it to start afresh)", s.path, c.Version, cursorsVersion)
	}
	if c.Cursors == nil {
		c.Cursors = map[string]string{}
	}
	return c, nil
}

// write replaces the cursor file atomically.
func (s store) write(c cursors) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(s.path, append(b, '\n'))
}

// owner is the token of the watch that owns the cursor file ("" if none
// ever did).
func (s store) owner() (string, error) {
	b, err := os.ReadFile(s.path + ".owner")
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return string(b), err
}

// claim makes a new token the owner's, and returns it.
func (s store) claim() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	token := hex.EncodeToString(b)
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return "", fmt.Errorf("the cursor file's directory: %w", err)
	}
	return token, writeAtomic(s.path+".owner", []byte(token))
}

// writeAtomic writes a file whole or not at all, mode 0600 whatever the
// umask, and syncs its directory so that the rename itself survives a
// crash (renameio syncs the file, not the directory).
func writeAtomic(path string, data []byte) error {
	t, err := renameio.NewPendingFile(path, renameio.WithStaticPermissions(0o600))
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer t.Cleanup()
	if _, err := t.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := t.CloseAtomicallyReplace(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("syncing %s's directory: %w", path, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing %s's directory: %w", path, err)
	}
	return nil
}
