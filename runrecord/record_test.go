package runrecord_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agent-box/agent-box/runrecord"
)

const recordFixtures = "../testdata/fixtures/records"

func intp(i int) *int { return &i }

// sample is a record with every field set, so a field lost on the way to
// disk and back shows up.
func sample(name string, at time.Time) *runrecord.Record {
	fin := at.Add(90 * time.Second)
	return &runrecord.Record{
		Version:             runrecord.Version,
		Name:                name,
		RunID:               runrecord.NewRunID(at),
		SecretEnv:           []string{"TOKEN"},
		LogFormat:           "logframe",
		BootID:              "45c5bfb7-08f7-4289-8a20-9df3475b0cd8",
		StartedAt:           at,
		LogPath:             "/state/runs/x/log",
		SupervisorPID:       100,
		SupervisorStartTime: 1000,
		PID:                 102,
		PIDStartTime:        1001,
		StartError:          "",
		Exit:                &runrecord.Exit{Code: intp(3), Signal: "", At: fin, TimedOut: true},
		FinishedAt:          &fin,
		OutputClosed:        true,
		LogBytes:            10,
		LogDropped:          2,
		LogCapped:           true,
		LogError:            "disk full",
		Spec:                runrecord.Spec{Command: "echo hi; sleep 1", Argv: []string{"a", "b c"}, Cwd: "/tmp/work", Env: map[string]string{"A": "1", "TOKEN": "[redacted]"}, CaptureMode: "framed", Stdin: "pipe", TimeoutS: 30, MaxLogBytes: 1 << 20},
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	r := sample("roundtrip", time.Date(2026, 12, 2, 14, 17, 1, 123456789, time.UTC))
	data, err := runrecord.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := runrecord.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, r)
	}
	if *got.Exit.Code != 3 || got.Exit.Signal != "" {
		t.Errorf("exit = %+v", got.Exit)
	}
}

func TestEncodeFillsVersionAndRefusesIncomplete(t *testing.T) {
	r := sample("v", time.Now())
	r.Version = 0
	data, err := runrecord.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	if r.Version != 0 {
		t.Error("Encode changed its argument")
	}
	if got, err := runrecord.Decode(data); err != nil || got.Version != runrecord.Version {
		t.Errorf("Decode(Encode(version 0)) = %+v, %v", got, err)
	}

	for _, tt := range []struct {
		field string
		mod   func(*runrecord.Record)
	}{
		{"name", func(r *runrecord.Record) { r.Name = "../x" }},
		{"run_id", func(r *runrecord.Record) { r.RunID = "x" }},
		{"boot_id", func(r *runrecord.Record) { r.BootID = "" }},
		{"started_at", func(r *runrecord.Record) { r.StartedAt = time.Time{} }},
		{"capture_mode", func(r *runrecord.Record) { r.CaptureMode = "" }},
		{"version", func(r *runrecord.Record) { r.Version = runrecord.Version + 1 }},
	} {
		r := sample("v", time.Now())
		tt.mod(r)
		if _, err := runrecord.Encode(r); err == nil || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("Encode with bad %s: error %v, want one naming the field", tt.field, err)
		}
	}
	if _, err := runrecord.Encode(nil); err == nil {
		t.Error("Encode(nil): no error")
	}
}

func TestDecodeFixtures(t *testing.T) {
	tests := []struct {
		file    string
		wantErr error
		check   func(t *testing.T, r *runrecord.Record)
	}{
		{"running.json", nil, func(t *testing.T, r *runrecord.Record) {
			if r.Name != "devserver" || r.PID != 41232 || r.PIDStartTime != 9120351 || r.Exit != nil || r.FinishedAt != nil {
				t.Errorf("running record: %+v", r)
			}
			if r.Env["API_TOKEN"] != "[redacted]" || r.SecretEnv[0] != "API_TOKEN" {
				t.Errorf("env: %v %v", r.Env, r.SecretEnv)
			}
		}},
		{"exited-code.json", nil, func(t *testing.T, r *runrecord.Record) {
			if r.Exit == nil || r.Exit.Code == nil || *r.Exit.Code != 1 || r.Exit.Signal != "" || r.Exit.TimedOut {
				t.Errorf("exit: %+v", r.Exit)
			}
			if r.FinishedAt == nil || !r.FinishedAt.Equal(r.Exit.At) {
				t.Errorf("finished_at %v, exit at %v", r.FinishedAt, r.Exit.At)
			}
			if len(r.Argv) != 3 || r.Command != "" {
				t.Errorf("argv %q command %q", r.Argv, r.Command)
			}
		}},
		{"exited-signal.json", nil, func(t *testing.T, r *runrecord.Record) {
			if r.Exit == nil || r.Exit.Code != nil || r.Exit.Signal != "SIGKILL" || !r.Exit.TimedOut {
				t.Errorf("exit: %+v", r.Exit)
			}
			if !r.LogCapped || r.LogDropped != 52 {
				t.Errorf("log status: %+v", r)
			}
		}},
		{"start-failed.json", nil, func(t *testing.T, r *runrecord.Record) {
			if r.StartError == "" || r.PID != 0 || r.Exit != nil {
				t.Errorf("start failure: %+v", r)
			}
		}},
		{"other-boot.json", nil, func(t *testing.T, r *runrecord.Record) {
			if r.BootID != "00000000-0000-0000-0000-000000000000" {
				t.Errorf("boot id %q", r.BootID)
			}
		}},
		{"future-version.json", runrecord.ErrUnsupportedVersion, func(t *testing.T, _ *runrecord.Record) {}},
		{"truncated.json", runrecord.ErrCorrupt, func(t *testing.T, _ *runrecord.Record) {}},
	}
	files, _ := filepath.Glob(filepath.Join(recordFixtures, "*.json"))
	if len(files) != len(tests) {
		t.Errorf("%d fixtures on disk, %d in the table: keep them in step", len(files), len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(recordFixtures, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			r, err := runrecord.Decode(data)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || r != nil {
					t.Fatalf("Decode = %v, %v; want %v", r, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, r)
		})
	}
}

func TestDecodeFutureVersionSaysWhich(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(recordFixtures, "future-version.json"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = runrecord.Decode(data)
	var ve *runrecord.VersionError
	if !errors.As(err, &ve) || ve.Found != 99 || !strings.Contains(err.Error(), "version 99") {
		t.Errorf("Decode(version 99) = %v, want a VersionError for 99", err)
	}
	if errors.Is(err, runrecord.ErrCorrupt) {
		t.Errorf("a future version is not corrupt: %v", err)
	}
}

func TestDecodeErrors(t *testing.T) {
	valid, err := runrecord.Encode(sample("x", time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)))
	if err != nil {
		t.Fatal(err)
	}
	without := func(field string) string {
		var out []string
		for _, line := range strings.Split(string(valid), "\n") {
			if !strings.HasPrefix(strings.TrimSpace(line), `"`+field+`"`) {
				out = append(out, line)
			}
		}
		return strings.Join(out, "\n")
	}
	replace := func(old, new string) string {
		if !bytes.Contains(valid, []byte(old)) {
			t.Fatalf("sample has no %q", old)
		}
		return strings.Replace(string(valid), old, new, 1)
	}
	tests := []struct {
		name    string
		data    string
		wantErr error
		say     string
	}{
		{"empty", "", runrecord.ErrCorrupt, "empty"},
		{"blank", " \n\t", runrecord.ErrCorrupt, "empty"},
		{"not json", "hello", runrecord.ErrCorrupt, "not a JSON object"},
		{"array", "[1]", runrecord.ErrCorrupt, "not a JSON object"},
		{"null", "null", runrecord.ErrCorrupt, "not a JSON object"},
		{"truncated", string(valid[:len(valid)/2]), runrecord.ErrCorrupt, "truncated"},
		{"trailing garbage", string(valid) + "}", runrecord.ErrCorrupt, "truncated"},
		{"no version", without("version"), runrecord.ErrUnsupportedVersion, "no version"},
		{"version 0", replace(`"version": 1`, `"version": 0`), runrecord.ErrUnsupportedVersion, "no version"},
		{"version -1", replace(`"version": 1`, `"version": -1`), runrecord.ErrUnsupportedVersion, "version -1"},
		{"version 2", replace(`"version": 1`, `"version": 2`), runrecord.ErrUnsupportedVersion, "version 2"},
		{"version 2 with new types", replace(`"version": 1,`, `"version": 2, "pid": "a string now",`), runrecord.ErrUnsupportedVersion, "version 2"},
		{"version as string", replace(`"version": 1`, `"version": "1"`), runrecord.ErrCorrupt, "version"},
		{"wrong type", replace(`"pid": 102`, `"pid": "102"`), runrecord.ErrCorrupt, "pid"},
		{"no name", without("name"), runrecord.ErrCorrupt, "field name"},
		{"bad name", replace(`"name": "x"`, `"name": "../x"`), runrecord.ErrCorrupt, "field name"},
		{"no run_id", without("run_id"), runrecord.ErrCorrupt, "field run_id"},
		{"bad run_id", replace(`"run_id": "2026`, `"run_id": "../2026`), runrecord.ErrCorrupt, "field run_id"},
		{"no boot_id", without("boot_id"), runrecord.ErrCorrupt, "field boot_id"},
		{"no started_at", without("started_at"), runrecord.ErrCorrupt, "field started_at"},
		{"bad started_at", replace(`"started_at": "2026-01-02T03:04:05`, `"started_at": "yesterday`), runrecord.ErrCorrupt, "started_at"},
		{"no capture_mode", without("capture_mode"), runrecord.ErrCorrupt, "field capture_mode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := runrecord.Decode([]byte(tt.data))
			if !errors.Is(err, tt.wantErr) || r != nil {
				t.Fatalf("Decode = %v, %v; want %v", r, err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.say) {
				t.Errorf("error %q does not say %q", err, tt.say)
			}
		})
	}
	// Unknown fields are someone's later addition within the version.
	extra := replace(`"version": 1,`, `"version": 1, "future": {"a": [1, 2]},`)
	if _, err := runrecord.Decode([]byte(extra)); err != nil {
		t.Errorf("unknown field refused: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	files, err := filepath.Glob(filepath.Join(recordFixtures, "*.json"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no fixtures: %v", err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := runrecord.Decode(data)
		if err != nil {
			if r != nil {
				t.Fatal("record and error both returned")
			}
			if !errors.Is(err, runrecord.ErrCorrupt) && !errors.Is(err, runrecord.ErrUnsupportedVersion) {
				t.Fatalf("error %v is neither ErrCorrupt nor ErrUnsupportedVersion", err)
			}
			return
		}
		enc, err := runrecord.Encode(r)
		if err != nil {
			t.Fatalf("decoded record does not encode: %v\n%+v", err, r)
		}
		again, err := runrecord.Decode(enc)
		if err != nil {
			t.Fatalf("encoded record does not decode: %v\n%s", err, enc)
		}
		if !equalRecords(r, again) {
			t.Fatalf("round trip changed the record:\n was %+v\n now %+v", r, again)
		}
		enc2, err := runrecord.Encode(again)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("second encoding differs (%v):\n%s\n%s", err, enc, enc2)
		}
	})
}

// equalRecords is reflect.DeepEqual except that times are compared as
// instants: a decoded "+01:00" offset is a fresh *time.Location each time.
func equalRecords(a, b *runrecord.Record) bool {
	ac, bc := *a, *b
	if !ac.StartedAt.Equal(bc.StartedAt) || !equalTimePtr(ac.FinishedAt, bc.FinishedAt) {
		return false
	}
	ac.StartedAt, bc.StartedAt = time.Time{}, time.Time{}
	ac.FinishedAt, bc.FinishedAt = nil, nil
	if (ac.Exit == nil) != (bc.Exit == nil) {
		return false
	}
	if ac.Exit != nil {
		ae, be := *ac.Exit, *bc.Exit
		if !ae.At.Equal(be.At) {
			return false
		}
		ae.At, be.At = time.Time{}, time.Time{}
		ac.Exit, bc.Exit = &ae, &be
	}
	return reflect.DeepEqual(ac, bc)
}

func equalTimePtr(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// BenchmarkDecode compares the fast path, which Encode's output takes, with
// the encoding/json fallback, which a hand-edited record (here: one key in
// another case) takes.
func BenchmarkDecode(b *testing.B) {
	data, err := runrecord.Encode(sample("bench", time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)))
	if err != nil {
		b.Fatal(err)
	}
	slow := bytes.Replace(data, []byte(`"cwd"`), []byte(`"Cwd"`), 1)
	for _, bc := range []struct {
		name string
		data []byte
	}{{"fast", data}, {"fallback", slow}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.data)))
			benchCPU(b, func() {
				if _, err := runrecord.Decode(bc.data); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}
