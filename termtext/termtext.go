// Package termtext makes untrusted text (anything a server sent) safe to
// put on a terminal: escape sequences, control characters and bidi
// overrides are removed, so a server cannot move the cursor, set the
// title, write the clipboard or reorder what the operator reads.
package termtext

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
)

// Sanitize strips escape sequences and control characters. Newlines and
// tabs survive when multiline is true; otherwise they become spaces.
func Sanitize(s string, multiline bool) string {
	if PrintableASCII(s) {
		return s // most text; the dashboard sanitizes every row at start-up
	}
	s = ansi.Strip(s)
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r == '\n' || r == '\t':
			if multiline {
				b.WriteRune(r)
			} else {
				b.WriteByte(' ')
			}
		case r == unicode.ReplacementChar:
			b.WriteRune(r)
		case unicode.IsControl(r) || IsBidiControl(r):
			// dropped: C0/C1 controls (NUL, BEL, a stray ESC, CSI…) and bidi
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// PrintableASCII reports whether s is all printable ASCII, which holds no
// escape, control or bidi character, and is one column a byte.
func PrintableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// Line is Sanitize for a single line of display.
func Line(s string) string { return Sanitize(s, false) }

// OneLine puts a message on one line: every run of white space, line
// breaks included, becomes one space. When max > 0, a longer result is
// cut to max runes ending in "…". It does not sanitize (see Line).
func OneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if max > 0 && utf8.RuneCountInString(s) > max {
		r := []rune(s)
		s = string(r[:max-1]) + "…"
	}
	return s
}

// IsBidiControl reports the bidirectional formatting characters (LRM, RLM,
// ALM, embeddings, overrides, isolates), which reorder what is shown.
func IsBidiControl(r rune) bool {
	switch {
	case r == 0x061C, r == 0x200E, r == 0x200F:
		return true
	case r >= 0x202A && r <= 0x202E:
		return true
	case r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}
