package capture

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	return b
}

// feed writes data into a new pipe from a goroutine and returns its read end.
func feed(t *testing.T, data []byte) *os.File {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		// Odd write sizes, so a read sees partial pipe contents.
		for off := 0; off < len(data); {
			n := min(len(data)-off, 70001)
			w.Write(data[off : off+n])
			off += n
		}
		w.Close()
	}()
	return r
}

func TestReadFromCopiesExactly(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mode    Mode
		secrets [][]byte
		max     int64
		n       int
	}{
		{"combined", Combined, nil, 0, 5<<20 + 17},
		{"combined capped", Combined, nil, 1<<20 + 3, 3 << 20},
		{"combined with secrets", Combined, [][]byte{[]byte("zzz-no-match")}, 0, 1<<20 + 5},
		{"framed", Framed, nil, 0, 1<<20 + 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "log")
			l, err := Create(path, tc.mode, Options{MaxBytes: tc.max, Secrets: tc.secrets})
			if err != nil {
				t.Fatal(err)
			}
			data := pattern(tc.n)
			r := feed(t, data)
			n, err := l.Stdout().(io.ReaderFrom).ReadFrom(r)
			r.Close()
			if err != nil || n != int64(tc.n) {
				t.Fatalf("ReadFrom = %d, %v; want %d, nil", n, err, tc.n)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			st := l.Status()
			if tc.mode == Framed {
				if st.Bytes != int64(len(got)) || st.Err != nil {
					t.Fatalf("status %+v, file %d bytes", st, len(got))
				}
				return
			}
			want := data
			if tc.max > 0 {
				want = data[:tc.max]
				if !st.Capped || st.Dropped != int64(tc.n)-tc.max {
					t.Errorf("status %+v: want capped with %d dropped", st, int64(tc.n)-tc.max)
				}
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("log has %d bytes, want %d (equal prefix: %v)", len(got), len(want), bytes.HasPrefix(want, got))
			}
			if st.Bytes != int64(len(want)) {
				t.Errorf("Status.Bytes = %d, want %d", st.Bytes, len(want))
			}
		})
	}
}
