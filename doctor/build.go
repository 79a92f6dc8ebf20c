// Package doctor checks that a box can keep agent-box's promises: that the
// binaries agree, that the state dir keeps runs (persistent, writable,
// private), that runs outlive the SSH session, and which resource-limit
// mechanism the box has. Checks decides from Facts and does no I/O;
// Gather reads the Facts from the live system.
//
// The checks are of a Linux box and build only there. Build (this file)
// builds everywhere: agent-box version --json says what the binary was
// built from on a laptop as on a box.
package doctor

import (
	"debug/buildinfo"
	"runtime"
	"runtime/debug"
	"strings"
)

// Build is what a binary was built from: the version it was stamped with
// (make's -X main.version, "dev" without it), the main module's version
// (set by go install of a released version), the Go version, and the
// commit when the toolchain recorded it (-buildvcs). Two binaries built
// from one checkout in one state agree on all of it.
type Build struct {
	Version  string `json:"version"`
	Module   string `json:"module,omitempty"`
	Go       string `json:"go"`
	Revision string `json:"revision,omitempty"`
	Modified bool   `json:"modified,omitempty"`
}

// BuildOf is this binary's Build; version is the stamped one (-X).
func BuildOf(version string) Build {
	b := Build{Version: version, Go: runtime.Version()}
	if info, ok := debug.ReadBuildInfo(); ok {
		b.fill(info)
	}
	return b
}

// BuildOfFile reads the Build of the Go binary at path without running
// it. Its Version is the stamp its -ldflags gave main.version, as the
// build info recorded them ("dev" without one).
func BuildOfFile(path string) (Build, error) {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return Build{}, err
	}
	b := Build{Version: "dev", Go: info.GoVersion}
	b.fill(info)
	for _, s := range info.Settings {
		if s.Key == "-ldflags" {
			if v, ok := stampedVersion(s.Value); ok {
				b.Version = v
			}
		}
	}
	return b, nil
}

// stampedVersion finds "-X main.version=V" in a recorded -ldflags value.
func stampedVersion(ldflags string) (string, bool) {
	f := strings.Fields(ldflags)
	for i, a := range f {
		x := ""
		switch {
		case a == "-X" && i+1 < len(f):
			x = f[i+1]
		case strings.HasPrefix(a, "-X="):
			x = strings.TrimPrefix(a, "-X=")
		}
		if v, ok := strings.CutPrefix(x, "main.version="); ok {
			return v, true
		}
	}
	return "", false
}

func (b *Build) fill(info *debug.BuildInfo) {
	if v := info.Main.Version; v != "" && v != "(devel)" {
		b.Module = v
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
}

// SameSource reports whether b and o were built from one source: what
// makes two binaries speak one launch protocol. The Go version may differ.
func (b Build) SameSource(o Build) bool {
	return b.Version == o.Version && b.Module == o.Module && b.Revision == o.Revision && b.Modified == o.Modified
}

func (b Build) String() string {
	s := b.Version + ", " + b.Go
	if b.Module != "" {
		s += ", module " + b.Module
	}
	if b.Revision != "" {
		s += ", commit " + b.Revision
		if b.Modified {
			s += " (modified)"
		}
	}
	return s
}
