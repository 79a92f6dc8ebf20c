package logframe

import (
	"encoding/base64"
	"encoding/binary"
	"slices"
	"sync"
)

// The framed capture encodes every byte the child writes, so the encoder sets
// the throughput of framed mode. encoding/base64 looks up one 6-bit group at a
// time; looking up two groups at once in a 4096-entry table, 24 source bytes
// per loop, halves the lookups and was several times faster
// (docs/architecture/performance.md, "Capture"). The output is byte-for-byte
// that of base64.StdEncoding, which the tests check.

const stdAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

// pairs maps 12 bits to their two base64 characters, first character in the
// low byte so that a little-endian store writes them in order.
//
// Made on first use, not at package init: every supervisor links this
// package, and only the supervisor of a framed run encodes frames.
var pairs = sync.OnceValue(func() *[4096]uint16 {
	var t [4096]uint16
	for i := range t {
		t[i] = uint16(stdAlphabet[i>>6]) | uint16(stdAlphabet[i&63])<<8
	}
	return &t
})

// appendEncode appends the standard padded base64 encoding of src to dst.
func appendEncode(dst, src []byte) []byte {
	n := base64.StdEncoding.EncodedLen(len(src))
	start := len(dst)
	dst = slices.Grow(dst, n)[:start+n]
	out := dst[start:]
	t := pairs()
	si, di := 0, 0
	// Each step reads 8-byte words that overlap by two bytes and consumes
	// six bytes of each, so a step needs two bytes past what it consumes.
	// Four words per step give the CPU independent work to overlap; the
	// two-word loop and then the stdlib (with padding) finish the tail.
	for ; si+26 <= len(src); si, di = si+24, di+32 {
		s := src[si : si+26 : si+26]
		d := out[di : di+32 : di+32]
		v0 := binary.BigEndian.Uint64(s[0:8])
		v1 := binary.BigEndian.Uint64(s[6:14])
		v2 := binary.BigEndian.Uint64(s[12:20])
		v3 := binary.BigEndian.Uint64(s[18:26])
		binary.LittleEndian.PutUint64(d[0:8], quad(t, v0))
		binary.LittleEndian.PutUint64(d[8:16], quad(t, v1))
		binary.LittleEndian.PutUint64(d[16:24], quad(t, v2))
		binary.LittleEndian.PutUint64(d[24:32], quad(t, v3))
	}
	for ; si+14 <= len(src); si, di = si+12, di+16 {
		s := src[si : si+14 : si+14]
		d := out[di : di+16 : di+16]
		binary.LittleEndian.PutUint64(d[0:8], quad(t, binary.BigEndian.Uint64(s[0:8])))
		binary.LittleEndian.PutUint64(d[8:16], quad(t, binary.BigEndian.Uint64(s[6:14])))
	}
	base64.StdEncoding.Encode(out[di:], src[si:])
	return dst
}

// quad encodes the top 48 bits of v as eight characters, in store order.
func quad(t *[4096]uint16, v uint64) uint64 {
	return uint64(t[v>>52]) | uint64(t[v>>40&0xfff])<<16 | uint64(t[v>>28&0xfff])<<32 | uint64(t[v>>16&0xfff])<<48
}
