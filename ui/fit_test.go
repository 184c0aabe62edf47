package ui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
)

// A cell is exactly its width, cut with … where the text is longer: the
// same for plain ASCII (counted a byte a column) as ansi's grapheme walk
// gives, and for wide and combined characters as before.
func TestFitMakesCellsOfTheirWidth(t *testing.T) {
	for _, s := range []string{"", "a", "working", "slept 3 of 3000 s", "héllo wörld", "日本語のテキスト", "e\u0301t\u00e9"} {
		for w := 1; w <= 20; w++ {
			got := fit(s, w)
			if gw := ansi.StringWidth(got); gw != w {
				t.Errorf("fit(%q, %d) = %q, %d cells wide", s, w, got, gw)
			}
			if want := ansi.Truncate(s, w, "…"); !strings.HasPrefix(got, want) || strings.TrimRight(got[len(want):], " ") != "" {
				t.Errorf("fit(%q, %d) = %q, want %q padded", s, w, got, want)
			}
		}
	}
}
