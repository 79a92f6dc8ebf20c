package logread

import (
	"unicode/utf8"
	"unsafe"
)

// isCont reports whether b is a UTF-8 continuation byte (10xxxxxx).
func isCont(b byte) bool { return b&0xC0 == 0x80 }

// incompleteTail returns where a trailing incomplete UTF-8 sequence of p
// starts: the bytes p[i:] are a prefix of a sequence that more bytes could
// still complete. It returns len(p) when p ends with a whole sequence or with
// bytes no continuation could make valid (those are invalid whatever comes
// next, so holding them back would gain nothing).
//
// Only the last UTFMax-1 bytes matter: a longer incomplete prefix cannot
// exist.
func incompleteTail(p []byte) int {
	for i := len(p) - 1; i >= 0 && i >= len(p)-(utf8.UTFMax-1); i-- {
		b := p[i]
		if b < utf8.RuneSelf {
			return len(p)
		}
		if !isCont(b) {
			// FullRune is true both for a whole sequence and for a lead byte
			// whose following bytes already make it invalid.
			if utf8.FullRune(p[i:]) {
				return len(p)
			}
			return i
		}
	}
	return len(p)
}

// leadingConts counts the continuation bytes at the start of p, at most
// UTFMax-1: the bytes to skip to reach the next character boundary.
func leadingConts(p []byte) int {
	n := 0
	for n < len(p) && n < utf8.UTFMax-1 && isCont(p[n]) {
		n++
	}
	return n
}

// appendValid appends p to dst with each byte that does not start a valid
// UTF-8 sequence replaced by U+FFFD, the way a range loop over a string
// decodes it. It reports whether it replaced anything.
func appendValid(dst, p []byte) ([]byte, bool) {
	if utf8.Valid(p) {
		return append(dst, p...), false
	}
	for len(p) > 0 {
		i := 0
		for i < len(p) {
			if p[i] < utf8.RuneSelf {
				i++
				continue
			}
			r, n := utf8.DecodeRune(p[i:])
			if r == utf8.RuneError && n == 1 {
				break
			}
			i += n
		}
		dst = append(dst, p[:i]...)
		if i == len(p) {
			break
		}
		dst = append(dst, "\uFFFD"...)
		p = p[i+1:]
	}
	return dst, true
}

// toText returns p as valid UTF-8 text and whether bytes were replaced.
//
// When p is already valid the string shares p's memory instead of copying
// it: windows are up to a MiB and a copy would be a third of the work of a
// combined read. Callers only pass buffers that they allocated for this
// answer and never write to again.
func toText(p []byte) (string, bool) {
	if len(p) == 0 {
		return "", false
	}
	if utf8.Valid(p) {
		return unsafe.String(unsafe.SliceData(p), len(p)), false
	}
	b, _ := appendValid(make([]byte, 0, len(p)+16), p)
	return unsafe.String(unsafe.SliceData(b), len(b)), true
}
