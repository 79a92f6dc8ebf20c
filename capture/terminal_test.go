package capture_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/agent-box/agent-box/capture"
)

// throughTerminal writes each of writes to the slave of a new terminal
// whose output flags are oflag, and returns what its master reads: the
// bytes as the kernel's line discipline wrote them.
func throughTerminal(t *testing.T, oflag uint32, writes ...string) []byte {
	t.Helper()
	master, slave, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	tio, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	tio.Oflag = tio.Oflag&^(unix.OPOST|unix.ONLCR|unix.OCRNL|unix.ONOCR|unix.ONLRET|unix.OLCUC|unix.TABDLY) | oflag
	if err := unix.IoctlSetTermios(int(slave.Fd()), unix.TCSETS, tio); err != nil {
		t.Fatal(err)
	}
	for _, w := range writes {
		if _, err := slave.WriteString(w); err != nil {
			t.Fatal(err)
		}
	}
	// With the slave closed, the master reads what was written and
	// then EIO (drivers/tty/n_tty.c).
	slave.Close()
	var out bytes.Buffer
	buf := make([]byte, 4096)
	for {
		n, err := master.Read(buf)
		out.Write(buf[:n])
		if errors.Is(err, syscall.EIO) {
			return out.Bytes()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A secret written to a terminal is masked in whatever form the terminal's
// output processing gave it, for every combination of the flags that
// change bytes and at every column the secret may start at (a tab's
// spaces depend on it): what is left around the one Mask is only what was
// written around the secret, and blanks.
func TestTerminalRedactorMasksEveryFormTheKernelWrites(t *testing.T) {
	secrets := []string{
		"-----BEGIN KEY-----\nMIIEvQ\tIBAD\r\nbgkq-----",
		"\rcarriage-led",
		"tab\tin  the\t\tmiddle",
		"p\xc3\xa4ssw\xc3\xb6rd\xff\xdf\xbf",
		"end with line ends\n\n",
	}
	flags := []uint32{unix.ONLCR, unix.OCRNL, unix.ONOCR, unix.ONLRET, unix.OLCUC, unix.TAB3}
	flagNames := []string{"onlcr", "ocrnl", "onocr", "onlret", "olcuc", "tab3"}
	for _, secret := range secrets {
		r := capture.NewTerminalRedactor(bs(secret))
		for set := range 1 << len(flags) {
			oflag := uint32(unix.OPOST)
			var names []string
			for i, f := range flags {
				if set&(1<<i) != 0 {
					oflag |= f
					names = append(names, flagNames[i])
				}
			}
			for _, col := range []int{0, 1, 3, 7, 8, 13} {
				lead := strings.Repeat("x", col)
				out := throughTerminal(t, oflag, lead, secret, "=")
				whole := r.Flush(r.Write(nil, out))
				var bytewise []byte
				for i := range out {
					bytewise = r.Write(bytewise, out[i:i+1])
				}
				bytewise = r.Flush(bytewise)
				if !bytes.Equal(whole, bytewise) {
					t.Errorf("%q, flags %v, column %d: %q in one write, %q byte at a time", secret, names, col, whole, bytewise)
				}
				rest := strings.Replace(string(whole), capture.Mask, "", 1)
				if strings.Count(string(whole), capture.Mask) != 1 || strings.Trim(rest, "xX=\r\n\t ") != "" {
					t.Errorf("%q, flags %v, column %d: the terminal wrote %q, redacted to %q", secret, names, col, out, whole)
				}
			}
		}
	}
}

// A run of blanks or line ends is one token only up to a bound, so that a
// match in progress cannot hold back a stream of them without end.
func TestTerminalRedactorHoldsBackBoundedBlanks(t *testing.T) {
	r := capture.NewTerminalRedactor(bs("a\tb", "c\nd"))
	for _, lead := range []string{"a", "c"} {
		out := r.Write(nil, []byte(lead))
		for range 1 << 10 {
			out = r.Write(out, []byte("        \r\n"))
		}
		if r.Buffered() > 64 {
			t.Errorf("after %q: %d bytes held back", lead, r.Buffered())
		}
		out = r.Flush(out)
		if !bytes.HasPrefix(out, []byte(lead+"        \r\n")) {
			t.Errorf("after %q: %q", lead, out[:min(len(out), 40)])
		}
	}
	// A raw Redactor masks only the secret as it is.
	if got := capture.NewRedactor(bs("a\tb")).String("a b A\tB a\tb"); got != "a b A\tB [redacted]" {
		t.Errorf("raw: %q", got)
	}
	if got := capture.NewTerminalRedactor(bs("a\tb")).String("a b A\tB a\tb"); got != "[redacted] [redacted] [redacted]" {
		t.Errorf("terminal: %q", got)
	}
}

// A log of a terminal's output masks its forms of a secret across writes.
func TestTerminalLog(t *testing.T) {
	path := t.TempDir() + "/log"
	l, err := capture.Create(path, capture.Combined, capture.Options{Secrets: bs("line1\nline2"), Terminal: true})
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, l.Stdout(), "x LINE1\r")
	mustWrite(t, l.Stdout(), "\nLINE2 y")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "x [redacted] y" {
		t.Errorf("log %q", got)
	}
}

// The output of a terminal's Redactor is the same for every chunking of
// its input, over small alphabets where runs, case pairs and partial
// matches are common.
func TestTerminalRedactorRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	gen := func(n int, alphabet string) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return b
	}
	for range 3000 {
		var secrets [][]byte
		for range 1 + rng.IntN(3) {
			secrets = append(secrets, gen(1+rng.IntN(6), "ab \t\n"))
		}
		in := gen(rng.IntN(80), "abAB \t\r\nx")
		cuts := gen(1+rng.IntN(4), "\x00\x01\x02\x03\x07")
		r := capture.NewTerminalRedactor(secrets)
		want := r.String(string(in))
		var got []byte
		for _, c := range cutsToChunks(in, cuts) {
			got = r.Write(got, c)
		}
		if got = r.Flush(got); string(got) != want {
			t.Fatalf("secrets %q, input %q: %q in chunks %v, %q at once", secrets, in, got, cuts, want)
		}
	}
}
