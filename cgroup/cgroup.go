// Package cgroup gives one run a control group of its own, under the
// cgroup of the process that makes it, caps it (memory, CPU, processes),
// starts the run's leader inside it and reads back what the group used and
// whether the kernel killed in it for memory. It speaks both cgroup v1
// (one hierarchy per controller) and v2 (one unified hierarchy). Which is
// used when, and why, is in docs/architecture/limits.md.
package cgroup

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// Limits are the caps of a group; a zero field caps nothing.
type Limits struct {
	MemoryBytes int64 // memory and swap together
	CPUPercent  int   // of one CPU
	Pids        int   // tasks (processes and threads) at once
}

// ErrUnavailable is wrapped by Check and Create when this box cannot
// enforce a limit: the error says which and what would enable it.
var ErrUnavailable = errors.New("cannot enforce the limit on this machine")

// The v1 controllers a run's group is made in: memory, cpu and pids cap,
// cpuacct counts CPU time (it shares cpu's hierarchy on most boxes).
var v1Controllers = []string{"memory", "cpu", "cpuacct", "pids"}

// Hierarchy is where the cgroups of one process are: the directory of its
// cgroup in each controller's hierarchy (v1), or in the unified one (v2).
type Hierarchy struct {
	V2 bool
	// Root is the v2 hierarchy's mount point, when it shows the whole
	// hierarchy (not a container's subtree).
	Root string
	// Dirs maps a v1 controller to the process's cgroup directory in its
	// hierarchy; under v2 the one directory is Dirs[""]. A controller
	// whose hierarchy is not mounted is missing.
	Dirs map[string]string
}

// Self is the hierarchy of the calling process.
func Self() (*Hierarchy, error) { return Of("self") }

// Of is the hierarchy of process pid ("self" for the caller), from
// /proc/PID/cgroup and the cgroup mounts this process sees.
func Of(pid string) (*Hierarchy, error) {
	ms, err := ReadMounts()
	if err != nil {
		return nil, err
	}
	return ms.Of(pid)
}

// Mounts are the cgroup mounts this process sees: read once for the
// lookups of a listing (a box may have thousands of mounts).
type Mounts []*mountinfo.Info

// ReadMounts reads the cgroup mounts from /proc/self/mountinfo.
func ReadMounts() (Mounts, error) {
	ms, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("cgroup", "cgroup2"))
	if err != nil {
		return nil, fmt.Errorf("reading cgroup mounts: %w", err)
	}
	return ms, nil
}

// Of is the hierarchy of process pid in ms.
func (ms Mounts) Of(pid string) (*Hierarchy, error) {
	data, err := readSmall("/proc/" + pid + "/cgroup")
	if err != nil {
		return nil, err
	}
	return parse(ms, string(data))
}

// parse joins the cgroup mounts with the lines of /proc/PID/cgroup
// ("ID:CONTROLLERS:PATH", cgroups(7)). A v1 controller mounted in a
// hierarchy of its own or with others is found by its mount's super
// options; v2 is taken only when no v1 hierarchy holds a controller a run
// is capped by (a hybrid box keeps them in v1).
func parse(mounts []*mountinfo.Info, procCgroup string) (*Hierarchy, error) {
	v1 := &Hierarchy{Dirs: map[string]string{}}
	var v2dir, v2root string
	for _, line := range strings.Split(strings.TrimSpace(procCgroup), "\n") {
		id, rest, ok1 := strings.Cut(line, ":")
		ctrls, path, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 || !strings.HasPrefix(path, "/") {
			continue
		}
		for _, m := range mounts {
			dir, ok := under(m, path)
			if !ok {
				continue
			}
			switch {
			case id == "0" && ctrls == "" && m.FSType == "cgroup2":
				v2dir = dir
				if m.Root == "/" {
					v2root = m.Mountpoint
				}
			case m.FSType == "cgroup":
				for _, c := range strings.Split(ctrls, ",") {
					if slices.Contains(v1Controllers, c) && hasOption(m.VFSOptions, c) && v1.Dirs[c] == "" {
						v1.Dirs[c] = dir
					}
				}
			}
		}
	}
	if v1.Dirs["memory"] != "" || v1.Dirs["cpu"] != "" || v1.Dirs["pids"] != "" {
		return v1, nil
	}
	if v2dir != "" {
		return &Hierarchy{V2: true, Root: v2root, Dirs: map[string]string{"": v2dir}}, nil
	}
	return nil, fmt.Errorf("%w: no cgroup hierarchy is mounted (mount cgroup2 on /sys/fs/cgroup)", ErrUnavailable)
}

// under is where the cgroup at path (as /proc/PID/cgroup names it) is in
// mount m, if m shows it: a mount may show only a subtree (its Root), as
// in a container.
func under(m *mountinfo.Info, path string) (string, bool) {
	root := m.Root
	if root == "/" {
		return filepath.Join(m.Mountpoint, path), true
	}
	if path != root && !strings.HasPrefix(path, root+"/") {
		return "", false
	}
	return filepath.Join(m.Mountpoint, strings.TrimPrefix(path, root)), true
}

func hasOption(opts, want string) bool {
	for _, o := range strings.Split(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}

// needs lists what l asks of the box: v1 controllers, or v2 controller
// names as cgroup.controllers lists them.
func needs(l Limits) []string {
	var c []string
	if l.MemoryBytes > 0 {
		c = append(c, "memory")
	}
	if l.CPUPercent > 0 {
		c = append(c, "cpu")
	}
	if l.Pids > 0 {
		c = append(c, "pids")
	}
	return c
}

// Check says whether l can be enforced in a group made under h: each
// controller l needs is there and its directory is writable (v1), or the
// group offers them and is writable, as a scope systemd delegated is
// (v2). Its error wraps ErrUnavailable.
func (h *Hierarchy) Check(l Limits) error {
	if h.V2 {
		return h.checkV2(l)
	}
	for _, c := range needs(l) {
		dir := h.Dirs[c]
		if dir == "" {
			return fmt.Errorf("%w: the %s cgroup controller is not mounted (mount it, or boot with cgroup v2)", ErrUnavailable, c)
		}
		if err := writable(dir); err != nil {
			return err
		}
	}
	return nil
}

// checkV2 checks the group a v2 maker was given: it offers the
// controllers l needs and is this process's to write, as a scope systemd
// delegated is (CheckDelegable says whether systemd would give one).
func (h *Hierarchy) checkV2(l Limits) error {
	dir := h.Dirs[""]
	available, err := readSmall(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	for _, c := range needs(l) {
		if !hasWord(string(available), c) {
			return fmt.Errorf("%w: cgroup v2 group %s does not offer the %s controller (it offers: %s); a run with limits needs a group delegated to it (systemd-run --scope -p Delegate=yes)", ErrUnavailable, dir, c, strings.TrimSpace(string(available)))
		}
	}
	return writable(dir)
}

// CheckDelegable says whether systemd, asked for a scope with
// Delegate=yes, would hand it the controllers l needs: root's scopes get
// what the hierarchy's root offers, a user's those delegated to its
// manager (user@UID.service). Only for v2; its error wraps ErrUnavailable.
func (h *Hierarchy) CheckDelegable(l Limits, uid int) error {
	if err := cloneIntoCgroup(); err != nil {
		return err
	}
	if h.Root == "" {
		return fmt.Errorf("%w: the cgroup v2 hierarchy is mounted from a subtree (a container's); only a group delegated by systemd can be capped", ErrUnavailable)
	}
	dir, who := h.Root, "the cgroup v2 root"
	if uid != 0 {
		u := strconv.Itoa(uid)
		dir, who = filepath.Join(h.Root, "user.slice", "user-"+u+".slice", "user@"+u+".service"), "systemd's manager of uid "+u
	}
	available, err := readSmall(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("%w: %s: %w (is the user's systemd manager running? loginctl enable-linger starts it)", ErrUnavailable, who, err)
	}
	for _, c := range needs(l) {
		if !hasWord(string(available), c) {
			return fmt.Errorf("%w: %s is not given the %s controller (it has: %s); delegate it with a drop-in for user@.service: [Service] Delegate=cpu memory pids", ErrUnavailable, who, c, strings.TrimSpace(string(available)))
		}
	}
	return nil
}

// writable says whether this process may make groups under dir.
func writable(dir string) error {
	err := unix.Access(dir, unix.W_OK)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EROFS):
		return fmt.Errorf("%w: %s is not writable by uid %d (run agent-box as root, or in a cgroup delegated to this user)", ErrUnavailable, dir, os.Geteuid())
	}
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, dir, err)
}

// cloneIntoCgroup says whether the kernel can start a process in a v2
// group (clone3 CLONE_INTO_CGROUP, Linux 5.7), which a run's start needs:
// Go has no fallback for SysProcAttr.UseCgroupFD.
func cloneIntoCgroup() error {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return nil // let the start say
	}
	release := unix.ByteSliceToString(u.Release[:])
	var major, minor int
	if _, err := fmt.Sscanf(release, "%d.%d", &major, &minor); err == nil && (major < 5 || major == 5 && minor < 7) {
		return fmt.Errorf("%w: Linux %s cannot start a process inside a cgroup v2 group (clone3 into a cgroup needs 5.7)", ErrUnavailable, release)
	}
	return nil
}

func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}

// readSmall reads a kernel file to its end, at most 4 MiB of it.
// O_NOFOLLOW: a symlink is never a kernel file.
func readSmall(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := readAll(f)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return b, nil
}

// readAll reads r to its end, at most 4 MiB: a list such as cgroup.procs
// comes a page per read(2), as a seq_file does (fs/seq_file.c).
func readAll(r io.Reader) ([]byte, error) { return io.ReadAll(io.LimitReader(r, 4<<20)) }

// write writes one value to a cgroup file.
func write(dir, file, value string) error {
	path := filepath.Join(dir, file)
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %q to %s: %w", value, path, err)
	}
	return nil
}

// field is the value of key in a "key value" per line file (memory.stat,
// memory.events, cpu.stat, memory.oom_control).
func field(data []byte, key string) (int64, bool) {
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if ok && k == key {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// number reads a file holding one integer ("max" reads as -1).
func number(dir, file string) (int64, error) {
	data, err := readSmall(filepath.Join(dir, file))
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(data))
	if s == "max" {
		return -1, nil
	}
	return strconv.ParseInt(s, 10, 64)
}
