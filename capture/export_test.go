package capture

import "testing"

// LogFile is the file seam, for fakes in tests.
type LogFile = logFile

// SetOpenFile makes Create open log files with open until the test ends.
func SetOpenFile(t testing.TB, open func(path string) (LogFile, error)) {
	old := openFile
	openFile = open
	t.Cleanup(func() { openFile = old })
}

// Held returns how many input bytes r has taken in but not yet resolved
// into output, raw or masked.
func (r *Redactor) Held() int64 { return r.pos - r.done }

// Buffered returns how many input bytes r keeps in memory.
func (r *Redactor) Buffered() int { return len(r.hold) }
