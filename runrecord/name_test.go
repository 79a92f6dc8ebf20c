package runrecord_test

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agent-box/agent-box/runrecord"
)

func TestValidName(t *testing.T) {
	long64 := strings.Repeat("a", 64)
	tests := []struct {
		name    string
		wantErr string // "" for valid
	}{
		{"a", ""},
		{"Z", ""},
		{"7", ""},
		{"dev-server_2.log", ""},
		{"a..", ""},
		{"a-", ""},
		{long64, ""},
		{"", "name is required"},
		{long64 + "b", "65 bytes, at most 64"},
		{strings.Repeat("x", 10000), "10000 bytes, at most 64"},
		{"abc\x00", "byte 0x00 at position 3 is not allowed (allowed: A-Z a-z 0-9 . _ -)"},
		{"a/b", "byte 0x2f at position 1 is not allowed"},
		{"/x", "byte 0x2f at position 0 is not allowed"},
		{"a b", "byte 0x20 at position 1 is not allowed"},
		{"x\n", "byte 0x0a at position 1 is not allowed"},
		{"é", "byte 0xc3 at position 0 is not allowed"},
		{"../x", "must start with a letter or digit"},
		{".x", "must start with a letter or digit"},
		{"-x", "must start with a letter or digit"},
		{"_x", "must start with a letter or digit"},
		{".", "must start with a letter or digit"},
		{"..", "must start with a letter or digit"},
		{".lock", "must start with a letter or digit"},
	}
	for _, tt := range tests {
		err := runrecord.ValidName(tt.name)
		if tt.wantErr == "" {
			if err != nil {
				t.Errorf("ValidName(%q) = %v, want nil", tt.name, err)
			}
			continue
		}
		if !errors.Is(err, runrecord.ErrInvalidName) {
			t.Errorf("ValidName(%q) = %v, want ErrInvalidName", tt.name, err)
			continue
		}
		if !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("ValidName(%q) = %q, want it to say %q", tt.name, err, tt.wantErr)
		}
		if len(err.Error()) > 300 {
			t.Errorf("ValidName(%d bytes): error of %d bytes", len(tt.name), len(err.Error()))
		}
	}
}

var runIDPattern = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}\.[0-9]{9}Z-[0-9a-f]{6}$`)

func TestNewRunID(t *testing.T) {
	at := time.Date(2026, 12, 2, 14, 17, 1, 123456789, time.FixedZone("CET", 3600))
	id := runrecord.NewRunID(at)
	if !strings.HasPrefix(id, "20261202T131701.123456789Z-") || !runIDPattern.MatchString(id) {
		t.Errorf("NewRunID = %q, want UTC 20261202T131701.123456789Z-xxxxxx", id)
	}
	if err := runrecord.ValidRunID(id); err != nil {
		t.Errorf("ValidRunID(NewRunID) = %v", err)
	}
	got, err := runIDTime(id)
	if err != nil || !got.Equal(at) {
		t.Errorf("runIDTime(%q) = %v, %v; want %v", id, got, err, at)
	}

	// Byte order is time order, whatever the random suffixes.
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var ids []string
	for _, d := range []time.Duration{0, 1, 2, 999, time.Microsecond, time.Second, time.Hour, 24 * time.Hour, 400 * 24 * time.Hour} {
		ids = append(ids, runrecord.NewRunID(base.Add(d)))
	}
	if !slices.IsSorted(ids) {
		t.Errorf("run ids of increasing times do not sort: %q", ids)
	}

	// The same nanosecond still gives distinct ids; ten equal draws of 24
	// random bits would mean the randomness is broken.
	same := map[string]bool{}
	for range 10 {
		same[runrecord.NewRunID(base)] = true
	}
	if len(same) < 2 {
		t.Errorf("ten run ids for one instant are all %q", runrecord.NewRunID(base))
	}
}

func TestValidRunID(t *testing.T) {
	tests := []struct {
		id      string
		wantErr string // "" for valid
	}{
		{"20261202T141701.123456789Z-3f9a1c", ""},
		{"00000101T000000.000000000Z-000000", ""},
		{"99991231T235959.999999999Z-ffffff", ""},
		{"", "0 bytes, want 33"},
		{"20261202T141701.123456789Z-3f9a1", "32 bytes, want 33"},
		{"20261202T141701.123456789Z-3f9a1cd", "34 bytes, want 33"},
		{"20261202T141701.123456789Z-3F9A1C", "want a lowercase hex digit"},
		{"20261202T141701.123456789Z-3f9a1g", "want a lowercase hex digit"},
		{"20261202t141701.123456789Z-3f9a1c", "position 8, want 'T'"},
		{"20261202T141701,123456789Z-3f9a1c", "position 15, want '.'"},
		{"20261202T141701.123456789+-3f9a1c", "position 25, want 'Z'"},
		{"20261202T141701.123456789Z_3f9a1c", "position 26, want '-'"},
		{"2026120xT141701.123456789Z-3f9a1c", "position 7, want a digit"},
		{"20261302T141701.123456789Z-3f9a1c", "not a valid time"},
		{"20260230T141701.123456789Z-3f9a1c", "not a valid time"},
		{"20261202T246101.123456789Z-3f9a1c", "not a valid time"},
		{"../../../../etc/passwd/xxxxxxxxxx", "want a digit"},
		{".record.json1234567890123456789", "bytes, want 33"},
	}
	for _, tt := range tests {
		err := runrecord.ValidRunID(tt.id)
		if tt.wantErr == "" {
			if err != nil {
				t.Errorf("ValidRunID(%q) = %v, want nil", tt.id, err)
			}
			continue
		}
		if !errors.Is(err, runrecord.ErrInvalidRunID) || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("ValidRunID(%q) = %v, want ErrInvalidRunID saying %q", tt.id, err, tt.wantErr)
		}
	}
}

func FuzzValidName(f *testing.F) {
	for _, s := range []string{"a", "dev-server_2.log", "../x", ".lock", "a\x00", strings.Repeat("a", 65)} {
		f.Add(s)
	}
	re := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	f.Fuzz(func(t *testing.T, name string) {
		err := runrecord.ValidName(name)
		if (err == nil) != re.MatchString(name) {
			t.Fatalf("ValidName(%q) = %v, regexp says %v", name, err, re.MatchString(name))
		}
		if err != nil && !errors.Is(err, runrecord.ErrInvalidName) {
			t.Fatalf("ValidName(%q) = %v, not ErrInvalidName", name, err)
		}
	})
}

func FuzzValidRunID(f *testing.F) {
	f.Add("20261202T141701.123456789Z-3f9a1c")
	f.Add("20261302T141701.123456789Z-3f9a1c")
	f.Fuzz(func(t *testing.T, id string) {
		err := runrecord.ValidRunID(id)
		if err != nil {
			if !errors.Is(err, runrecord.ErrInvalidRunID) {
				t.Fatalf("ValidRunID(%q) = %v, not ErrInvalidRunID", id, err)
			}
			return
		}
		if !runIDPattern.MatchString(id) {
			t.Fatalf("ValidRunID accepted %q", id)
		}
		// A valid id is exactly what NewRunID makes for its time.
		at, err := runIDTime(id)
		if err != nil {
			t.Fatal(err)
		}
		if again := runrecord.NewRunID(at); again[:26] != id[:26] {
			t.Fatalf("runIDTime(%q) = %v, which NewRunID prints as %q", id, at, again)
		}
		if runrecord.ValidName(id) != nil {
			t.Fatalf("run id %q is not a valid path component name", id)
		}
	})
}

// runIDTime is the start time a valid run id encodes.
func runIDTime(id string) (time.Time, error) {
	if err := runrecord.ValidRunID(id); err != nil {
		return time.Time{}, err
	}
	return time.Parse(runIDLayout, id[:len(runIDLayout)])
}

const runIDLayout = "20060102T150405.000000000Z"

// FuzzRunIDTime checks the hand-written date check against time.Parse.
func FuzzRunIDTime(f *testing.F) {
	f.Add(uint16(2026), uint8(12), uint8(2), uint8(14), uint8(17), uint8(1))
	f.Add(uint16(2024), uint8(2), uint8(29), uint8(0), uint8(0), uint8(0))
	f.Add(uint16(2023), uint8(2), uint8(29), uint8(0), uint8(0), uint8(0))
	f.Add(uint16(1900), uint8(2), uint8(29), uint8(0), uint8(0), uint8(0))
	f.Add(uint16(2000), uint8(2), uint8(29), uint8(0), uint8(0), uint8(0))
	f.Add(uint16(2026), uint8(12), uint8(31), uint8(23), uint8(59), uint8(60))
	f.Add(uint16(0), uint8(0), uint8(0), uint8(24), uint8(60), uint8(99))
	f.Fuzz(func(t *testing.T, y uint16, mo, d, h, mi, s uint8) {
		id := fmt.Sprintf("%04d%02d%02dT%02d%02d%02d.000000000Z-000000", y%10000, mo%100, d%100, h%100, mi%100, s%100)
		_, perr := time.Parse(runIDLayout, id[:26])
		verr := runrecord.ValidRunID(id)
		if (perr == nil) != (verr == nil) {
			t.Fatalf("ValidRunID(%q) = %v, time.Parse says %v", id, verr, perr)
		}
	})
}

// NamePattern, what the tool's schema states, accepts what ValidName
// accepts: every byte at the first and a later position, and the longest
// name and one longer.
func TestNamePatternIsValidName(t *testing.T) {
	re := regexp.MustCompile(runrecord.NamePattern)
	var names []string
	for c := range 256 {
		names = append(names, string([]byte{byte(c)}), "a"+string([]byte{byte(c)}))
	}
	names = append(names, "", strings.Repeat("a", runrecord.MaxNameLen), strings.Repeat("a", runrecord.MaxNameLen+1))
	for _, n := range names {
		if valid := runrecord.ValidName(n) == nil; valid != re.MatchString(n) {
			t.Errorf("%q: ValidName says valid=%t, NamePattern the opposite", n, valid)
		}
	}
}
