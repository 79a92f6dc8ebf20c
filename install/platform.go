// Package install puts agent-box on a box over ssh: it asks the box for
// its OS and architecture (uname -sm), picks the static agent-box and
// agent-box-supervisor built for them, copies both into a directory of the
// box (atomically: a running agent-box keeps its old file) and runs the
// new one's version. Nothing on the box needs Go or a checkout; it needs
// a POSIX sh, cat, wc, mkdir, chmod and mv.
//
// This is the local side of agent-box: it imports nothing of the box
// side's internals and builds on every OS a user's machine may run
// (darwin too), while the binaries it copies run on Linux only.
package install

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Platform is an OS and architecture as Go names them (GOOS, GOARCH).
type Platform struct {
	OS, Arch string
}

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// Dir is the name of p's directory of builds: linux-amd64.
func (p Platform) Dir() string { return p.OS + "-" + p.Arch }

// ErrUnsupported is a box that agent-box's box side cannot run on.
var ErrUnsupported = errors.New("unsupported box")

// machines maps uname -m to GOARCH, and each GOARCH to the ELF machine of
// its binaries. Several names are one architecture: the kernels of the
// BSDs and macOS say amd64 and arm64 where Linux says x86_64 and aarch64,
// and 32-bit x86 says i386 to i686 by CPU generation.
var machines = []struct {
	uname []string
	arch  string
	elf   elf.Machine
}{
	{[]string{"x86_64", "amd64"}, "amd64", elf.EM_X86_64},
	{[]string{"aarch64", "arm64"}, "arm64", elf.EM_AARCH64},
	{[]string{"i386", "i486", "i586", "i686"}, "386", elf.EM_386},
	// GOARM=7, Go's default for a cross build: no armv6l.
	{[]string{"armv7l", "armv8l"}, "arm", elf.EM_ARM},
	{[]string{"riscv64"}, "riscv64", elf.EM_RISCV},
	{[]string{"ppc64le"}, "ppc64le", elf.EM_PPC64},
	{[]string{"s390x"}, "s390x", elf.EM_S390},
	{[]string{"loongarch64"}, "loong64", elf.EM_LOONGARCH},
}

// ParseUname maps the output of `uname -sm` ("Linux x86_64") to the
// platform of the binaries that run there. A box that is not Linux, or
// whose machine Go has no port for, is ErrUnsupported, said in words a
// user can act on. Only the last line counts: a login script may print
// before it.
func ParseUname(out string) (Platform, error) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(f) != 2 {
		return Platform{}, fmt.Errorf("uname -sm printed %q, not an OS and a machine", strings.TrimSpace(out))
	}
	kernel, machine := f[0], f[1]
	if kernel != "Linux" {
		return Platform{}, fmt.Errorf("%w: the box runs %s (uname -s); agent-box runs processes on Linux boxes only", ErrUnsupported, kernel)
	}
	for _, m := range machines {
		for _, u := range m.uname {
			if u == machine {
				return Platform{OS: "linux", Arch: m.arch}, nil
			}
		}
	}
	return Platform{}, fmt.Errorf("%w: the box's machine is %s (uname -m), for which Go builds no Linux binaries", ErrUnsupported, machine)
}

// elfMachine is the ELF machine of p's binaries.
func elfMachine(p Platform) (elf.Machine, bool) {
	for _, m := range machines {
		if m.arch == p.Arch {
			return m.elf, true
		}
	}
	return 0, false
}

// CheckBinary says why the file at path cannot run on a box of platform p:
// it is no ELF file, or one for another machine, or it is dynamically
// linked (a box need not have the libc it was linked against, nor the
// same version). nil: it can.
func CheckBinary(path string, p Platform) error {
	want, ok := elfMachine(p)
	if p.OS != "linux" || !ok {
		return fmt.Errorf("no binary runs on %s here", p)
	}
	f, err := elf.Open(path)
	if err != nil {
		var fe *elf.FormatError
		if errors.As(err, &fe) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%s is not a Linux (ELF) binary", path)
		}
		return err
	}
	defer f.Close()
	if f.Machine != want || (p.Arch == "ppc64le" && f.Data != elf.ELFDATA2LSB) {
		return fmt.Errorf("%s is built for %s, not %s", path, machineName(f.Machine), p.Arch)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			interp, _ := readInterp(prog)
			return fmt.Errorf("%s is dynamically linked (loader %s), and a box need not have that libc: build it with CGO_ENABLED=0", path, interp)
		}
	}
	return nil
}

func readInterp(prog *elf.Prog) (string, error) {
	if prog.Filesz > 4096 {
		return "?", nil
	}
	b := make([]byte, prog.Filesz)
	if _, err := prog.ReadAt(b, 0); err != nil {
		return "?", err
	}
	return strings.TrimRight(string(b), "\x00"), nil
}

// machineName is GOARCH of an ELF machine, or the ELF name.
func machineName(m elf.Machine) string {
	for _, x := range machines {
		if x.elf == m {
			return x.arch
		}
	}
	return m.String()
}
