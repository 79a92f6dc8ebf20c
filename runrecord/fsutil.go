package runrecord

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/google/renameio/v2"
	"golang.org/x/sys/unix"
)

// The steps of an atomic write (replaceFile, syncRenamed) after the temp file exists, one variable each so
// that a test can make any one of them fail (export_test.go); nothing else
// assigns them. syncDir is every directory fsync of the package.
var (
	writeTemp  = (*os.File).Write
	syncTemp   = (*os.File).Sync
	closeTemp  = (*os.File).Close
	renameTemp = os.Rename
	syncDir    = fsyncDir
)

// syncRenamed makes the rename of a new file over dir/file durable.
func syncRenamed(dir, file string) error {
	if err := syncDir(dir); err != nil {
		// The rename is done and cannot be undone (the old file is
		// unlinked), so the write is not rolled back: readers see the new
		// record now, and a crash may bring back the old one, never a
		// torn one, since the new one was fsynced before the rename. The
		// fsync is not retried either: Linux reports a writeback error to
		// one fsync only, so a second could succeed with nothing written
		// (PostgreSQL's "fsyncgate", 2018). The caller gets an error, as
		// durability was asked for and not had, and ErrNotDurable says that
		// the new record is in place: writing it again is safe.
		return fmt.Errorf("%w: readers see the new %s, but a crash may bring back the old one: %w", ErrNotDurable, file, err)
	}
	return nil
}

// replaceFile renames a new file holding data over dir/file, without the
// fsync of dir that makes the rename durable. renameio creates the temp
// file: uniquely named in dir (".record.json" plus random digits: never a
// valid run id or record name, so a crash's leftover is not mistaken for a
// record), 0600 less the umask, and removed again on failure. The steps
// after that are ours, one call each, where renameio's
// CloseAtomicallyReplace fsyncs, closes and renames in one.
func replaceFile(dir, file string, data []byte) error {
	pf, err := renameio.NewPendingFile(filepath.Join(dir, file), renameio.WithPermissions(0o600), renameio.WithTempDir(dir))
	if err != nil {
		return err
	}
	renamed := false
	defer func() {
		if !renamed {
			// Closes the file unless closed (a second Close of an
			// os.File is a harmless ErrClosed) and removes it.
			_ = pf.Cleanup()
		}
	}()
	// The os.File and os.Rename errors are *PathError and *LinkError,
	// which name the op and the paths already.
	//
	// os.File.Write writes all of data or says why not: a short write
	// (ENOSPC, EFBIG or EIO midway) is an error, and the part written goes
	// with the temp file.
	if _, err := writeTemp(pf.File, data); err != nil {
		return err
	}
	// Without this fsync a crash after the rename can leave the new name on
	// an empty file, ext4 data=ordered included (renameio's
	// CloseAtomicallyReplace quotes Ted Ts'o on it).
	if err := syncTemp(pf.File); err != nil {
		return err
	}
	if err := closeTemp(pf.File); err != nil {
		return err
	}
	if err := renameTemp(pf.Name(), filepath.Join(dir, file)); err != nil {
		return err
	}
	renamed = true
	return nil
}

// WriteFileAtomic writes data as dir/file the way the store writes a
// record: a unique temp file in dir, written, fsynced, closed, renamed over
// file, and dir fsynced. Readers see the old file or the new one, never a
// part. An error wrapping ErrNotDurable means the new file is in place but
// may not survive a crash.
func WriteFileAtomic(dir, file string, data []byte) error {
	if err := replaceFile(dir, file, data); err != nil {
		return err
	}
	return syncRenamed(dir, file)
}

func fsyncDir(dir string) error {
	fd, err := openNoFollow(unix.AT_FDCWD, dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	defer unix.Close(fd)
	if err := unix.Fsync(fd); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

func openNoFollow(dirfd int, path string, flags int, perm uint32) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, path, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
		if err == unix.EINTR {
			continue
		}
		return fd, err
	}
}

// ErrNotRegular is returned when a file agent-box reads or writes under
// the state dir is not a regular file: a FIFO, socket, device or directory
// planted in its place.
var ErrNotRegular = errors.New("not a regular file")

// OpenFile opens path the way every file under the state dir is opened:
// never following a symlink in its last component, never blocking in
// open(2), and only if it is a regular file. Opening a FIFO blocks until
// the other end is opened (fifo(7)), forever if nobody does, and no
// context can end a thread stuck in open: so O_NONBLOCK, then fstat of
// what was opened (a check of the path before the open could be raced).
// For a regular file O_NONBLOCK changes nothing. what names the file in
// errors ("log of run x/ID").
func OpenFile(path string, flags int, perm uint32, what string) (*os.File, error) {
	fd, err := openNoFollow(unix.AT_FDCWD, path, flags|unix.O_NONBLOCK, perm)
	switch {
	case err == unix.ENOENT:
		return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	case err == unix.ELOOP:
		return nil, fmt.Errorf("%s is a symlink, which is never followed: %w", what, ErrSymlink)
	case err == unix.ENXIO:
		// O_WRONLY|O_NONBLOCK of a FIFO without a reader, or a socket.
		return nil, fmt.Errorf("%s is a FIFO or socket: %w; nothing was read or written", what, ErrNotRegular)
	case err != nil:
		return nil, fmt.Errorf("opening %s: %w", what, &fs.PathError{Op: "open", Path: path, Err: err})
	}
	kind, err := fileKind(fd)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("opening %s: %w", what, &fs.PathError{Op: "fstat", Path: path, Err: err})
	}
	if kind != "" {
		unix.Close(fd)
		return nil, fmt.Errorf("%s is %s: %w; nothing was read or written", what, kind, ErrNotRegular)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// fileKind fstats fd: "" for a regular file, else what it is in a user's
// words ("a FIFO"). fstat, not a stat of the path: it is about the file
// that was opened, which no rename can swap.
func fileKind(fd int) (string, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "", nil
	case unix.S_IFIFO:
		return "a FIFO", nil
	case unix.S_IFSOCK:
		return "a socket", nil
	case unix.S_IFDIR:
		return "a directory", nil
	case unix.S_IFCHR, unix.S_IFBLK:
		return "a device", nil
	}
	return "not a regular file", nil
}

// openDirNoFollow opens a directory that must not be a symlink.
func openDirNoFollow(path string) (*os.File, error) {
	fd, err := openNoFollow(unix.AT_FDCWD, path, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	switch {
	case err == nil:
		return os.NewFile(uintptr(fd), path), nil
	case err == unix.ENOENT:
		return nil, fmt.Errorf("%s: %w", path, ErrNotFound)
	case err == unix.ELOOP || err == unix.ENOTDIR:
		return nil, notDirAt(path, err)
	default:
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
}

// notDirAt explains why path could not be opened as a directory with
// O_NOFOLLOW|O_DIRECTORY: Linux says ENOTDIR for a symlink too, so look.
func notDirAt(path string, err error) error {
	if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 || err == unix.ELOOP {
		return fmt.Errorf("%s is a symlink: %w", path, ErrSymlink)
	}
	return fmt.Errorf("%s is not a directory", path)
}

// checkDir checks that path is a directory and not a symlink, for the
// directories the store descends through by path.
func checkDir(path, what string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s %s: %w", what, path, ErrNotFound)
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return notDirError(path, what, fi.Mode().Type())
	}
	return nil
}

func notDirError(path, what string, typ fs.FileMode) error {
	if typ&fs.ModeSymlink != 0 {
		return fmt.Errorf("%s %s is a symlink: %w", what, path, ErrSymlink)
	}
	return fmt.Errorf("%s %s is not a directory (type %v)", what, path, typ)
}

// checkPrivateDir checks a directory of the store's own: a real directory,
// owned by this user, private. It works on an O_NOFOLLOW descriptor so the
// checks and the chmod apply to the same inode.
func checkPrivateDir(path string) (warning string, err error) {
	fd, perm, err := openOwnDir(path)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	if perm&0o077 == 0 {
		return "", nil
	}
	if err := unix.Fchmod(fd, 0o700); err != nil {
		return "", &fs.PathError{Op: "chmod", Path: path, Err: err}
	}
	return fmt.Sprintf("%s had mode %04o, open to group or others; tightened to 0700", path, perm), nil
}

// openOwnDir opens the directory at path, never through a symlink, and
// refuses one owned by another user; perm is its permission bits.
func openOwnDir(path string) (fd int, perm uint32, err error) {
	fd, err = openNoFollow(unix.AT_FDCWD, path, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err == unix.ELOOP || err == unix.ENOTDIR {
		return -1, 0, notDirAt(path, err)
	}
	if err != nil {
		return -1, 0, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, 0, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if uid := os.Geteuid(); int(st.Uid) != uid {
		unix.Close(fd)
		return -1, 0, fmt.Errorf("%s is owned by uid %d, not by this user (uid %d)", path, st.Uid, uid)
	}
	return fd, st.Mode & 0o777, nil
}

// InspectDir says what Open would make of the existing directory at path,
// changing nothing: an error for one it refuses (a symlink, not a
// directory, another user's), else its permission bits, which Open
// tightens to 0700 when group or others have any.
func InspectDir(path string) (fs.FileMode, error) {
	fd, perm, err := openOwnDir(path)
	if err != nil {
		return 0, err
	}
	unix.Close(fd)
	return fs.FileMode(perm), nil
}

// readRecordAt reads and decodes the record at path (relative to dirfd),
// never following a symlink in its last component and never reading more
// than MaxRecordBytes. buf, when not nil, is reused across calls.
func readRecordAt(dirfd int, path string, buf *[]byte) (*Record, error) {
	// O_NONBLOCK: a FIFO planted as record.json must not hang the reader.
	fd, err := openNoFollow(dirfd, path, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	switch {
	case err == unix.ENOENT:
		return nil, fmt.Errorf("no %s: %w", RecordFile, ErrNotFound)
	case err == unix.ELOOP:
		return nil, fmt.Errorf("%s is a symlink: %w", RecordFile, ErrSymlink)
	case err != nil:
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	if kind, err := fileKind(fd); err != nil {
		return nil, &fs.PathError{Op: "fstat", Path: path, Err: err}
	} else if kind != "" {
		return nil, fmt.Errorf("%w: %s is %s, not a regular file", ErrCorrupt, RecordFile, kind)
	}

	var local []byte
	if buf == nil {
		buf = &local
	}
	b := (*buf)[:0]
	if cap(b) == 0 {
		b = make([]byte, 0, 8192)
	}
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		want := cap(b) - len(b)
		n, err := unix.Read(fd, b[len(b):cap(b)])
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			return nil, fmt.Errorf("%w: %s is not a regular file", ErrCorrupt, RecordFile)
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		b = b[:len(b)+n]
		if len(b) > MaxRecordBytes {
			return nil, fmt.Errorf("%w: larger than %d bytes", ErrCorrupt, MaxRecordBytes)
		}
		// A short read of a regular file is its end, which saves the
		// read(2) that returns 0 on every record of a listing. Were it
		// ever not the end, the bytes would be a strict prefix of a JSON
		// object, which never decodes: ErrCorrupt, never a wrong record.
		if n == 0 || n < want {
			break
		}
	}
	*buf = b
	return Decode(b)
}

// parallel calls fn(i) for i in [0, n), spread over the CPUs when n is
// large enough for that to pay: decoding JSON dominates a listing.
func parallel(n int, fn func(i int, buf *[]byte)) {
	workers := min(runtime.GOMAXPROCS(0), n/parallelMin)
	if workers <= 1 {
		var buf []byte
		for i := range n {
			fn(i, &buf)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			var buf []byte
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				fn(i, &buf)
			}
		})
	}
	wg.Wait()
}

const parallelMin = 64
