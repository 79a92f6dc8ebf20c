package proc

import (
	"errors"
	"net"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A /proc/net/tcp6 table as Linux prints it: a listener on [::]:8080
// (inode 4242), one on 127.0.0.1-style v4-mapped 8080 that is connected
// (state 01, not a listener), and a listener on port 22.
const tcp6Table = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0
   1: 0000000000000000FFFF00000100007F:1F90 0000000000000000FFFF00000100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 4343 1 0000000000000000 20 4 30 10 -1
   2: 00000000000000000000000000000000:0016 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 17 1 0000000000000000 100 0 0 10 0
`

func TestParseTCPListeners(t *testing.T) {
	got, err := ParseTCPListeners([]byte(tcp6Table), 8080)
	require.NoError(t, err)
	assert.Equal(t, []uint64{4242}, got, "the listener, not the connection on the same port")
	got, err = ParseTCPListeners([]byte(tcp6Table), 22)
	require.NoError(t, err)
	assert.Equal(t, []uint64{17}, got)
	got, err = ParseTCPListeners([]byte(tcp6Table), 80)
	require.NoError(t, err)
	assert.Empty(t, got)
	for _, bad := range []string{
		"header\n   0: 0100007F:1F90 00000000:0000 0A\n",
		"header\n   0: 0100007F 00000000:0000 0A 0:0 0:0 0 1000 0 12 1\n",
		"header\n   0: 0100007F:XYZ 00000000:0000 0A 0:0 0:0 0 1000 0 12 1\n",
		"header\n   0: 0100007F:1F90 00000000:0000 0A 0:0 0:0 0 1000 0 -12 1\n",
	} {
		_, err := ParseTCPListeners([]byte(bad), 8080)
		assert.True(t, errors.Is(err, ErrMalformedNet), "%q: %v", bad, err)
	}
}

func FuzzParseTCPListeners(f *testing.F) {
	f.Add([]byte(tcp6Table), 8080)
	if data, err := os.ReadFile("/proc/net/tcp"); err == nil {
		f.Add(data, 22)
	}
	f.Fuzz(func(t *testing.T, data []byte, port int) {
		inodes, err := ParseTCPListeners(data, port)
		if err != nil && !errors.Is(err, ErrMalformedNet) {
			t.Fatalf("error %v is not ErrMalformedNet", err)
		}
		if slices.Contains(inodes, 0) {
			t.Fatalf("inode 0 (no socket) in %v", inodes)
		}
	})
}

// The socket this process listens on is among the port's listeners, and
// among the sockets this process holds.
func TestListenerIsFoundByItsInode(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	listening, err := TCPListeners(port)
	require.NoError(t, err)
	require.Len(t, listening, 1, "one listener on port %d", port)
	mine, err := SocketInodes(os.Getpid())
	require.NoError(t, err)
	assert.True(t, slices.ContainsFunc(mine, func(ino uint64) bool { return listening[ino] }), "listeners %v, sockets %v", listening, mine)

	_, err = SocketInodes(0)
	assert.ErrorIs(t, err, ErrNoProcess)
}

func TestSocketInode(t *testing.T) {
	for link, want := range map[string]uint64{"socket:[12345]": 12345, "pipe:[12345]": 0, "socket:[]": 0, "socket:[12": 0, "/dev/null": 0} {
		got, ok := socketInode(link)
		assert.Equal(t, want, got, link)
		assert.Equal(t, want != 0, ok, link)
	}
}
