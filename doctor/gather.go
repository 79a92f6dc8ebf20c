package doctor

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/runs"
)

// Options are what main knows and passes in: the library reads no
// environment of its own.
type Options struct {
	Version     string // this binary's stamp
	Exe         string // this binary's path
	StateDir    string
	StateDirErr error  // no state dir could be chosen
	Launch      string // AGENT_BOX_LAUNCH
	UnderSSH    bool   // SSH_CONNECTION is set
}

// Gather reads the Facts from the live system. It changes nothing: the
// write test makes a file and removes it again.
func Gather(o Options) Facts {
	f := Facts{Exe: o.Exe, Self: BuildOf(o.Version), Launch: o.Launch, UnderSSH: o.UnderSSH, ClientAlive: -1, StateFree: -1}
	if p := supervisorBeside(o.Exe); isExecutable(p) {
		f.SupervisorPath = p
		f.Supervisor, f.SupervisorErr = BuildOfFile(p)
	}
	f.StateDir, f.StateDirErr = o.StateDir, o.StateDirErr
	if f.StateDirErr == nil {
		gatherStateDir(&f)
	}
	f.Host = runs.ProbeHost()
	if u, err := user.Current(); err == nil {
		f.User = u.Username
	}
	if f.Host.SystemdBooted && f.User != "" {
		// logind marks a lingering user with a file of its name here
		// (loginctl enable-linger creates it).
		_, err := os.Stat(filepath.Join("/var/lib/systemd/linger", f.User))
		linger := err == nil
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			f.Linger = &linger
		}
	}
	f.Cgroup = cgroups("/sys/fs/cgroup", "/proc/self/cgroup")
	f.ClientAlive = clientAliveInterval("/etc/ssh/sshd_config")
	return f
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

func gatherStateDir(f *Facts) {
	dir := f.StateDir
	if fi, err := os.Lstat(dir); err == nil {
		f.StateExists = true
		f.StateMode = fi.Mode()
		if !fi.IsDir() {
			f.StateWriteErr = errors.New("it is not a directory")
			return
		}
	}
	// Where it is, or would be made: the nearest directory that exists.
	at := dir
	for {
		if fi, err := os.Stat(at); err == nil && fi.IsDir() {
			break
		}
		parent := filepath.Dir(at)
		if parent == at {
			break
		}
		at = parent
	}
	var st unix.Statfs_t
	if err := unix.Statfs(at, &st); err == nil {
		switch st.Type {
		case unix.TMPFS_MAGIC:
			f.StateFS = "tmpfs"
		case unix.RAMFS_MAGIC:
			f.StateFS = "ramfs"
		}
		f.StateFree = int64(st.Bavail) * int64(st.Bsize)
	}
	tmp, err := os.CreateTemp(at, ".agent-box-doctor-*")
	if err != nil {
		f.StateWriteErr = err
		return
	}
	tmp.Close()
	os.Remove(tmp.Name())
}

// limitControllers are the controllers per-run limits need.
var limitControllers = []string{"memory", "cpu", "pids"}

// cgroups finds the cgroup hierarchy under root and, for each of the
// limit controllers, whether this process may make a group with it: in
// cgroup v2 its own group (from selfCgroup, /proc/self/cgroup) must offer
// the controller and be writable (delegated); in v1 the controller's
// hierarchy must be mounted and writable.
func cgroups(root, selfCgroup string) Cgroups {
	var c Cgroups
	if ctrl, err := os.ReadFile(filepath.Join(root, "cgroup.controllers")); err == nil {
		c.Version = 2
		dir := root
		if b, err := os.ReadFile(selfCgroup); err == nil {
			for line := range strings.SplitSeq(string(b), "\n") {
				if p, ok := strings.CutPrefix(line, "0::"); ok {
					dir = filepath.Join(root, filepath.Clean("/"+p))
				}
			}
		}
		if own, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers")); err == nil {
			ctrl = own
		}
		have := strings.Fields(string(ctrl))
		writable := unix.Access(dir, unix.W_OK) == nil
		for _, name := range limitControllers {
			if writable && contains(have, name) {
				c.Writable = append(c.Writable, name)
			} else {
				c.Missing = append(c.Missing, name)
			}
		}
		return c
	}
	for _, name := range limitControllers {
		if fi, err := os.Stat(filepath.Join(root, name)); err == nil && fi.IsDir() {
			c.Version = 1
			if unix.Access(filepath.Join(root, name), unix.W_OK) == nil {
				c.Writable = append(c.Writable, name)
				continue
			}
		}
		c.Missing = append(c.Missing, name)
	}
	if c.Version == 0 {
		c.Missing = nil
	}
	return c
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// clientAliveInterval reads sshd's ClientAliveInterval from its config
// and the *.conf files of its config.d (Debian's Include); sshd takes the
// first value it reads. -1: the config cannot be read.
func clientAliveInterval(config string) int {
	files := []string{config}
	if more, err := filepath.Glob(config + ".d/*.conf"); err == nil {
		// Debian's sshd_config includes these first.
		files = append(more, files...)
	}
	read := false
	for _, p := range files {
		fh, err := os.Open(p)
		if err != nil {
			continue
		}
		read = true
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) >= 2 && strings.EqualFold(fields[0], "ClientAliveInterval") {
				fh.Close()
				n, err := strconv.Atoi(fields[1])
				if err != nil {
					return -1
				}
				return n
			}
		}
		fh.Close()
	}
	if !read {
		return -1
	}
	return 0
}
