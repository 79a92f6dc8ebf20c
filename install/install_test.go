package install

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseUname(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		out  string
		want Platform
		err  string // a part of the error; "" for none
	}{
		{"Linux x86_64\n", Platform{"linux", "amd64"}, ""},
		{"Linux aarch64\n", Platform{"linux", "arm64"}, ""},
		{"Linux arm64", Platform{"linux", "arm64"}, ""},
		{"Linux i686\n", Platform{"linux", "386"}, ""},
		{"Linux armv7l\n", Platform{"linux", "arm"}, ""},
		{"Linux riscv64\n", Platform{"linux", "riscv64"}, ""},
		{"Linux ppc64le\n", Platform{"linux", "ppc64le"}, ""},
		{"Linux s390x\n", Platform{"linux", "s390x"}, ""},
		{"Linux loongarch64\n", Platform{"linux", "loong64"}, ""},
		// A login script's chatter before uname's line.
		{"Welcome!\nLinux x86_64\n", Platform{"linux", "amd64"}, ""},
		{"  Linux   x86_64  \r\n", Platform{"linux", "amd64"}, ""},

		{"Darwin arm64\n", Platform{}, "the box runs Darwin (uname -s); agent-box runs processes on Linux boxes only"},
		{"FreeBSD amd64\n", Platform{}, "the box runs FreeBSD"},
		{"Linux sparc64\n", Platform{}, "the box's machine is sparc64 (uname -m), for which Go builds no Linux binaries"},
		{"Linux armv6l\n", Platform{}, "armv6l"},
		{"Linux ppc64\n", Platform{}, "ppc64"},
		{"", Platform{}, `uname -sm printed "", not an OS and a machine`},
		{"Linux\n", Platform{}, "not an OS and a machine"},
		{"Linux box 6.1.0 x86_64\n", Platform{}, "not an OS and a machine"},
	} {
		p, err := ParseUname(tc.out)
		if tc.err == "" {
			assert.NoError(t, err, "%q", tc.out)
			assert.Equal(t, tc.want, p, "%q", tc.out)
			continue
		}
		if assert.Error(t, err, "%q", tc.out) {
			assert.Contains(t, err.Error(), tc.err, "%q", tc.out)
		}
	}
	_, err := ParseUname("Darwin arm64")
	assert.ErrorIs(t, err, ErrUnsupported)
	_, err = ParseUname("Linux sparc64")
	assert.ErrorIs(t, err, ErrUnsupported)
}

// Every architecture ParseUname names has an ELF machine, and the other
// way round: one table, both directions.
func TestMachinesTable(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, m := range machines {
		assert.False(t, seen[m.arch], "%s twice", m.arch)
		seen[m.arch] = true
		for _, u := range m.uname {
			p, err := ParseUname("Linux " + u)
			require.NoError(t, err)
			assert.Equal(t, m.arch, p.Arch)
		}
		em, ok := elfMachine(Platform{"linux", m.arch})
		assert.True(t, ok)
		assert.Equal(t, m.elf, em)
		assert.Equal(t, m.arch, machineName(m.elf))
	}
}

// fakeELF writes a minimal ELF64 little-endian executable header for
// machine; with interp, a PT_INTERP program header naming it (what a
// dynamically linked binary has).
func fakeELF(t *testing.T, path string, machine elf.Machine, interp string) {
	t.Helper()
	var b bytes.Buffer
	le := binary.LittleEndian
	b.Write([]byte{0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT), 0})
	b.Write(make([]byte, 8))
	phnum, phoff := uint16(0), uint64(0)
	if interp != "" {
		phnum, phoff = 1, 64
	}
	binary.Write(&b, le, uint16(elf.ET_EXEC))
	binary.Write(&b, le, uint16(machine))
	binary.Write(&b, le, uint32(elf.EV_CURRENT))
	binary.Write(&b, le, uint64(0))   // entry
	binary.Write(&b, le, phoff)       // phoff
	binary.Write(&b, le, uint64(0))   // shoff
	binary.Write(&b, le, uint32(0))   // flags
	binary.Write(&b, le, uint16(64))  // ehsize
	binary.Write(&b, le, uint16(56))  // phentsize
	binary.Write(&b, le, phnum)       // phnum
	binary.Write(&b, le, uint16(64))  // shentsize
	binary.Write(&b, le, [2]uint16{}) // shnum, shstrndx
	if interp != "" {
		s := append([]byte(interp), 0)
		binary.Write(&b, le, uint32(elf.PT_INTERP))
		binary.Write(&b, le, uint32(elf.PF_R))
		binary.Write(&b, le, uint64(64+56)) // offset
		binary.Write(&b, le, [2]uint64{})   // vaddr, paddr
		binary.Write(&b, le, [2]uint64{uint64(len(s)), uint64(len(s))})
		binary.Write(&b, le, uint64(1))
		b.Write(s)
	}
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, b.Bytes(), 0o755))
}

func TestCheckBinary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	amd64 := Platform{"linux", "amd64"}
	p := filepath.Join(dir, "static")
	fakeELF(t, p, elf.EM_X86_64, "")
	assert.NoError(t, CheckBinary(p, amd64))

	err := CheckBinary(p, Platform{"linux", "arm64"})
	assert.ErrorContains(t, err, p+" is built for amd64, not arm64")

	dyn := filepath.Join(dir, "dynamic")
	fakeELF(t, dyn, elf.EM_X86_64, "/lib64/ld-linux-x86-64.so.2")
	assert.ErrorContains(t, CheckBinary(dyn, amd64), dyn+" is dynamically linked (loader /lib64/ld-linux-x86-64.so.2), and a box need not have that libc: build it with CGO_ENABLED=0")

	script := filepath.Join(dir, "script")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755))
	assert.ErrorContains(t, CheckBinary(script, amd64), script+" is not a Linux (ELF) binary")

	assert.ErrorIs(t, CheckBinary(filepath.Join(dir, "none"), amd64), os.ErrNotExist)
}

func TestFind(t *testing.T) {
	t.Parallel()
	amd64, arm64 := Platform{"linux", "amd64"}, Platform{"linux", "arm64"}
	prefix := t.TempDir()
	bin := filepath.Join(prefix, "bin")
	exe := filepath.Join(bin, AgentBox)
	fakeELF(t, exe, elf.EM_X86_64, "")
	fakeELF(t, filepath.Join(bin, Supervisor), elf.EM_X86_64, "")

	// The box runs what runs here: the executable itself.
	src, err := Find(amd64, exe, "")
	require.NoError(t, err)
	assert.Equal(t, Source{From: exe, AgentBox: exe, Supervisor: filepath.Join(bin, Supervisor)}, src)

	// Another machine, with no build for it: what each place lacked, and
	// how to get one.
	_, err = Find(arm64, exe, "")
	require.Error(t, err)
	lib := filepath.Join(prefix, "lib", "agent-box", "linux-arm64")
	for _, want := range []string{
		"no agent-box build for linux/arm64 here:",
		exe + " is built for amd64, not arm64",
		filepath.Join(lib, AgentBox) + ": not there",
		"make install ",
		"make install-remote BOX=HOST",
		"GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build -o DIR/linux-arm64/ ./cmd/agent-box ./cmd/agent-box-supervisor",
	} {
		assert.Contains(t, err.Error(), want)
	}

	// make install's builds beside it.
	fakeELF(t, filepath.Join(lib, AgentBox), elf.EM_AARCH64, "")
	_, err = Find(arm64, exe, "")
	assert.ErrorContains(t, err, filepath.Join(lib, Supervisor)+": not there", "one binary of two is no install")
	fakeELF(t, filepath.Join(lib, Supervisor), elf.EM_AARCH64, "")
	src, err = Find(arm64, exe, "")
	require.NoError(t, err)
	assert.Equal(t, Source{From: lib, AgentBox: filepath.Join(lib, AgentBox), Supervisor: filepath.Join(lib, Supervisor)}, src)

	// A dynamic executable (go install with cgo) is not sent; the lib
	// dir's build is.
	fakeELF(t, exe, elf.EM_X86_64, "/lib64/ld-linux-x86-64.so.2")
	_, err = Find(amd64, exe, "")
	assert.ErrorContains(t, err, "dynamically linked")
	libAmd := filepath.Join(prefix, "lib", "agent-box", "linux-amd64")
	fakeELF(t, filepath.Join(libAmd, AgentBox), elf.EM_X86_64, "")
	fakeELF(t, filepath.Join(libAmd, Supervisor), elf.EM_X86_64, "")
	src, err = Find(amd64, exe, "")
	require.NoError(t, err)
	assert.Equal(t, libAmd, src.From)

	// --from DIR: DIR/OS-ARCH, else DIR itself; the executable is not
	// looked at.
	from := t.TempDir()
	_, err = Find(arm64, exe, from)
	assert.ErrorContains(t, err, "GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build -o "+filepath.Join(from, "linux-arm64")+"/ ./cmd/agent-box ./cmd/agent-box-supervisor   # in a checkout; then install --from "+from)
	assert.NotContains(t, err.Error(), "make install")
	fakeELF(t, filepath.Join(from, AgentBox), elf.EM_AARCH64, "")
	fakeELF(t, filepath.Join(from, Supervisor), elf.EM_AARCH64, "")
	src, err = Find(arm64, exe, from)
	require.NoError(t, err)
	assert.Equal(t, from, src.From)
	_, err = Find(amd64, exe, from)
	assert.ErrorContains(t, err, filepath.Join(from, AgentBox)+" is built for arm64, not amd64")
	fakeELF(t, filepath.Join(from, "linux-amd64", AgentBox), elf.EM_X86_64, "")
	fakeELF(t, filepath.Join(from, "linux-amd64", Supervisor), elf.EM_X86_64, "")
	src, err = Find(amd64, exe, from)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(from, "linux-amd64"), src.From)
}

// shRemote is the box as a directory of this machine: it runs each
// command line with sh in home, as ssh runs it in the box's home, except
// those that answer (uname -sm, a version) says.
type shRemote struct {
	home   string
	answer func(command string) (out []byte, ok bool)
	stdin  func(io.Reader) io.Reader // what reaches the command of what is sent
	ran    []string
}

func (r *shRemote) Run(ctx context.Context, command string, stdin io.Reader) ([]byte, error) {
	r.ran = append(r.ran, command)
	if out, ok := r.answer(command); ok {
		return out, nil
	}
	if stdin != nil && r.stdin != nil {
		stdin = r.stdin(stdin)
	}
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	cmd.Dir = r.home
	cmd.Env = []string{"HOME=" + r.home, "PATH=/usr/bin:/bin"}
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		errors.As(err, &ee)
		return stdout.Bytes(), &SSHError{Dest: "box", Command: command, Code: ee.ExitCode(), Stderr: cleanStderr(stderr.String()), Err: err}
	}
	return stdout.Bytes(), nil
}

func TestInstall(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("the fake box is sh")
	}
	from := t.TempDir()
	fakeELF(t, filepath.Join(from, "linux-arm64", AgentBox), elf.EM_AARCH64, "")
	fakeELF(t, filepath.Join(from, "linux-arm64", Supervisor), elf.EM_AARCH64, "")
	home := t.TempDir()
	r := &shRemote{home: home, answer: func(c string) ([]byte, bool) {
		switch c {
		case "uname -sm":
			return []byte("Linux aarch64\n"), true
		case "'.local/bin'/agent-box version", ".local/bin/agent-box version":
			return []byte("agent-box v1\n"), true
		}
		return nil, false
	}}
	// An older agent-box is there, and running: it is replaced, not
	// written into.
	old := filepath.Join(home, ".local", "bin", AgentBox)
	require.NoError(t, os.MkdirAll(filepath.Dir(old), 0o755))
	require.NoError(t, os.WriteFile(old, []byte("old"), 0o755))
	oldFile, err := os.Open(old)
	require.NoError(t, err)
	defer oldFile.Close()

	res, err := Install(context.Background(), Options{Dest: "box", Remote: r, From: from})
	require.NoError(t, err)
	assert.Equal(t, Result{Platform: Platform{"linux", "arm64"}, From: filepath.Join(from, "linux-arm64"), AgentBox: filepath.Join(from, "linux-arm64", AgentBox), RemoteDir: ".local/bin", Version: "agent-box v1"}, res)
	for _, name := range []string{AgentBox, Supervisor} {
		want, err := os.ReadFile(filepath.Join(from, "linux-arm64", name))
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(home, ".local", "bin", name))
		require.NoError(t, err)
		assert.Equal(t, want, got, name)
		fi, err := os.Stat(filepath.Join(home, ".local", "bin", name))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm(), name)
	}
	b, err := io.ReadAll(oldFile)
	require.NoError(t, err)
	assert.Equal(t, "old", string(b), "the old file, still open, is unchanged")
	names, err := os.ReadDir(filepath.Join(home, ".local", "bin"))
	require.NoError(t, err)
	assert.Len(t, names, 2, "no temporary file left")
	assert.Equal(t, "uname -sm", r.ran[0])

	// A copy cut short (the connection dropped): the file there stays,
	// and no temporary file is left.
	r.stdin = func(in io.Reader) io.Reader { return io.LimitReader(in, 10) }
	require.NoError(t, os.WriteFile(filepath.Join(home, ".local", "bin", Supervisor), []byte("before"), 0o755))
	_, err = Install(context.Background(), Options{Dest: "box", Remote: r, From: from})
	require.Error(t, err)
	assert.Regexp(t, `^copying .*/linux-arm64/agent-box-supervisor to box:\.local/bin: the command on box failed \(exit status 1\):\nreceived 10 of \d+ bytes$`, err.Error())
	b, err = os.ReadFile(filepath.Join(home, ".local", "bin", Supervisor))
	require.NoError(t, err)
	assert.Equal(t, "before", string(b))
	names, err = os.ReadDir(filepath.Join(home, ".local", "bin"))
	require.NoError(t, err)
	assert.Len(t, names, 2, "no temporary file left")
	r.stdin = nil

	// --remote-dir, from the home with "~/", and a name that needs quoting.
	r.answer = func(c string) ([]byte, bool) {
		switch c {
		case "uname -sm":
			return []byte("Linux aarch64\n"), true
		case `"$HOME"/'my bin'/agent-box version`:
			return []byte("agent-box v1\n"), true
		}
		return nil, false
	}
	_, err = Install(context.Background(), Options{Dest: "box", Remote: r, From: from, RemoteDir: "~/my bin/"})
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(home, "my bin", AgentBox))
	require.NoError(t, err)

	// A box of no platform we build for: said before anything is copied.
	r.ran = nil
	r.answer = func(c string) ([]byte, bool) { return []byte("Linux sparc64\n"), c == "uname -sm" }
	_, err = Install(context.Background(), Options{Dest: "box", Remote: r, From: from})
	assert.EqualError(t, err, "box: unsupported box: the box's machine is sparc64 (uname -m), for which Go builds no Linux binaries")
	assert.Equal(t, []string{"uname -sm"}, r.ran)

	// A box of a platform with no build here.
	r.answer = func(c string) ([]byte, bool) { return []byte("Linux x86_64\n"), c == "uname -sm" }
	_, err = Install(context.Background(), Options{Dest: "box", Remote: r, From: from})
	assert.ErrorContains(t, err, "box is linux/amd64: no agent-box build for linux/amd64 here:\n")
}

func TestRemoteDir(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		".local/bin":  ".local/bin",
		".local/bin/": ".local/bin",
		"~":           `"$HOME"`,
		"~/bin":       `"$HOME"/bin`,
		"/opt/a b":    `'/opt/a b'`,
		"it's":        `'it'\''s'`,
		"/":           "/",
	} {
		assert.Equal(t, want, remoteDir(in), "%q", in)
	}
}

func TestSSHErrorWords(t *testing.T) {
	t.Parallel()
	e := &SSHError{Dest: "box", Code: 255, Stderr: cleanStderr("No ED25519 host key is known for box.\r\nHost key verification failed.\r\n")}
	assert.Equal(t, "ssh box failed:\nNo ED25519 host key is known for box.\nHost key verification failed.", e.Error())
	e = &SSHError{Dest: "box", Code: 1}
	assert.Equal(t, "the command on box failed (exit status 1), saying nothing", e.Error())
	assert.True(t, strings.HasPrefix((&SSHError{Dest: "box", Code: -1, Err: errors.New("signal: killed")}).Error(), "ssh box: signal: killed"))
}
