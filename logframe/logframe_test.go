package logframe_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agent-box/agent-box/logframe"
)

const fixtures = "../testdata/fixtures/logframe"

// rec is a Frame with its payload copied out of the Demuxer's buffer.
type rec struct {
	Stream  logframe.Stream
	Payload string
	Offset  int64
	Len     int
}

// result is everything a Demuxer reports after some input.
type result struct {
	Frames  []rec
	Err     string
	Offset  int64
	Pending int // only compared when Err is empty: a spent Demuxer's buffer is unspecified
}

// demux feeds chunks to a fresh Demuxer at base and records what it reports.
func demux(base int64, chunks ...[]byte) result {
	d := logframe.NewDemuxer(base)
	var r result
	for _, c := range chunks {
		err := d.Feed(c, func(f logframe.Frame) error {
			r.Frames = append(r.Frames, rec{f.Stream, string(f.Payload), f.Offset, f.Len})
			return nil
		})
		if err != nil {
			r.Err = err.Error()
			break
		}
	}
	r.Offset = d.Offset()
	if r.Err == "" {
		r.Pending = d.Pending()
	}
	return r
}

func TestStreamNames(t *testing.T) {
	tests := []struct {
		s          logframe.Stream
		wire, name string
		valid      bool
	}{
		{logframe.Stdout, "1", "stdout", true},
		{logframe.Stderr, "2", "stderr", true},
		{0, "Stream(0)", "stream0", false},
		{3, "Stream(3)", "stream3", false},
	}
	for _, tt := range tests {
		if got := tt.s.String(); got != tt.wire {
			t.Errorf("Stream(%d).String() = %q, want %q", tt.s, got, tt.wire)
		}
		if got := tt.s.Name(); got != tt.name {
			t.Errorf("Stream(%d).Name() = %q, want %q", tt.s, got, tt.name)
		}
		if got := tt.s.Valid(); got != tt.valid {
			t.Errorf("Stream(%d).Valid() = %v, want %v", tt.s, got, tt.valid)
		}
	}
}

func TestMaxLine(t *testing.T) {
	full := logframe.AppendFrames(nil, logframe.Stdout, make([]byte, logframe.MaxPayload))
	if len(full) != logframe.MaxLine {
		t.Fatalf("frame of MaxPayload bytes is %d bytes, MaxLine is %d", len(full), logframe.MaxLine)
	}
}

func TestAppendFramesWire(t *testing.T) {
	tests := []struct {
		s    logframe.Stream
		p    string
		want string
	}{
		{logframe.Stdout, "", ""},
		{logframe.Stdout, "hi", "1 aGk=\n"},
		{logframe.Stderr, "hi\n", "2 aGkK\n"},
		{logframe.Stdout, "\x00\xff", "1 AP8=\n"},
	}
	for _, tt := range tests {
		got := string(logframe.AppendFrames([]byte("prefix|"), tt.s, []byte(tt.p)))
		if want := "prefix|" + tt.want; got != want {
			t.Errorf("AppendFrames(%v, %q) = %q, want %q", tt.s, tt.p, got, want)
		}
	}
}

// stdFrames is the reference encoder: AppendFrames spelled with encoding/base64.
func stdFrames(s logframe.Stream, p []byte) []byte {
	var out []byte
	for len(p) > 0 {
		c := p[:min(len(p), logframe.MaxPayload)]
		p = p[len(c):]
		out = append(out, s.String()+" "+base64.StdEncoding.EncodeToString(c)+"\n"...)
	}
	return out
}

// TestAppendFramesMatchesStdlib covers every tail length of the table-driven
// encoder and both ends of its 12-byte loop.
func TestAppendFramesMatchesStdlib(t *testing.T) {
	for n := 0; n < 100; n++ {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(i*131 + n*7)
		}
		if got, want := logframe.AppendFrames(nil, logframe.Stdout, p), stdFrames(logframe.Stdout, p); !bytes.Equal(got, want) {
			t.Errorf("n=%d:\n got %q\nwant %q", n, got, want)
		}
	}
}

func TestAppendFramesSplitsAtMaxPayload(t *testing.T) {
	for _, n := range []int{1, 2, 3, logframe.MaxPayload - 1, logframe.MaxPayload, logframe.MaxPayload + 1, 3*logframe.MaxPayload + 7} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			p := make([]byte, n)
			for i := range p {
				p[i] = byte(i * 7)
			}
			enc := logframe.AppendFrames(nil, logframe.Stderr, p)
			if len(enc) != logframe.EncodedLen(n) {
				t.Errorf("len = %d, EncodedLen(%d) = %d", len(enc), n, logframe.EncodedLen(n))
			}
			lines := bytes.SplitAfter(enc, []byte("\n"))
			lines = lines[:len(lines)-1] // SplitAfter leaves an empty tail
			wantFrames := (n + logframe.MaxPayload - 1) / logframe.MaxPayload
			if len(lines) != wantFrames {
				t.Fatalf("%d frames, want %d", len(lines), wantFrames)
			}
			var got []byte
			for i, line := range lines {
				if len(line) > logframe.MaxLine {
					t.Errorf("frame %d is %d bytes, longer than MaxLine", i, len(line))
				}
				s, payload, err := logframe.ParseLine(nil, line)
				if err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
				if s != logframe.Stderr {
					t.Errorf("frame %d: stream %v", i, s)
				}
				if i < len(lines)-1 && len(payload) != logframe.MaxPayload {
					t.Errorf("frame %d carries %d bytes; only the last may be short", i, len(payload))
				}
				got = append(got, payload...)
			}
			if !bytes.Equal(got, p) {
				t.Error("payloads do not reassemble the input")
			}
		})
	}
}

func TestAppendFramesInvalidStreamPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("AppendFrames with stream 3 did not panic")
		}
	}()
	logframe.AppendFrames(nil, 3, []byte("x"))
}

func TestParseLine(t *testing.T) {
	tooLong := "1 " + strings.Repeat("A", logframe.MaxLine-2)
	longest := string(logframe.AppendFrames(nil, logframe.Stdout, bytes.Repeat([]byte{'x'}, logframe.MaxPayload)))
	tests := []struct {
		name   string
		line   string
		stream logframe.Stream
		want   string
		reason string // non-empty: must fail, error mentions it
	}{
		{name: "stdout with newline", line: "1 aGk=\n", stream: logframe.Stdout, want: "hi"},
		{name: "stderr without newline", line: "2 aGk=", stream: logframe.Stderr, want: "hi"},
		{name: "no padding needed", line: "1 aGkK", stream: logframe.Stdout, want: "hi\n"},
		{name: "longest", line: longest, stream: logframe.Stdout, want: strings.Repeat("x", logframe.MaxPayload)},
		{name: "empty line", line: "", reason: "empty line"},
		{name: "just newline", line: "\n", reason: "empty line"},
		{name: "empty payload", line: "1 \n", reason: "empty payload"},
		{name: "empty payload no newline", line: "1 ", reason: "empty payload"},
		{name: "stream only", line: "1", reason: "no space"},
		{name: "stream 0", line: "0 aGk=", reason: `unknown stream "0"`},
		{name: "stream 3", line: "3 aGk=", reason: `unknown stream "3"`},
		{name: "stream 12", line: "12 aGk=", reason: "no space"},
		{name: "two spaces", line: "1  aGk=", reason: "invalid base64 at byte 2"},
		{name: "tab separator", line: "1\taGk=", reason: "no space"},
		{name: "leading space", line: " 1 aGk=", reason: "unknown stream"},
		{name: "trailing space", line: "1 aGk= ", reason: "invalid base64"},
		{name: "missing padding", line: "1 aGk", reason: "invalid base64"},
		{name: "extra padding", line: "1 aGk==", reason: "invalid base64"},
		{name: "padding only", line: "1 ====", reason: "invalid base64"},
		{name: "non-canonical trailing bits", line: "1 aGl=", reason: "invalid base64"},
		{name: "url alphabet", line: "1 _-8=", reason: "invalid base64"},
		{name: "CRLF", line: "1 aGk=\r\n", reason: "carriage return at byte 6"},
		{name: "CR inside", line: "1 aG\rk=", reason: "carriage return at byte 4"},
		{name: "LF inside", line: "1 aG\nk=\n", reason: "newline at byte 4"},
		{name: "two newlines", line: "1 aGk=\n\n", reason: "newline"},
		{name: "whitespace inside", line: "1 aG k=", reason: "invalid base64"},
		{name: "too long", line: tooLong, reason: "longer than MaxLine"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := []byte("keep")
			s, out, err := logframe.ParseLine(dst, []byte(tt.line))
			if tt.reason != "" {
				if err == nil {
					t.Fatalf("ParseLine(%q) = %v %q, want error", tt.line, s, out)
				}
				if !errors.Is(err, logframe.ErrMalformed) {
					t.Errorf("error %v does not wrap ErrMalformed", err)
				}
				if !strings.Contains(err.Error(), tt.reason) {
					t.Errorf("error %q does not mention %q", err, tt.reason)
				}
				if string(out) != "keep" {
					t.Errorf("failed ParseLine returned dst %q, want it untouched", out)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseLine(%q): %v", tt.line, err)
			}
			if s != tt.stream || string(out) != "keep"+tt.want {
				t.Errorf("ParseLine(%q) = %v %q, want %v %q", tt.line, s, out, tt.stream, "keep"+tt.want)
			}
		})
	}
}

// sample builds a framed log with both streams, a binary payload, a UTF-8
// payload and frames of several base64 padding lengths.
func sample() []byte {
	var b []byte
	b = logframe.AppendFrames(b, logframe.Stdout, []byte("hello\n"))
	b = logframe.AppendFrames(b, logframe.Stderr, []byte{0, 1, 2, 0xff})
	b = logframe.AppendFrames(b, logframe.Stdout, []byte("héllo ✓\n"))
	b = logframe.AppendFrames(b, logframe.Stderr, []byte("ab"))
	b = logframe.AppendFrames(b, logframe.Stdout, []byte("abc"))
	b = logframe.AppendFrames(b, logframe.Stdout, []byte("x"))
	return b
}

func TestDemuxFrames(t *testing.T) {
	log := sample()
	got := demux(1000, log)
	want := []rec{
		{logframe.Stdout, "hello\n", 1000, 11},
		{logframe.Stderr, "\x00\x01\x02\xff", 1011, 11},
		{logframe.Stdout, "héllo ✓\n", 1022, 19},
		{logframe.Stderr, "ab", 1041, 7},
		{logframe.Stdout, "abc", 1048, 7},
		{logframe.Stdout, "x", 1055, 7},
	}
	if got.Err != "" {
		t.Fatal(got.Err)
	}
	if !reflect.DeepEqual(got.Frames, want) {
		t.Errorf("frames:\n got %+v\nwant %+v", got.Frames, want)
	}
	if got.Offset != 1000+int64(len(log)) || got.Pending != 0 {
		t.Errorf("Offset, Pending = %d, %d; want %d, 0", got.Offset, got.Pending, 1000+len(log))
	}
	for _, f := range got.Frames {
		if line := log[f.Offset-1000 : f.Offset-1000+int64(f.Len)]; line[len(line)-1] != '\n' {
			t.Errorf("frame at %d: Offset/Len do not span a line: %q", f.Offset, line)
		}
	}
}

// TestDemuxSplitAnywhere feeds the same log cut at every one and every two
// points: the frames, offsets and pending count must not depend on the cuts.
func TestDemuxSplitAnywhere(t *testing.T) {
	// A trailing partial line checks that Pending is cut-independent too.
	log := append(sample(), "2 aGVsbG"...)
	want := demux(7, log)
	if want.Err != "" || want.Pending != 8 {
		t.Fatalf("one-shot: err %q, pending %d", want.Err, want.Pending)
	}
	for i := 0; i <= len(log); i++ {
		if got := demux(7, log[:i], log[i:]); !reflect.DeepEqual(got, want) {
			t.Fatalf("cut at %d:\n got %+v\nwant %+v", i, got, want)
		}
		for j := i; j <= len(log); j++ {
			if got := demux(7, log[:i], log[i:j], log[j:]); !reflect.DeepEqual(got, want) {
				t.Fatalf("cuts at %d, %d:\n got %+v\nwant %+v", i, j, got, want)
			}
		}
	}
	var bytewise [][]byte
	for i := range log {
		bytewise = append(bytewise, log[i:i+1])
	}
	if got := demux(7, bytewise...); !reflect.DeepEqual(got, want) {
		t.Fatalf("byte at a time:\n got %+v\nwant %+v", got, want)
	}
}

func TestDemuxMalformed(t *testing.T) {
	good := "1 aGk=\n" // 7 bytes
	tests := []struct {
		name       string
		log        string
		wantFrames int
		wantOffset int64 // of the bad line
		reason     string
	}{
		{"bad stream first", "3 aGk=\n", 0, 0, `unknown stream "3"`},
		{"bad stream after frames", good + good + "3 aGk=\n" + good, 2, 14, `unknown stream "3"`},
		{"empty payload", good + "1 \n", 1, 7, "empty payload"},
		{"blank line", good + "\n" + good, 1, 7, "empty line"},
		{"missing padding", good + "2 aGk\n", 1, 7, "invalid base64"},
		{"non-canonical bits", good + "2 aGl=\n", 1, 7, "invalid base64"},
		{"CRLF", good + "1 aGk=\r\n", 1, 7, "carriage return"},
		{"no space", good + "1aGk=\n", 1, 7, "no space"},
		{"two spaces", good + "1  aGk=\n", 1, 7, "invalid base64"},
		{"complete line too long", good + "1 " + strings.Repeat("A", logframe.MaxLine) + "\n", 1, 7, "longer than MaxLine"},
		{"partial line too long", good + "1 " + strings.Repeat("A", logframe.MaxLine), 1, 7, "longer than MaxLine"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := logframe.NewDemuxer(0)
			frames := 0
			err := d.Feed([]byte(tt.log), func(logframe.Frame) error { frames++; return nil })
			var se *logframe.SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Feed = %v, want *SyntaxError", err)
			}
			if !errors.Is(err, logframe.ErrMalformed) {
				t.Errorf("%v does not wrap ErrMalformed", err)
			}
			if se.Offset != tt.wantOffset || !strings.Contains(se.Reason, tt.reason) {
				t.Errorf("SyntaxError{%d, %q}, want offset %d, reason containing %q", se.Offset, se.Reason, tt.wantOffset, tt.reason)
			}
			if frames != tt.wantFrames {
				t.Errorf("%d frames before the error, want %d", frames, tt.wantFrames)
			}
			if d.Offset() != tt.wantOffset {
				t.Errorf("Offset() = %d, want the bad line's start %d", d.Offset(), tt.wantOffset)
			}
			// Spent: the same error again, and nothing more is emitted.
			err2 := d.Feed([]byte(good), func(logframe.Frame) error { frames++; return nil })
			if err2 != err || frames != tt.wantFrames {
				t.Errorf("Feed after error = %v (%d frames), want the same error and no frame", err2, frames)
			}
		})
	}
}

// TestDemuxBoundedMemory checks that an unterminated line is buffered up to
// MaxLine-1 bytes and rejected at the byte that makes it too long.
func TestDemuxBoundedMemory(t *testing.T) {
	d := logframe.NewDemuxer(5)
	noFrame := func(f logframe.Frame) error { t.Errorf("unexpected frame %+v", f); return nil }
	chunk := bytes.Repeat([]byte("A"), 1000)
	fed := 0
	for fed+len(chunk) <= logframe.MaxLine-1 {
		if err := d.Feed(chunk, noFrame); err != nil {
			t.Fatalf("after %d bytes: %v", fed, err)
		}
		fed += len(chunk)
	}
	rest := logframe.MaxLine - 1 - fed
	if err := d.Feed(chunk[:rest], noFrame); err != nil {
		t.Fatalf("at MaxLine-1 bytes: %v", err)
	}
	if d.Pending() != logframe.MaxLine-1 {
		t.Fatalf("Pending = %d, want %d", d.Pending(), logframe.MaxLine-1)
	}
	err := d.Feed([]byte("A"), noFrame)
	var se *logframe.SyntaxError
	if !errors.As(err, &se) || se.Offset != 5 {
		t.Fatalf("Feed of byte MaxLine = %v, want SyntaxError at 5", err)
	}
	if d.Pending() > logframe.MaxLine-1 {
		t.Errorf("Pending = %d after the error", d.Pending())
	}
}

func TestDemuxEmitError(t *testing.T) {
	log := sample()
	stop := errors.New("stop")
	d := logframe.NewDemuxer(100)
	var seen []int64
	err := d.Feed(log, func(f logframe.Frame) error {
		seen = append(seen, f.Offset)
		if len(seen) == 3 {
			return stop
		}
		return nil
	})
	if err != stop {
		t.Fatalf("Feed = %v, want emit's error as is", err)
	}
	if len(seen) != 3 {
		t.Fatalf("emit called %d times, want 3", len(seen))
	}
	// The refused frame is not consumed: resuming at Offset re-reads it.
	if d.Offset() != seen[2] {
		t.Errorf("Offset = %d, want the refused frame's start %d", d.Offset(), seen[2])
	}
	if err := d.Feed([]byte("1 aGk=\n"), func(logframe.Frame) error { t.Error("spent Demuxer emitted"); return nil }); err != stop {
		t.Errorf("Feed after emit error = %v, want the same error", err)
	}
	resumed := demux(d.Offset(), log[d.Offset()-100:])
	if resumed.Err != "" || len(resumed.Frames) != 4 || resumed.Frames[0].Offset != seen[2] {
		t.Errorf("resume at Offset: %+v", resumed)
	}
}

// perStream decodes a log and concatenates the payloads of each stream.
func perStream(t testing.TB, log []byte) (stdout, stderr []byte, err error) {
	d := logframe.NewDemuxer(0)
	err = d.Feed(log, func(f logframe.Frame) error {
		switch f.Stream {
		case logframe.Stdout:
			stdout = append(stdout, f.Payload...)
		case logframe.Stderr:
			stderr = append(stderr, f.Payload...)
		default:
			t.Fatalf("frame with stream %v", f.Stream)
		}
		return nil
	})
	if err == nil && d.Pending() != 0 {
		err = fmt.Errorf("%d bytes of partial line", d.Pending())
	}
	return stdout, stderr, err
}

func TestFixtures(t *testing.T) {
	tests := []struct {
		file       string
		golden     bool  // .stdout and .stderr hold the decoded streams
		errOffset  int64 // -1: no error expected
		pendingMin int
	}{
		{"sample.frames", true, -1, 0},
		{"stderr-only.frames", true, -1, 0},
		{"truncated.frames", false, -1, 1},
		{"bad-stream.frames", false, 11, 0},
		{"bad-padding.frames", false, 11, 0},
		{"empty-payload.frames", false, 11, 0},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			log, err := os.ReadFile(filepath.Join(fixtures, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			d := logframe.NewDemuxer(0)
			var stdout, stderr []byte
			err = d.Feed(log, func(f logframe.Frame) error {
				if f.Stream == logframe.Stdout {
					stdout = append(stdout, f.Payload...)
				} else {
					stderr = append(stderr, f.Payload...)
				}
				return nil
			})
			if tt.errOffset >= 0 {
				var se *logframe.SyntaxError
				if !errors.As(err, &se) || se.Offset != tt.errOffset {
					t.Fatalf("Feed = %v, want SyntaxError at %d", err, tt.errOffset)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Pending() < tt.pendingMin || (tt.pendingMin == 0 && d.Pending() != 0) {
				t.Errorf("Pending = %d", d.Pending())
			}
			if !tt.golden {
				return
			}
			base := strings.TrimSuffix(tt.file, ".frames")
			for _, g := range []struct {
				ext string
				got []byte
			}{{".stdout", stdout}, {".stderr", stderr}} {
				want, err := os.ReadFile(filepath.Join(fixtures, base+g.ext))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(g.got, want) {
					t.Errorf("%s:\n got %q\nwant %q", g.ext, g.got, want)
				}
			}
		})
	}
}

// fixtureFiles returns the contents of every fixture with one of exts.
func fixtureFiles(f *testing.F, exts ...string) map[string][]byte {
	entries, err := os.ReadDir(fixtures)
	if err != nil {
		f.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		for _, ext := range exts {
			if strings.HasSuffix(e.Name(), ext) {
				b, err := os.ReadFile(filepath.Join(fixtures, e.Name()))
				if err != nil {
					f.Fatal(err)
				}
				out[e.Name()] = b
			}
		}
	}
	if len(out) == 0 {
		f.Fatalf("no fixtures %v in %s", exts, fixtures)
	}
	return out
}

// chunk cuts data into pieces whose lengths cycle through cuts (each byte
// plus one), so a fuzzer controls the chunking with a second input.
func chunk(data, cuts []byte) [][]byte {
	if len(cuts) == 0 {
		return [][]byte{data}
	}
	var out [][]byte
	for i := 0; len(data) > 0; i++ {
		n := min(len(data), int(cuts[i%len(cuts)])+1)
		out = append(out, data[:n])
		data = data[n:]
	}
	return out
}

func FuzzDemux(f *testing.F) {
	for _, b := range fixtureFiles(f, ".frames") {
		f.Add(b, []byte{0})
		f.Add(b, []byte{3, 17, 250})
	}
	f.Fuzz(func(t *testing.T, data, cuts []byte) {
		want := demux(0, data)
		got := demux(0, chunk(data, cuts)...)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("chunked != one-shot:\n got %+v\nwant %+v", got, want)
		}
		// Every emitted frame is its own line of the input, in its one
		// canonical spelling, and frames tile the input from its start.
		next := int64(0)
		for _, fr := range want.Frames {
			if fr.Offset != next {
				t.Fatalf("frame at %d, want %d", fr.Offset, next)
			}
			line := data[fr.Offset : fr.Offset+int64(fr.Len)]
			if re := logframe.AppendFrames(nil, fr.Stream, []byte(fr.Payload)); !bytes.Equal(re, line) {
				t.Fatalf("frame %q re-encodes as %q", line, re)
			}
			next += int64(fr.Len)
		}
		if want.Offset != next {
			t.Fatalf("Offset %d, frames end at %d", want.Offset, next)
		}
		if want.Err == "" && int64(want.Pending) != int64(len(data))-next {
			t.Fatalf("Pending %d, %d bytes after the last frame", want.Pending, int64(len(data))-next)
		}
	})
}

func FuzzRoundTrip(f *testing.F) {
	files := fixtureFiles(f, ".stdout", ".stderr")
	for name, b := range files {
		if base, ok := strings.CutSuffix(name, ".stdout"); ok {
			f.Add(b, files[base+".stderr"], []byte{5, 1, 200})
		}
	}
	// Splitting at MaxPayload is covered by TestAppendFramesSplitsAtMaxPayload;
	// a 48 KiB seed would only slow the fuzzer down.
	f.Fuzz(func(t *testing.T, stdout, stderr, pattern []byte) {
		// Interleave writes of both streams, sized by pattern.
		var log []byte
		o, e := stdout, stderr
		for i := 0; len(o) > 0 || len(e) > 0; i++ {
			n := 1
			if len(pattern) > 0 {
				n = 1 + int(pattern[i%len(pattern)])*37
			}
			if i%2 == 0 {
				n = min(n, len(o))
				log = logframe.AppendFrames(log, logframe.Stdout, o[:n])
				o = o[n:]
			} else {
				n = min(n, len(e))
				log = logframe.AppendFrames(log, logframe.Stderr, e[:n])
				e = e[n:]
			}
		}
		if got, want := logframe.AppendFrames(nil, logframe.Stdout, stdout), stdFrames(logframe.Stdout, stdout); !bytes.Equal(got, want) {
			t.Fatalf("AppendFrames(%q) = %q, encoding/base64 gives %q", stdout, got, want)
		}
		gotOut, gotErr, err := perStream(t, log)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(gotOut, stdout) || !bytes.Equal(gotErr, stderr) {
			t.Fatalf("round trip changed the streams:\nstdout %q -> %q\nstderr %q -> %q", stdout, gotOut, stderr, gotErr)
		}
	})
}

func FuzzParseLine(f *testing.F) {
	for _, b := range fixtureFiles(f, ".frames") {
		for _, line := range bytes.SplitAfter(b, []byte("\n")) {
			f.Add(line)
		}
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		s, payload, err := logframe.ParseLine(nil, line)
		if err != nil {
			if !errors.Is(err, logframe.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		// Strictness: an accepted line is exactly what the encoder writes.
		want := logframe.AppendFrames(nil, s, payload)
		if got := append(bytes.TrimSuffix(line, []byte("\n")), '\n'); !bytes.Equal(got, want) {
			t.Fatalf("accepted %q, encoder writes %q", line, want)
		}
	})
}

func BenchmarkAppendFrames(b *testing.B) {
	p := make([]byte, 1<<20)
	buf := logframe.AppendFrames(nil, logframe.Stdout, p)
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		buf = logframe.AppendFrames(buf[:0], logframe.Stdout, p)
	}
}

func BenchmarkDemux(b *testing.B) {
	log := logframe.AppendFrames(nil, logframe.Stdout, make([]byte, 1<<20))
	b.SetBytes(1 << 20)
	for b.Loop() {
		d := logframe.NewDemuxer(0)
		if err := d.Feed(log, func(logframe.Frame) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}
