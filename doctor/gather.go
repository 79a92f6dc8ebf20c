//go:build linux

package doctor

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/cgroup"
	"github.com/agent-box/agent-box/live"
	"github.com/agent-box/agent-box/runrecord"
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
	// This binary is read from its file as the supervisor is, so that the
	// two are compared alike (-trimpath leaves the -ldflags stamp out of
	// both, say).
	if b, err := BuildOfFile(o.Exe); err == nil {
		f.Self = b
	}
	if p := supervisorBeside(o.Exe); isExecutable(p) {
		f.SupervisorPath = p
		f.Supervisor, f.SupervisorErr = BuildOfFile(p)
	}
	f.StateDir, f.StateDirErr = o.StateDir, o.StateDirErr
	if f.StateDirErr == nil {
		gatherStateDir(&f)
	}
	f.Host = live.ProbeHost()
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
	h, err := cgroup.Self()
	f.Cgroup = cgroupFacts(h, err, live.SystemdScopes, os.Geteuid())
	if h != nil && !h.V2 && len(f.Cgroup.Writable) > 0 {
		if err := cgroup.Traceable(); err != nil {
			f.Cgroup.Untraced = err.Error()
		}
	}
	f.ClientAlive = clientAliveInterval("/etc/ssh/sshd_config")
	return f
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

func gatherStateDir(f *Facts) {
	dir := f.StateDir
	if _, err := os.Lstat(dir); err == nil {
		f.StateExists = true
		// What agent-box itself would make of it: the same check.
		perm, err := runrecord.InspectDir(dir)
		if err != nil {
			f.StateRefused = err
			return
		}
		f.StateMode = fs.ModeDir | perm
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

// cgroupFacts says, for each limit controller, whether a run could be
// capped by it here: what runs.Enforceable, which process_start asks,
// answers for the hierarchy h (err: none was found) of a process of uid.
func cgroupFacts(h *cgroup.Hierarchy, err error, scopes func() error, uid int) Cgroups {
	if err != nil {
		return Cgroups{Why: err.Error()}
	}
	c := Cgroups{Version: 1}
	if h.V2 {
		c.Version, c.Where = 2, h.Dirs[""]
	}
	for _, name := range limitControllers {
		one := map[string]runs.Limits{"memory": {MemoryMB: 1024}, "cpu": {CPUPercent: 100}, "pids": {Pids: 100}}[name]
		if err := runs.Enforceable(h, one, scopes, uid); err != nil {
			c.Missing = append(c.Missing, name)
			if c.Why == "" {
				c.Why = err.Error()
			}
			continue
		}
		c.Writable = append(c.Writable, name)
	}
	return c
}

// clientAliveInterval is sshd's global ClientAliveInterval in seconds, as
// sshd reads its config: the first value wins, Include lines are read
// where they stand, and what follows a Match line is not global. 0 when
// it is not set (sshd's default), -1 when the config cannot be read or
// the value not parsed.
func clientAliveInterval(config string) int {
	n, found, ok := sshdValue(config, "clientaliveinterval", filepath.Dir(config), 0)
	switch {
	case !ok:
		return -1
	case !found:
		return 0
	}
	secs, err := sshdTime(n)
	if err != nil {
		return -1
	}
	return secs
}

// sshdValue finds keyword's first global value in the config file at
// path; ok is false when the file cannot be read.
func sshdValue(path, keyword, base string, depth int) (value string, found, ok bool) {
	fh, err := os.Open(path)
	if err != nil || depth > 8 {
		return "", false, false
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		// "Keyword value" or "Keyword=value" (sshd_config(5)); neither
		// keyword read here has an "=" in its values.
		f := strings.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == '\t' || r == '=' })
		switch strings.ToLower(f[0]) {
		case "match":
			return "", false, true
		case "include":
			for _, pat := range f[1:] {
				if !filepath.IsAbs(pat) {
					pat = filepath.Join(base, pat)
				}
				files, _ := filepath.Glob(pat)
				slices.Sort(files)
				for _, inc := range files {
					if v, found, _ := sshdValue(inc, keyword, base, depth+1); found {
						return v, true, true
					}
				}
			}
		case keyword:
			if len(f) < 2 {
				return "", false, true
			}
			return f[1], true, true
		}
	}
	return "", false, true
}

// sshdTime parses sshd's time format: seconds, or a sequence of numbers
// with the units s, m, h, d, w ("1m30s").
func sshdTime(s string) (int, error) {
	if n, err := strconv.Atoi(s); err == nil {
		return n, nil
	}
	units := map[byte]int{'s': 1, 'm': 60, 'h': 3600, 'd': 86400, 'w': 604800}
	total, num := 0, ""
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch >= '0' && ch <= '9' {
			num += string(ch)
			continue
		}
		mul, known := units[ch|0x20]
		if !known || num == "" {
			return 0, errors.New("not an sshd time: " + s)
		}
		n, _ := strconv.Atoi(num)
		total, num = total+n*mul, ""
	}
	if num != "" {
		n, _ := strconv.Atoi(num)
		total += n
	}
	return total, nil
}
