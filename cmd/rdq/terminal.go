package main

import (
	"fmt"
	"io"
	"unicode"
	"unicode/utf8"
)

// Text from tasks (failure messages, stacks, headers, worker ids), from the
// audit log (actors, reasons, details) and from the database is untrusted:
// printed raw, an ESC sequence in a failure message could retitle the
// operator's terminal, clear it, rewrite what it shows, or worse, and a CR,
// backspaces or a bidi override could disguise a line. So every byte of
// text output passes through termWriter, which run puts in front of stdout
// and stderr: no command, table or message can forget to escape. JSON output
// passes unchanged (encoding/json escapes control characters itself), and
// the two raw outputs are explicit: a payload written to a file or pipe, and
// the progress line on a terminal.

// appendEscaped appends s to dst with every character that can drive a
// terminal written as a visible escape: the C0 controls (\x1b, \a, \r, ...),
// DEL, the C1 controls U+0080 to U+009F (\u009b), the Unicode bidi controls
// (\u202e) and bytes that are not UTF-8 (\xff). keepLines keeps newlines and
// tabs, for multi-line text; a table cell keeps neither.
func appendEscaped(dst, s []byte, keepLines bool) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c >= 0x20 && c != 0x7f, keepLines && (c == '\n' || c == '\t'):
				dst = append(dst, c)
			case c == '\n':
				dst = append(dst, `\n`...)
			case c == '\t':
				dst = append(dst, `\t`...)
			case c == '\r':
				dst = append(dst, `\r`...)
			case c == '\a':
				dst = append(dst, `\a`...)
			case c == '\b':
				dst = append(dst, `\b`...)
			default:
				dst = fmt.Appendf(dst, `\x%02x`, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = fmt.Appendf(dst, `\x%02x`, c)
		case r < 0xa0, unicode.Is(unicode.Bidi_Control, r):
			dst = fmt.Appendf(dst, `\u%04x`, r)
		default:
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return dst
}

// cell makes s safe to show in one table cell: on one line, with every
// control character escaped.
func cell(s string) string {
	safe := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return string(appendEscaped(nil, []byte(s), false))
}

// termWriter escapes what is written to it with appendEscaped, keeping
// newlines and tabs. A UTF-8 sequence split across two writes is held until
// the rest arrives. While *raw is true (JSON output), bytes pass unchanged.
type termWriter struct {
	w       io.Writer
	raw     *bool
	partial []byte // the start of a UTF-8 sequence cut by the last write
	buf     []byte
}

func newTermWriter(w io.Writer, raw *bool) *termWriter { return &termWriter{w: w, raw: raw} }

func (t *termWriter) Write(p []byte) (int, error) {
	n := len(p)
	if t.raw != nil && *t.raw && len(t.partial) == 0 {
		return t.w.Write(p)
	}
	if len(t.partial) > 0 {
		p = append(t.partial, p...)
		t.partial = nil
	}
	if cut := incompleteTail(p); cut < len(p) {
		t.partial = append([]byte(nil), p[cut:]...)
		p = p[:cut]
	}
	t.buf = appendEscaped(t.buf[:0], p, true)
	if _, err := t.w.Write(t.buf); err != nil {
		return 0, err
	}
	return n, nil
}

// flush writes a held incomplete sequence, escaped: nothing completes it.
func (t *termWriter) flush() error {
	if len(t.partial) == 0 {
		return nil
	}
	b := appendEscaped(nil, t.partial, true)
	t.partial = nil
	_, err := t.w.Write(b)
	return err
}

// incompleteTail returns where an incomplete UTF-8 sequence at the end of p
// starts, or len(p) if p does not end in one.
func incompleteTail(p []byte) int {
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(p[i]) {
			if p[i] >= utf8.RuneSelf && !utf8.FullRune(p[i:]) {
				return i
			}
			break
		}
	}
	return len(p)
}
