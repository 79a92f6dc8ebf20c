package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// ErrMalformedNet is returned by ParseTCPListeners for contents that are
// not a /proc/net/tcp table.
var ErrMalformedNet = errors.New("malformed /proc/net/tcp")

// tcpListen is the state of a listening socket in /proc/net/tcp: TCP_LISTEN
// of include/net/tcp_states.h, in hex as the table prints it.
const tcpListen = "0A"

// TCPListeners returns the inodes of the TCP sockets (IPv4 and IPv6) that
// listen on port, whatever their local address. The tables are those of
// the network namespace of this process (/proc/net is /proc/self/net).
// A kernel without IPv6 has no tcp6 table, which is no error.
func TCPListeners(port int) (map[uint64]bool, error) {
	out := map[uint64]bool{}
	for _, name := range []string{"tcp", "tcp6"} {
		data, err := os.ReadFile(procRoot + "/net/" + name)
		if errors.Is(err, os.ErrNotExist) && name == "tcp6" {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("listeners on port %d: %w", port, err)
		}
		inodes, err := ParseTCPListeners(data, port)
		if err != nil {
			return nil, fmt.Errorf("listeners on port %d: /proc/net/%s: %w", port, name, err)
		}
		for _, ino := range inodes {
			out[ino] = true
		}
	}
	return out, nil
}

// ParseTCPListeners returns, from a /proc/net/tcp or tcp6 table, the
// inodes of the sockets in state LISTEN whose local port is port (fuzzed).
//
// The table is a header line, then one line a socket (proc(5),
// net/ipv4/tcp_ipv4.c get_tcp4_sock):
//
//	sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ...
//	0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000 1000 0 12345 ...
//
// with addresses and ports in hex and the inode in decimal.
func ParseTCPListeners(data []byte, port int) ([]uint64, error) {
	var out []uint64
	lines := bytes.Split(data, []byte("\n"))
	for i, line := range lines {
		if i == 0 || len(bytes.TrimSpace(line)) == 0 {
			continue // the header; the empty line after the last newline
		}
		f := bytes.Fields(line)
		if len(f) < 10 {
			return nil, fmt.Errorf("%w: line %d has %d fields, want at least 10", ErrMalformedNet, i+1, len(f))
		}
		if string(f[3]) != tcpListen {
			continue
		}
		colon := bytes.LastIndexByte(f[1], ':')
		if colon < 0 {
			return nil, fmt.Errorf("%w: line %d: local address %q has no port", ErrMalformedNet, i+1, f[1])
		}
		p, err := strconv.ParseUint(string(f[1][colon+1:]), 16, 16)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: local port %q", ErrMalformedNet, i+1, f[1][colon+1:])
		}
		ino, err := strconv.ParseUint(string(f[9]), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: inode %q", ErrMalformedNet, i+1, f[9])
		}
		if int(p) == port && ino != 0 {
			out = append(out, ino)
		}
	}
	return out, nil
}
