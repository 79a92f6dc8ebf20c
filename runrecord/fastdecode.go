package runrecord

import (
	"bytes"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// fastDecode decodes the JSON that Encode writes into r without reflection,
// in a fraction of encoding/json's CPU. A default process_list reads one
// page of records, where that is lost; but every call that reads every
// record (limit=all, a changed_since after a default listing, a state
// filter) spends a large part of its time decoding, and there it counts
// (docs/architecture/performance.md, "The record decoder"; make bench's
// decode row measures both paths on the records of a process_list).
//
// It handles a strict subset of JSON (exact field names it knows, no
// duplicates, no null, integers without fraction or exponent, valid UTF-8)
// and reports false for anything else, including every error and every key
// it does not know, so that Decode falls back to encoding/json for the
// authoritative result and message. FuzzFastDecode checks that whenever it
// reports true, encoding/json decodes the same record;
// TestFastDecodeKnowsEveryField that it knows every field of Record and Exit.
func fastDecode(data []byte, r *Record) bool {
	// One copy of the input: unescaped strings are substrings of it,
	// which saves an allocation per field.
	d := fastDecoder{data: data, s: string(data)}
	d.ws()
	return d.record(r) && d.end()
}

type fastDecoder struct {
	data []byte
	s    string // = string(data)
	pos  int
}

func (d *fastDecoder) record(r *Record) bool {
	return d.object(func(key []byte) (uint64, bool) {
		switch string(key) {
		case "version":
			return 1 << 0, d.int(&r.Version)
		case "name":
			return 1 << 1, d.str(&r.Name)
		case "run_id":
			return 1 << 2, d.str(&r.RunID)
		case "command":
			return 1 << 3, d.str(&r.Command)
		case "argv":
			return 1 << 4, d.strs(&r.Argv)
		case "cwd":
			return 1 << 5, d.str(&r.Cwd)
		case "env":
			return 1 << 6, d.strMap(&r.Env)
		case "secret_env":
			return 1 << 7, d.strs(&r.SecretEnv)
		case "capture_mode":
			return 1 << 8, d.str(&r.CaptureMode)
		case "log_format":
			return 1 << 9, d.str(&r.LogFormat)
		case "stdin":
			return 1 << 10, d.str(&r.Stdin)
		case "timeout_s":
			return 1 << 11, d.int(&r.TimeoutS)
		case "max_log_bytes":
			return 1 << 12, d.int64(&r.MaxLogBytes)
		case "boot_id":
			return 1 << 13, d.str(&r.BootID)
		case "started_at":
			return 1 << 14, d.time(&r.StartedAt)
		case "log_path":
			return 1 << 15, d.str(&r.LogPath)
		case "supervisor_pid":
			return 1 << 16, d.int(&r.SupervisorPID)
		case "supervisor_start_time":
			return 1 << 17, d.uint64(&r.SupervisorStartTime)
		case "pid":
			return 1 << 18, d.int(&r.PID)
		case "pid_start_time":
			return 1 << 19, d.uint64(&r.PIDStartTime)
		case "start_error":
			return 1 << 20, d.str(&r.StartError)
		case "exit":
			r.Exit = new(Exit)
			return 1 << 21, d.exit(r.Exit)
		case "finished_at":
			r.FinishedAt = new(time.Time)
			return 1 << 22, d.time(r.FinishedAt)
		case "output_closed":
			return 1 << 23, d.bool(&r.OutputClosed)
		case "log_bytes":
			return 1 << 24, d.int64(&r.LogBytes)
		case "log_dropped":
			return 1 << 25, d.int64(&r.LogDropped)
		case "log_capped":
			return 1 << 26, d.bool(&r.LogCapped)
		case "log_error":
			return 1 << 27, d.str(&r.LogError)
		case "status_of":
			return 1 << 28, d.str(&r.StatusOf)
		case "pty":
			return 1 << 29, d.bool(&r.Pty)
		case "cols":
			return 1 << 30, d.int(&r.Cols)
		case "rows":
			return 1 << 31, d.int(&r.Rows)
		case "limits":
			r.Limits = new(Limits)
			return 1 << 32, d.limits(r.Limits)
		case "request_id":
			return 1 << 33, d.str(&r.RequestID)
		case "nice":
			return 1 << 34, d.int(&r.Nice)
		case "ready":
			r.Ready = new(ReadyProbe)
			return 1 << 35, d.ready(r.Ready)
		case "ready_timeout_s":
			r.ReadyTimeoutS = new(int64)
			return 1 << 36, d.int64(r.ReadyTimeoutS)
		}
		return 0, true
	})
}

func (d *fastDecoder) exit(e *Exit) bool {
	return d.object(func(key []byte) (uint64, bool) {
		switch string(key) {
		case "code":
			e.Code = new(int)
			return 1 << 0, d.int(e.Code)
		case "signal":
			return 1 << 1, d.str(&e.Signal)
		case "at":
			return 1 << 2, d.time(&e.At)
		case "timed_out":
			return 1 << 3, d.bool(&e.TimedOut)
		case "oom_killed":
			return 1 << 4, d.bool(&e.OOMKilled)
		case "cpu_ms":
			return 1 << 5, d.int64(&e.CPUMS)
		case "peak_memory_bytes":
			return 1 << 6, d.int64(&e.PeakMemoryBytes)
		case "pids_max_hit":
			return 1 << 7, d.int64(&e.PidsMaxHit)
		}
		return 0, true
	})
}

func (d *fastDecoder) limits(l *Limits) bool {
	return d.object(func(key []byte) (uint64, bool) {
		switch string(key) {
		case "memory_mb":
			return 1 << 0, d.int(&l.MemoryMB)
		case "cpu_percent":
			return 1 << 1, d.int(&l.CPUPercent)
		case "pids":
			return 1 << 2, d.int(&l.Pids)
		}
		return 0, true
	})
}

func (d *fastDecoder) ready(p *ReadyProbe) bool {
	return d.object(func(key []byte) (uint64, bool) {
		switch string(key) {
		case "log":
			return 1 << 0, d.str(&p.Log)
		case "tcp_port":
			return 1 << 1, d.int(&p.TCPPort)
		case "http":
			return 1 << 2, d.str(&p.HTTP)
		}
		return 0, true
	})
}

// object walks an object. field decodes the value of a known key and
// returns the key's bit, so that duplicates are refused; it returns bit 0,
// consuming nothing, for a key it does not know. Such a key sends the whole
// record to encoding/json: a field added to Record but not here would
// otherwise be dropped on every read (TestFastDecodeKnowsEveryField).
func (d *fastDecoder) object(field func(key []byte) (uint64, bool)) bool {
	var seen uint64
	if !d.byte('{') {
		return false
	}
	d.ws()
	if d.peek() == '}' {
		d.pos++
		return true
	}
	for {
		d.ws()
		key, ok := d.plainKey()
		if !ok {
			return false
		}
		d.ws()
		if !d.byte(':') {
			return false
		}
		d.ws()
		bit, ok := field(key)
		if !ok || bit == 0 || seen&bit != 0 {
			return false
		}
		seen |= bit
		d.ws()
		switch d.next() {
		case ',':
		case '}':
			return true
		default:
			return false
		}
	}
}

func (d *fastDecoder) end() bool {
	d.ws()
	return d.pos == len(d.data)
}

func (d *fastDecoder) ws() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *fastDecoder) peek() byte {
	if d.pos < len(d.data) {
		return d.data[d.pos]
	}
	return 0
}

func (d *fastDecoder) next() byte {
	c := d.peek()
	d.pos++
	return c
}

func (d *fastDecoder) byte(c byte) bool {
	if d.peek() != c {
		return false
	}
	d.pos++
	return true
}

// plainKey reads a key without escapes (all of Record's keys).
func (d *fastDecoder) plainKey() ([]byte, bool) {
	if !d.byte('"') {
		return nil, false
	}
	start := d.pos
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			d.pos++
			return d.data[start : d.pos-1], true
		case c == '\\' || c < 0x20 || c >= utf8.RuneSelf:
			return nil, false
		}
		d.pos++
	}
	return nil, false
}

func (d *fastDecoder) str(dst *string) bool {
	s, ok := d.string()
	*dst = s
	return ok
}

// string reads a JSON string. Invalid UTF-8 and lone surrogates, which
// encoding/json replaces with U+FFFD, are left to it.
func (d *fastDecoder) string() (string, bool) {
	if !d.byte('"') {
		return "", false
	}
	start := d.pos
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			d.pos++
			return d.s[start : d.pos-1], true
		case c == '\\':
			return d.escaped(start)
		case c < 0x20:
			return "", false
		case c < utf8.RuneSelf:
			d.pos++
		default:
			r, size := utf8.DecodeRune(d.data[d.pos:])
			if r == utf8.RuneError && size == 1 {
				return "", false
			}
			d.pos += size
		}
	}
	return "", false
}

// escaped continues a string from its first backslash.
func (d *fastDecoder) escaped(start int) (string, bool) {
	buf := make([]byte, 0, d.pos-start+16)
	buf = append(buf, d.data[start:d.pos]...)
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			d.pos++
			return string(buf), true
		case c == '\\':
			d.pos++
			e := d.next()
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, ok := d.hex4()
				if !ok {
					return "", false
				}
				if utf16.IsSurrogate(r) {
					if !d.byte('\\') || !d.byte('u') {
						return "", false
					}
					r2, ok := d.hex4()
					if !ok {
						return "", false
					}
					r = utf16.DecodeRune(r, r2)
					if r == utf8.RuneError {
						return "", false
					}
				}
				buf = utf8.AppendRune(buf, r)
			default:
				return "", false
			}
		case c < 0x20:
			return "", false
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			d.pos++
		default:
			r, size := utf8.DecodeRune(d.data[d.pos:])
			if r == utf8.RuneError && size == 1 {
				return "", false
			}
			buf = append(buf, d.data[d.pos:d.pos+size]...)
			d.pos += size
		}
	}
	return "", false
}

func (d *fastDecoder) hex4() (rune, bool) {
	if d.pos+4 > len(d.data) {
		return 0, false
	}
	var r rune
	for _, c := range d.data[d.pos : d.pos+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	d.pos += 4
	return r, true
}

func (d *fastDecoder) strs(dst *[]string) bool {
	if !d.byte('[') {
		return false
	}
	out := []string{} // encoding/json makes [] a non-nil empty slice
	d.ws()
	if d.byte(']') {
		*dst = out
		return true
	}
	for {
		d.ws()
		s, ok := d.string()
		if !ok {
			return false
		}
		out = append(out, s)
		d.ws()
		switch d.next() {
		case ',':
		case ']':
			*dst = out
			return true
		default:
			return false
		}
	}
}

func (d *fastDecoder) strMap(dst *map[string]string) bool {
	if !d.byte('{') {
		return false
	}
	m := map[string]string{}
	*dst = m
	d.ws()
	if d.byte('}') {
		return true
	}
	for {
		d.ws()
		k, ok := d.string()
		if !ok {
			return false
		}
		d.ws()
		if !d.byte(':') {
			return false
		}
		d.ws()
		v, ok := d.string()
		if !ok {
			return false
		}
		m[k] = v
		d.ws()
		switch d.next() {
		case ',':
		case '}':
			return true
		default:
			return false
		}
	}
}

// digits reads a JSON integer: -?(0|[1-9][0-9]*) not followed by a
// fraction or exponent (those go to encoding/json, which refuses them for
// integer fields).
func (d *fastDecoder) digits() (neg bool, mag uint64, ok bool) {
	if d.byte('-') {
		neg = true
	}
	start := d.pos
	for d.pos < len(d.data) && '0' <= d.data[d.pos] && d.data[d.pos] <= '9' {
		c := uint64(d.data[d.pos] - '0')
		if mag > (1<<64-1-c)/10 {
			return false, 0, false
		}
		mag = mag*10 + c
		d.pos++
	}
	n := d.pos - start
	if n == 0 || n > 1 && d.data[start] == '0' {
		return false, 0, false
	}
	switch d.peek() {
	case '.', 'e', 'E':
		return false, 0, false
	}
	return neg, mag, true
}

func (d *fastDecoder) int64(dst *int64) bool {
	neg, mag, ok := d.digits()
	if !ok {
		return false
	}
	if neg {
		if mag > 1<<63 {
			return false
		}
		*dst = int64(-mag)
		return true
	}
	if mag > 1<<63-1 {
		return false
	}
	*dst = int64(mag)
	return true
}

func (d *fastDecoder) int(dst *int) bool {
	var v int64
	if !d.int64(&v) || int64(int(v)) != v {
		return false
	}
	*dst = int(v)
	return true
}

func (d *fastDecoder) uint64(dst *uint64) bool {
	neg, mag, ok := d.digits()
	if !ok || neg {
		return false
	}
	*dst = mag
	return true
}

func (d *fastDecoder) bool(dst *bool) bool {
	switch {
	case bytes.HasPrefix(d.data[d.pos:], []byte("true")):
		d.pos += 4
		*dst = true
	case bytes.HasPrefix(d.data[d.pos:], []byte("false")):
		d.pos += 5
		*dst = false
	default:
		return false
	}
	return true
}

// time hands the raw string to time.Time's UnmarshalJSON, as encoding/json
// does, so both paths accept exactly the same times.
func (d *fastDecoder) time(dst *time.Time) bool {
	start := d.pos
	if !d.byte('"') {
		return false
	}
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		d.pos++
		switch {
		case c == '"':
			return dst.UnmarshalJSON(d.data[start:d.pos]) == nil
		case c == '\\' || c < 0x20 || c >= utf8.RuneSelf:
			return false
		}
	}
	return false
}
