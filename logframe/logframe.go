// Package logframe is the wire format of a framed run log: one frame per
// line, "<stream> <base64(payload)>\n", where stream is "1" (stdout) or "2"
// (stderr) and the payload is standard base64 with padding (RFC 4648 §4).
//
// The format is line-oriented so that a log cut at any byte (a crash, a full
// disk) loses at most its last, partial line, and so that a reader can find a
// frame boundary from any offset by skipping to the next newline. Version 1
// is the only version; the run record names it ("frames/v1").
//
// Decoding is strict: every frame has exactly one encoding, the one
// AppendFrames writes. A line with an empty payload ("1 \n") is malformed,
// because the encoder never writes one; accepting it would give a log more
// than one spelling and let a corrupt line pass as a frame. Payloads must be
// canonical base64 (padding present, zero trailing bits, no CR, LF or other
// whitespace) and at most MaxPayload bytes.
//
// This package is standard library only.
package logframe

import (
	"bytes"
	"encoding/base64"
	"errors"
	"slices"
	"strconv"
)

// FormatName names this wire format and version in run records.
const FormatName = "frames/v1"

// Stream identifies which of the child's output streams a frame carries.
type Stream byte

const (
	Stdout Stream = 1
	Stderr Stream = 2
)

// MaxPayload bounds the payload of one frame; the encoder splits longer
// writes so that a frame line never exceeds MaxLine bytes.
const MaxPayload = 48 << 10

// MaxLine is the longest frame line the encoder produces, newline included.
const MaxLine = 2 + (MaxPayload+2)/3*4 + 1

// ErrMalformed is wrapped by every error about a line that is not a frame.
var ErrMalformed = errors.New("malformed frame")

// strict rejects non-zero trailing bits, so that each payload has one
// encoding. It still skips CR and LF (encoding/base64 docs), which parse
// rejects before decoding.
var strict = base64.StdEncoding.Strict()

// Frame is one decoded frame.
type Frame struct {
	Stream  Stream
	Payload []byte // valid until the next call that produced it
	Offset  int64  // byte offset of the frame's first byte in the log
	Len     int    // length of the frame line in the log, newline included
}

// String returns the stream's wire name: "1" or "2".
func (s Stream) String() string {
	switch s {
	case Stdout:
		return "1"
	case Stderr:
		return "2"
	}
	return "Stream(" + strconv.Itoa(int(s)) + ")"
}

// Name returns "stdout" or "stderr".
func (s Stream) Name() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	}
	return "stream" + strconv.Itoa(int(s))
}

// Valid reports whether s is Stdout or Stderr, the only streams on the wire.
func (s Stream) Valid() bool { return s == Stdout || s == Stderr }

// FrameLen returns the length on the wire, newline included, of the frame
// that carries a payload of n bytes (1 <= n <= MaxPayload).
func FrameLen(n int) int { return 3 + base64.StdEncoding.EncodedLen(n) }

// EncodedLen returns how many bytes AppendFrames appends for a payload of n
// bytes.
func EncodedLen(n int) int {
	if n <= 0 {
		return 0
	}
	full, rest := n/MaxPayload, n%MaxPayload
	size := full * MaxLine
	if rest > 0 {
		size += FrameLen(rest)
	}
	return size
}

// AppendFrames appends p to dst as one or more frames of stream s, splitting
// at MaxPayload, and returns the extended slice. An empty p appends nothing.
// It panics if s is not Stdout or Stderr: such a frame could not be read
// back, and only a programming error produces one.
func AppendFrames(dst []byte, s Stream, p []byte) []byte {
	if !s.Valid() {
		panic("logframe: AppendFrames with invalid stream " + s.String())
	}
	if len(p) == 0 {
		return dst
	}
	dst = slices.Grow(dst, EncodedLen(len(p)))
	for len(p) > 0 {
		chunk := p[:min(len(p), MaxPayload)]
		p = p[len(chunk):]
		dst = append(dst, '0'+byte(s), ' ')
		dst = appendEncode(dst, chunk)
		dst = append(dst, '\n')
	}
	return dst
}

// ParseLine decodes one complete frame line, with or without its trailing
// newline, appending the payload to dst. Errors wrap ErrMalformed.
func ParseLine(dst []byte, line []byte) (Stream, []byte, error) {
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	s, out, reason := parse(dst, line)
	if reason != "" {
		return 0, dst, &lineError{reason: reason}
	}
	return s, out, nil
}

// lineError is ParseLine's error: a SyntaxError without a log offset, since
// ParseLine does not know where its line sits in the log.
type lineError struct{ reason string }

func (e *lineError) Error() string { return "logframe: " + ErrMalformed.Error() + ": " + e.reason }
func (e *lineError) Unwrap() error { return ErrMalformed }

// Reasons shared by ParseLine and Demuxer, so that one malformed line is
// described the same way whichever way it was read.
const (
	reasonTooLong = "line longer than MaxLine"
	reasonEmpty   = "empty payload"
)

// parse decodes line, which has no trailing newline. It returns a non-empty
// reason instead of an error so that the Demuxer can build its SyntaxError
// without an intermediate allocation.
func parse(dst, line []byte) (Stream, []byte, string) {
	if len(line) > MaxLine-1 {
		return 0, dst, reasonTooLong
	}
	if len(line) == 0 {
		return 0, dst, "empty line"
	}
	var s Stream
	switch line[0] {
	case '1':
		s = Stdout
	case '2':
		s = Stderr
	default:
		return 0, dst, "unknown stream " + strconv.Quote(string(line[:1]))
	}
	if len(line) < 2 || line[1] != ' ' {
		return 0, dst, "no space after stream"
	}
	enc := line[2:]
	if len(enc) == 0 {
		return 0, dst, reasonEmpty
	}
	// encoding/base64 skips CR and LF even in strict mode; a frame must not
	// contain them, or "1 QQ=\r=" would decode.
	if i := bytes.IndexByte(enc, '\n'); i >= 0 {
		return 0, dst, "newline at byte " + strconv.Itoa(2+i)
	}
	if i := bytes.IndexByte(enc, '\r'); i >= 0 {
		return 0, dst, "carriage return at byte " + strconv.Itoa(2+i)
	}
	out, err := strict.AppendDecode(dst, enc)
	if err != nil {
		var ce base64.CorruptInputError
		if errors.As(err, &ce) {
			return 0, dst, "invalid base64 at byte " + strconv.FormatInt(2+int64(ce), 10)
		}
		return 0, dst, "invalid base64: " + err.Error()
	}
	return s, out, ""
}

// SyntaxError reports a malformed line and where it starts in the log.
type SyntaxError struct {
	Offset int64  // offset of the malformed line's first byte
	Reason string // what is wrong, e.g. "unknown stream \"3\""
}

func (e *SyntaxError) Error() string {
	return "logframe: " + ErrMalformed.Error() + " at offset " + strconv.FormatInt(e.Offset, 10) + ": " + e.Reason
}
func (e *SyntaxError) Unwrap() error { return ErrMalformed }

// Demuxer splits a framed byte stream back into frames, whatever the chunk
// boundaries: a frame cut anywhere is completed by the next Write.
//
// It buffers at most MaxLine-1 bytes: an incomplete line that reaches MaxLine
// bytes can no longer become a frame and is reported as malformed at once.
// An incomplete last line is not an error (a crash or a full disk leaves
// one); Pending says how long it is.
//
// After Feed returns an error the Demuxer is spent: every later Feed returns
// the same error. To go on, start a new Demuxer at Offset, which is the start
// of the malformed line or of the frame whose emit failed.
type Demuxer struct {
	off     int64  // log offset of the first byte of partial: just past the last accepted frame
	partial []byte // incomplete line carried between Feeds, never longer than MaxLine-1
	payload []byte // decode buffer reused for every frame
	err     error  // sticky error
}

// NewDemuxer returns a Demuxer whose first input byte is at log offset base.
func NewDemuxer(base int64) *Demuxer { return &Demuxer{off: base} }

// Feed consumes p and calls emit for each frame completed by it, in order.
// A malformed line stops Feed with a *SyntaxError; emit's error is returned
// as is. Frame.Payload is only valid during the emit call.
//
// A frame counts as consumed, and Offset moves past it, only when emit
// returns nil.
func (d *Demuxer) Feed(p []byte, emit func(Frame) error) error {
	if d.err != nil {
		return d.err
	}
	if len(d.partial) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			return d.hold(p)
		}
		if len(d.partial)+i+1 > MaxLine {
			return d.fail(reasonTooLong)
		}
		d.partial = append(d.partial, p[:i+1]...)
		p = p[i+1:]
		line := d.partial
		// partial is reset before emit so that a spent Demuxer reports no
		// pending bytes for a line it has handed out.
		d.partial = d.partial[:0]
		if err := d.line(line, emit); err != nil {
			return err
		}
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			return d.hold(p)
		}
		if i+1 > MaxLine {
			return d.fail(reasonTooLong)
		}
		if err := d.line(p[:i+1], emit); err != nil {
			return err
		}
		p = p[i+1:]
	}
	return nil
}

// hold keeps the start of an incomplete line for the next Feed.
func (d *Demuxer) hold(p []byte) error {
	if len(d.partial)+len(p) > MaxLine-1 {
		d.partial = d.partial[:0]
		return d.fail(reasonTooLong)
	}
	d.partial = append(d.partial, p...)
	return nil
}

// line decodes and emits one complete line, newline included.
func (d *Demuxer) line(line []byte, emit func(Frame) error) error {
	s, payload, reason := parse(d.payload[:0], line[:len(line)-1])
	if reason != "" {
		return d.fail(reason)
	}
	d.payload = payload
	if err := emit(Frame{Stream: s, Payload: payload, Offset: d.off, Len: len(line)}); err != nil {
		d.err = err
		return err
	}
	d.off += int64(len(line))
	return nil
}

func (d *Demuxer) fail(reason string) error {
	d.err = &SyntaxError{Offset: d.off, Reason: reason}
	return d.err
}

// Offset returns the log offset just past the last complete frame emitted:
// always a frame boundary.
func (d *Demuxer) Offset() int64 { return d.off }

// Pending returns how many bytes of an incomplete last line are buffered.
func (d *Demuxer) Pending() int { return len(d.partial) }
