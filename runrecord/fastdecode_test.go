package runrecord_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agent-box/agent-box/runrecord"
)

// TestFastDecodeTakesEncoded checks that what Encode writes takes the fast
// path, including strings that encoding/json escapes, so the fallback is
// for hand-edited or foreign files only.
func TestFastDecodeTakesEncoded(t *testing.T) {
	nasty := []string{
		"",
		`a && b > c < d`,
		`"quoted" \back\slash\ /slash/`,
		"tab\tnewline\ncr\rnul\x00bell\x07",
		"é ü 日本 😀",
		"\u2028\u2029",
		strings.Repeat("x", 5000),
	}
	for _, s := range nasty {
		r := sample("fast", time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("", -7*3600)))
		r.Command = s
		r.Argv = []string{s, ""}
		r.Env = map[string]string{s: s, "k": ""}
		r.LogError = s
		r.Ready = &runrecord.ReadyProbe{Log: s, TCPPort: 8080, HTTP: s}
		r.ReadyTimeoutS = new(int64(45))
		r.TimeoutS = -1 // not meaningful, but an int is an int
		r.SupervisorStartTime = 1<<64 - 1
		r.LogBytes = 1<<63 - 1
		r.LogDropped = -1 << 63
		data, err := runrecord.Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := runrecord.FastDecode(data)
		if !ok {
			t.Errorf("fast path refused Encode's output for %q:\n%s", s, data)
			continue
		}
		if !equalRecords(got, r) {
			t.Errorf("fast path decoded %q as\n%+v\nwant\n%+v", s, got, r)
		}
	}
	// Empty collections are non-nil after decoding, as with encoding/json.
	got, ok := runrecord.FastDecode([]byte(`{"argv": [], "env": {}, "exit": {}}`))
	if !ok || got.Argv == nil || got.Env == nil || got.Exit == nil {
		t.Errorf("empty collections: %+v, %v", got, ok)
	}
}

// TestFastDecodeFallsBack lists inputs the fast path must leave to
// encoding/json, because their meaning there is subtle.
func TestFastDecodeFallsBack(t *testing.T) {
	for _, in := range []string{
		`{"Name": "x"}`,                     // case-insensitive match
		`{"ſtdin": "x"}`,                    // Unicode folding matches "stdin"
		`{"name": "a", "name": "b"}`,        // duplicate
		`{"exit": {"code": 1}, "exit": {}}`, // duplicate merges in encoding/json
		`{"name": null}`,
		`{"pid": 1.0}`,
		`{"pid": 1e3}`,
		`{"pid": 01}`,
		`{"pid": 99999999999999999999}`,
		`{"pid_start_time": -1}`,
		`{"pid_start_time": -0}`,
		`{"name": "bad utf8 \xff"}`,
		`{"name": "lone surrogate \ud800"}`,
		`{"name": "tab	inside"}`,
		`{"na\u006de": "escaped key"}`,
		`{"started_at": "2026-01-02T03:04:05\u005a"}`,
		`{"version": 1} x`,
		`{"unknown": [1, 2, {"a": tru}]}`,
		`{"unknown": ` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`,
		`{"version": 1,}`,
		// A key it does not know, valid JSON: a field of a later build,
		// or one added to Record without a case here.
		`{"version": 1, "later_field": "x"}`,
		`{"exit": {"code": 1, "later_field": 2}}`,
	} {
		if r, ok := runrecord.FastDecode([]byte(in)); ok {
			t.Errorf("fast path decoded %s as %+v; it should leave it to encoding/json", in, r)
		}
	}
}

// FuzzFastDecode is the differential test: whenever the fast path decodes
// an input, encoding/json must decode it to the same record.
func FuzzFastDecode(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(recordFixtures, "*.json"))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	data, err := runrecord.Encode(sample("fuzz", time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte(`{"env": {"a\u00e9\ud83d\ude00": "\"\\\/\b\f\n\r\t"}, "unknown": [1.5e-3, -0, true, false, null, {"x": "\u0041"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		fast, ok := runrecord.FastDecode(data)
		if !ok {
			return
		}
		var slow runrecord.Record
		if err := json.Unmarshal(data, &slow); err != nil {
			t.Fatalf("fast path accepted what encoding/json refuses (%v): %q", err, data)
		}
		if !equalRecords(fast, &slow) || !sameZones(fast, &slow) {
			t.Fatalf("fast path and encoding/json disagree on %q:\nfast %+v\njson %+v", data, fast, &slow)
		}
	})
}

func sameZones(a, b *runrecord.Record) bool {
	_, ao := a.StartedAt.Zone()
	_, bo := b.StartedAt.Zone()
	return ao == bo
}

// TestFastDecodeKnowsEveryField: a field added to Record or Exit without a
// case in the fast decoder must not be dropped on read. The fast path
// leaves a record with a key it does not know to encoding/json; this test
// sets each field alone, by reflection, and requires the fast path to take
// it and agree with encoding/json, so the new field gets its case too.
func TestFastDecodeKnowsEveryField(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	var fill func(v reflect.Value)
	fill = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.String:
			v.SetString("x")
		case reflect.Int, reflect.Int64:
			v.SetInt(7)
		case reflect.Uint64:
			v.SetUint(7)
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Slice:
			v.Set(reflect.ValueOf([]string{"a", "b"}))
		case reflect.Map:
			v.Set(reflect.ValueOf(map[string]string{"k": "v"}))
		case reflect.Pointer:
			v.Set(reflect.New(v.Type().Elem()))
			fill(v.Elem())
		case reflect.Struct:
			if v.Type() == reflect.TypeOf(at) {
				v.Set(reflect.ValueOf(at))
				return
			}
			for i := range v.NumField() {
				fill(v.Field(i))
			}
		default:
			t.Fatalf("field kind %s: teach this test to fill it", v.Kind())
		}
	}
	check := func(field string, tag string, r *runrecord.Record) {
		t.Helper()
		data, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := runrecord.FastDecode(data)
		if !ok {
			t.Errorf("%s (%s): the fast decoder does not read it; add its case", field, tag)
			return
		}
		var want runrecord.Record
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, &want) {
			t.Errorf("%s: fast decoder read %+v, encoding/json %+v", field, got, &want)
		}
	}
	rt := reflect.TypeOf(runrecord.Record{})
	for i := range rt.NumField() {
		var r runrecord.Record
		fill(reflect.ValueOf(&r).Elem().Field(i))
		check("Record."+rt.Field(i).Name, rt.Field(i).Tag.Get("json"), &r)
	}
	et := reflect.TypeOf(runrecord.Exit{})
	for i := range et.NumField() {
		r := runrecord.Record{Exit: new(runrecord.Exit)}
		fill(reflect.ValueOf(r.Exit).Elem().Field(i))
		check("Exit."+et.Field(i).Name, et.Field(i).Tag.Get("json"), &r)
	}
}
