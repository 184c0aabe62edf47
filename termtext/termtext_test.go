package termtext

import "testing"

func TestSanitize(t *testing.T) {
	for _, c := range []struct{ in, line, multi string }{
		{"plain text, 100% ascii ~", "plain text, 100% ascii ~", "plain text, 100% ascii ~"},
		{"red \x1b[31mALERT\x1b[0m", "red ALERT", "red ALERT"},
		{"title\x1b]0;pwned\x07 set", "title set", "title set"},
		{"bell\x07 and del\x7f", "bell and del", "bell and del"},
		{"two\nlines\tand tab", "two lines and tab", "two\nlines\tand tab"},
		{"8-bit csi \u009b31m here", "8-bit csi 31m here", "8-bit csi 31m here"},
		{"bidi \u202eevil\u202c ok, café", "bidi evil ok, café", "bidi evil ok, café"},
	} {
		if got := Sanitize(c.in, false); got != c.line {
			t.Errorf("Sanitize(%q, false) = %q, want %q", c.in, got, c.line)
		}
		if got := Sanitize(c.in, true); got != c.multi {
			t.Errorf("Sanitize(%q, true) = %q, want %q", c.in, got, c.multi)
		}
	}
}

func TestOneLine(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"open: \n\tno such file\r\n", 0, "open: no such file"},
		{"日本語テキスト", 4, "日本語…"},
		{"short", 5, "short"},
	} {
		if got := OneLine(c.in, c.max); got != c.want {
			t.Errorf("OneLine(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}
