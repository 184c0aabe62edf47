//go:build ignore

// ansi.go is a helper of capture.sh (run with `go run screenshots/ansi.go`):
//
//	go run screenshots/ansi.go normalize IN OUT  # tmux capture-pane -e → what freeze renders
//
// freeze (github.com/charmbracelet/freeze) draws ANSI text, but each SGR
// parameter starts a new style: it keeps no state, knows no "default
// colour" (39/49), reverse video or bold, and an attribute does not
// combine with a colour. tmux, on the other hand, writes only the changes
// between cells. normalize tracks the full state per cell and writes every
// run of equal cells as a reset plus one background and one foreground, with
// reverse video resolved into explicit colours and bold shown as bright
// white, so that what freeze draws is what the terminal showed.
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

func main() {
	var err error
	switch {
	case len(os.Args) == 4 && os.Args[1] == "normalize":
		err = normalizeFile(os.Args[2], os.Args[3])
	default:
		err = fmt.Errorf("usage: go run screenshots/ansi.go normalize IN OUT")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ansi.go:", err)
		os.Exit(1)
	}
}

// colour is an SGR colour: "" for the default, else the SGR parameters
// that select it as a foreground ("38;5;39", "38;2;1;2;3", "31").
type colour string

type state struct {
	fg, bg                                  colour
	bold, faint, italic, underline, reverse bool
}

// Colours the reversed default colours turn into: a light bar with dark text.
const (
	defaultFgAsBg colour = "38;5;252"
	defaultBgAsFg colour = "38;5;235"
)

func (s state) sgr() string {
	fg, bg := s.fg, s.bg
	if s.reverse {
		fg, bg = bg, fg
		if fg == "" {
			fg = defaultBgAsFg
		}
		if bg == "" {
			bg = defaultFgAsBg
		}
	}
	out := "\x1b[0m"
	if bg != "" {
		out += "\x1b[" + asBackground(bg) + "m"
	}
	switch {
	case fg != "":
		out += "\x1b[" + string(fg) + "m"
	case s.bold:
		out += "\x1b[97m" // bright white stands for bold
	case s.faint:
		out += "\x1b[38;5;245m"
	case s.italic:
		out += "\x1b[3m"
	}
	return out
}

// asBackground turns foreground parameters into background ones.
func asBackground(c colour) string {
	p := string(c)
	switch {
	case strings.HasPrefix(p, "38;"):
		return "48;" + p[3:]
	}
	n, err := strconv.Atoi(p)
	switch {
	case err != nil:
		return p
	case n >= 30 && n <= 37: // freeze draws only bright backgrounds of the 16
		return strconv.Itoa(n + 70)
	case n >= 90 && n <= 97:
		return strconv.Itoa(n + 10)
	}
	return p
}

// apply changes the state by one SGR sequence's parameters.
func (s *state) apply(params string) {
	if params == "" {
		*s = state{}
		return
	}
	ps := strings.Split(params, ";")
	for i := 0; i < len(ps); i++ {
		sub := strings.Split(ps[i], ":") // 4:3 (curly underline), 38:5:n
		n, _ := strconv.Atoi(sub[0])
		switch {
		case n == 0:
			*s = state{}
		case n == 1:
			s.bold = true
		case n == 2:
			s.faint = true
		case n == 3:
			s.italic = true
		case n == 4:
			s.underline = len(sub) < 2 || sub[1] != "0"
		case n == 7:
			s.reverse = true
		case n == 22:
			s.bold, s.faint = false, false
		case n == 23:
			s.italic = false
		case n == 24:
			s.underline = false
		case n == 27:
			s.reverse = false
		case n >= 30 && n <= 37, n >= 90 && n <= 97:
			s.fg = colour(strconv.Itoa(n))
		case n >= 40 && n <= 47, n >= 100 && n <= 107:
			s.bg = colour(strconv.Itoa(n - 10))
		case n == 39:
			s.fg = ""
		case n == 49:
			s.bg = ""
		case n == 38 || n == 48:
			var c colour
			if len(sub) > 1 { // colon form
				c = colour("38;" + strings.Join(sub[1:], ";"))
			} else if i+2 < len(ps) && ps[i+1] == "5" {
				c = colour("38;5;" + ps[i+2])
				i += 2
			} else if i+4 < len(ps) && ps[i+1] == "2" {
				c = colour("38;2;" + strings.Join(ps[i+2:i+5], ";"))
				i += 4
			} else {
				i = len(ps)
				continue
			}
			if n == 38 {
				s.fg = c
			} else {
				s.bg = c
			}
		}
	}
}

// normalize rewrites one captured screen. Escape sequences other than SGR
// (there are none in a capture) are dropped.
func normalize(in string) string {
	var b strings.Builder
	var cur state
	lines := strings.Split(strings.TrimRight(in, "\n"), "\n")
	for li, line := range lines {
		written := state{}
		first := true
		rs := []rune(line)
		for i := 0; i < len(rs); i++ {
			if rs[i] == 0x1b && i+1 < len(rs) && rs[i+1] == '[' {
				j := i + 2
				for j < len(rs) && (rs[j] < 0x40 || rs[j] > 0x7e) {
					j++
				}
				if j < len(rs) && rs[j] == 'm' {
					cur.apply(string(rs[i+2 : j]))
				}
				i = j
				continue
			}
			if rs[i] < 0x20 {
				continue
			}
			if first || cur != written {
				b.WriteString(cur.sgr())
				written, first = cur, false
			}
			b.WriteRune(rs[i])
		}
		b.WriteString("\x1b[0m")
		if li < len(lines)-1 {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func normalizeFile(in, out string) error {
	b, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	return os.WriteFile(out, []byte(normalize(string(b))), 0o644)
}
