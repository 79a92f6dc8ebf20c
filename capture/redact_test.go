package capture_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agent-box/agent-box/capture"
)

const fixtures = "../testdata/fixtures/capture"

// naive is the reference redaction, by definition: mark every byte of every
// occurrence of every secret, then replace each maximal marked run by one
// Mask. It also returns the unmarked runs, which are what the input shows.
func naive(secrets [][]byte, in []byte) (out []byte, raw [][]byte) {
	marked := make([]bool, len(in))
	for _, s := range secrets {
		if len(s) == 0 {
			continue
		}
		for i := 0; i+len(s) <= len(in); i++ {
			if bytes.Equal(in[i:i+len(s)], s) {
				for j := range s {
					marked[i+j] = true
				}
			}
		}
	}
	out = []byte{}
	for i := 0; i < len(in); {
		j := i
		for j < len(in) && marked[j] == marked[i] {
			j++
		}
		if marked[i] {
			out = append(out, capture.Mask...)
		} else {
			out = append(out, in[i:j]...)
			raw = append(raw, in[i:j])
		}
		i = j
	}
	return out, raw
}

// redactChunks runs a fresh Redactor over chunks and flushes it.
func redactChunks(secrets [][]byte, chunks ...[]byte) []byte {
	r := capture.NewRedactor(secrets)
	out := []byte{}
	for _, c := range chunks {
		out = r.Write(out, c)
	}
	return r.Flush(out)
}

func bs(ss ...string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

func TestRedactor(t *testing.T) {
	tests := []struct {
		name    string
		secrets []string
		in      string
		want    string
	}{
		{"no secrets", nil, "anything at all", "anything at all"},
		{"only empty secrets", []string{"", ""}, "abc", "abc"},
		{"no occurrence", []string{"hunter2"}, "hunter hunter3 unter2", "hunter hunter3 unter2"},
		{"whole input", []string{"hunter2"}, "hunter2", "[redacted]"},
		{"middle", []string{"hunter2"}, "pw=hunter2;", "pw=[redacted];"},
		{"at stream end", []string{"hunter2"}, "pw=hunter2", "pw=[redacted]"},
		{"prefix at stream end", []string{"hunter2"}, "pw=hunt", "pw=hunt"},
		{"repeated", []string{"ab"}, "ab ab", "[redacted] [redacted]"},
		{"repeated back to back", []string{"ab"}, "ababab", "[redacted]"},
		{"self-overlapping", []string{"aa"}, "aaa", "[redacted]"},
		{"overlapping", []string{"abcd", "cdef"}, "xabcdefx", "x[redacted]x"},
		{"adjacent", []string{"abcd", "cdef"}, "abcdcdef", "[redacted]"},
		{"gap of one", []string{"abcd", "cdef"}, "abcd-cdef", "[redacted]-[redacted]"},
		{"nested", []string{"abc", "b"}, "abc", "[redacted]"},
		{"nested inner alone", []string{"abc", "b"}, "ab", "a[redacted]"},
		{"nested inner then outer", []string{"abc", "b"}, "abcb", "[redacted]"},
		{"inner at start", []string{"abc", "a"}, "abx", "[redacted]bx"},
		{"duplicate secrets", []string{"xy", "xy"}, "axyb", "a[redacted]b"},
		{"bridging occurrence", []string{"aa", "cc", "abccz"}, "aabccz", "[redacted]"},
		{"bridging prefix only", []string{"aa", "cc", "abccz"}, "aabccq", "[redacted]b[redacted]q"},
		{"binary", []string{"\x00\xff"}, "\xff\x00\xff\x00", "\xff[redacted]\x00"},
		{"secret is mask text", []string{capture.Mask}, "a[redacted]b", "a[redacted]b"},
		{"secret inside mask text", []string{"dact"}, "redacted", "re[redacted]ed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			secrets := bs(tt.secrets...)
			in := []byte(tt.in)
			if got := string(redactChunks(secrets, in)); got != tt.want {
				t.Errorf("one write: %q, want %q", got, tt.want)
			}
			if got := capture.NewRedactor(secrets).String(tt.in); got != tt.want {
				t.Errorf("String: %q, want %q", got, tt.want)
			}
			if ref, _ := naive(secrets, in); string(ref) != tt.want {
				t.Errorf("the reference gives %q: the test case is wrong", ref)
			}
			// Every cut into two and into three, and byte at a time.
			for i := 0; i <= len(in); i++ {
				for j := i; j <= len(in); j++ {
					if got := string(redactChunks(secrets, in[:i], in[i:j], in[j:])); got != tt.want {
						t.Fatalf("cut at %d,%d: %q, want %q", i, j, got, tt.want)
					}
				}
			}
			var bytewise [][]byte
			for i := range in {
				bytewise = append(bytewise, in[i:i+1])
			}
			if got := string(redactChunks(secrets, bytewise...)); got != tt.want {
				t.Errorf("byte at a time: %q, want %q", got, tt.want)
			}
		})
	}
}

// TestRedactorHoldBack checks what is emitted by Write before Flush: only the
// longest tail that is a prefix of a secret (and a masked run that the next
// byte could extend) is held back.
func TestRedactorHoldBack(t *testing.T) {
	tests := []struct {
		name    string
		secrets []string
		in      string
		emitted string
		held    int64
	}{
		{"no secrets: passthrough", nil, "abcabc", "abcabc", 0},
		{"no secret bytes", []string{"xyz"}, "abcabc", "abcabc", 0},
		{"prefix of a secret", []string{"abc"}, "xxab", "xx", 2},
		{"longest such tail", []string{"abac", "bz"}, "xabab", "xab", 2},
		{"complete secret that is a prefix", []string{"abab", "ababc"}, "xabab", "x", 4},
		{"broken prefix", []string{"abc"}, "xxabx", "xxabx", 0},
		{"restarted prefix", []string{"abc"}, "ababa", "abab", 1},
		{"complete secret awaits next byte", []string{"abc"}, "xabc", "x", 3},
		{"mask out once run cannot grow", []string{"abc"}, "xabcy", "x[redacted]y", 0},
		{"run may grow: repeat", []string{"abc"}, "xabca", "x", 4},
		{"nested inner held for outer", []string{"abc", "b"}, "xab", "x", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := capture.NewRedactor(bs(tt.secrets...))
			if got := string(r.Write(nil, []byte(tt.in))); got != tt.emitted {
				t.Errorf("Write emitted %q, want %q", got, tt.emitted)
			}
			if r.Held() != tt.held {
				t.Errorf("Held = %d, want %d", r.Held(), tt.held)
			}
		})
	}
}

func TestRedactorFlushResets(t *testing.T) {
	r := capture.NewRedactor(bs("secret"))
	out := r.Write(nil, []byte("a secr"))
	out = r.Flush(out)
	if string(out) != "a secr" {
		t.Fatalf("first stream: %q", out)
	}
	// "et" must not complete the "secr" of the stream before Flush.
	out = r.Write(nil, []byte("et secret!"))
	if string(out) != "et [redacted]!" {
		t.Errorf("after Flush: %q, want a fresh stream", out)
	}
	if r.Held() != 0 {
		t.Errorf("Held = %d", r.Held())
	}
}

// TestRedactorStringIndependent checks that String neither sees nor
// disturbs the bytes a streaming Write holds back.
func TestRedactorStringIndependent(t *testing.T) {
	r := capture.NewRedactor(bs("secret"))
	out := r.Write(nil, []byte("sec"))
	if got := r.String("ret"); got != "ret" {
		t.Errorf("String saw the stream: %q", got)
	}
	out = r.Flush(r.Write(out, []byte("ret")))
	if string(out) != capture.Mask {
		t.Errorf("stream: %q", out)
	}
}

// TestRedactorLongRun checks that a masked run longer than any secret is
// not buffered: memory stays bounded on a stream of repeated secrets.
func TestRedactorLongRun(t *testing.T) {
	r := capture.NewRedactor(bs("ab"))
	chunk := bytes.Repeat([]byte("ab"), 1<<12)
	var out []byte
	for range 64 {
		out = r.Write(out, chunk)
	}
	if len(out) != 0 {
		t.Fatalf("emitted %q before the run ended", out[:min(len(out), 40)])
	}
	if r.Buffered() > len("ab") {
		t.Errorf("buffers %d bytes of a masked run", r.Buffered())
	}
	if got := string(r.Write(nil, []byte("."))); got != capture.Mask+"." {
		t.Errorf("after the run: %q, want one Mask", got)
	}
}

// fixture is a testdata/fixtures/capture/*.redact file: `secret "..."`,
// `input "..."` and `want "..."` lines of Go-quoted strings, # comments.
type fixture struct {
	name        string
	secrets     [][]byte
	input, want []byte
}

func loadFixtures(t testing.TB) []fixture {
	files, err := filepath.Glob(filepath.Join(fixtures, "*.redact"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures in %s: %v", fixtures, err)
	}
	var out []fixture
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		fx := fixture{name: filepath.Base(file)}
		for n, line := range strings.Split(string(b), "\n") {
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			key, q, ok := strings.Cut(line, " ")
			v, err := strconv.Unquote(q)
			if !ok || err != nil {
				t.Fatalf("%s:%d: want `key \"quoted\"`, got %q", file, n+1, line)
			}
			switch key {
			case "secret":
				fx.secrets = append(fx.secrets, []byte(v))
			case "input":
				fx.input = []byte(v)
			case "want":
				fx.want = []byte(v)
			default:
				t.Fatalf("%s:%d: unknown key %q", file, n+1, key)
			}
		}
		out = append(out, fx)
	}
	return out
}

func TestRedactorFixtures(t *testing.T) {
	for _, fx := range loadFixtures(t) {
		t.Run(fx.name, func(t *testing.T) {
			if got := redactChunks(fx.secrets, fx.input); !bytes.Equal(got, fx.want) {
				t.Errorf("got  %q\nwant %q", got, fx.want)
			}
			if ref, _ := naive(fx.secrets, fx.input); !bytes.Equal(ref, fx.want) {
				t.Errorf("reference gives %q: fixture is wrong", ref)
			}
			for i := 0; i <= len(fx.input); i++ {
				if got := redactChunks(fx.secrets, fx.input[:i], fx.input[i:]); !bytes.Equal(got, fx.want) {
					t.Fatalf("cut at %d: %q", i, got)
				}
			}
		})
	}
}

// checkRedaction is the fuzz property: any chunking gives the reference
// output, and no raw stretch of output contains a secret.
func checkRedaction(t *testing.T, secrets [][]byte, in []byte, chunks [][]byte) {
	t.Helper()
	want, raw := naive(secrets, in)
	r := capture.NewRedactor(secrets)
	if got := []byte(r.String(string(in))); !bytes.Equal(got, want) {
		t.Fatalf("String(%q) with secrets %q:\n got %q\nwant %q", in, secrets, got, want)
	}
	got := redactChunks(secrets, chunks...)
	if !bytes.Equal(got, want) {
		t.Fatalf("chunks %q with secrets %q:\n got %q\nwant %q", chunks, secrets, got, want)
	}
	for _, s := range secrets {
		if len(s) == 0 {
			continue
		}
		for _, part := range raw {
			if bytes.Contains(part, s) {
				t.Fatalf("secret %q survives in %q", s, part)
			}
		}
		// The Mask's own text may spell a secret; any other secret must
		// be absent from the output altogether.
		if !bytes.ContainsAny(s, capture.Mask) && bytes.Contains(got, s) {
			t.Fatalf("secret %q in output %q", s, got)
		}
	}
}

// cutsToChunks cuts data into pieces whose lengths cycle through cuts (each
// byte plus one).
func cutsToChunks(data, cuts []byte) [][]byte {
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

// packSecrets and unpackSecrets carry a secret list in one fuzz argument:
// the first byte is the separator of the rest, so that a fuzzer can put any
// byte, NUL included, into a secret.
func packSecrets(secrets [][]byte) []byte {
	for sep := range 256 {
		if !bytes.Contains(bytes.Join(secrets, nil), []byte{byte(sep)}) {
			return append([]byte{byte(sep)}, bytes.Join(secrets, []byte{byte(sep)})...)
		}
	}
	panic("secrets use every byte value")
}

func unpackSecrets(b []byte) [][]byte {
	if len(b) == 0 {
		return nil
	}
	return bytes.Split(b[1:], b[:1])
}

func FuzzRedactor(f *testing.F) {
	for _, fx := range loadFixtures(f) {
		f.Add(fx.input, packSecrets(fx.secrets), []byte{0, 2, 5})
	}
	f.Fuzz(func(t *testing.T, in, secrets, cuts []byte) {
		if len(secrets) > 512 {
			secrets = secrets[:512] // keep the naive reference quick
		}
		checkRedaction(t, unpackSecrets(secrets), in, cutsToChunks(in, cuts))
	})
}

// TestRedactorRandom is a seeded, bounded version of the fuzz property over
// small alphabets, where overlaps and nesting are common.
func TestRedactorRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	gen := func(n int, alphabet string) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return b
	}
	for i := range 3000 {
		alphabet := "ab"
		if i%3 == 0 {
			alphabet = "abc"
		}
		var secrets [][]byte
		for range 1 + rng.IntN(4) {
			secrets = append(secrets, gen(1+rng.IntN(5), alphabet))
		}
		in := gen(rng.IntN(60), alphabet+"x")
		cuts := gen(1+rng.IntN(4), "\x00\x01\x02\x03\x07")
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			checkRedaction(t, secrets, in, cutsToChunks(in, cuts))
		})
	}
}

func BenchmarkRedactor(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	word := func(n int) []byte {
		w := make([]byte, n)
		for i := range w {
			w[i] = alnum[rng.IntN(len(alnum))]
		}
		return w
	}
	var secrets [][]byte
	for range 100 {
		secrets = append(secrets, word(16+rng.IntN(32)))
	}
	// Log-like text: short alphanumeric words and newlines, a secret every
	// 64 KiB or so.
	in := make([]byte, 0, 64<<20)
	for len(in) < 64<<20 {
		if rng.IntN(8192) == 0 {
			in = append(in, secrets[rng.IntN(len(secrets))]...)
		} else {
			in = append(in, word(1+rng.IntN(10))...)
		}
		if rng.IntN(10) == 0 {
			in = append(in, '\n')
		} else {
			in = append(in, ' ')
		}
	}
	r := capture.NewRedactor(secrets)
	out := make([]byte, 0, 2<<20)
	b.SetBytes(int64(len(in)))
	b.ResetTimer()
	for b.Loop() {
		for p := in; len(p) > 0; {
			n := min(len(p), 1<<20)
			out = r.Write(out[:0], p[:n])
			p = p[n:]
		}
		out = r.Flush(out[:0])
	}
}
