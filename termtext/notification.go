package termtext

import "strings"

// DesktopNotification makes the escape sequence of a desktop notification
// for the terminal env describes: OSC 777 where the terminal says it is
// one that uses it (VTE's, foot, rxvt), else OSC 9; inside tmux, wrapped
// for tmux to pass on (it needs `set -g allow-passthrough on`).
func DesktopNotification(env func(string) string) func(string) string {
	termName := env("TERM")
	if env("TMUX") != "" {
		termName = "" // tmux's TERM says nothing of the terminal outside
	}
	uses777 := env("VTE_VERSION") != "" || strings.HasPrefix(termName, "foot") || strings.HasPrefix(termName, "rxvt")
	tmux := env("TMUX") != ""
	return func(text string) string {
		// Sanitized text has no ESC or BEL to end the sequence early; a
		// ';' would start a new parameter.
		text = strings.ReplaceAll(Line(text), ";", " ")
		seq := "\x1b]9;" + text + "\a"
		if uses777 {
			seq = "\x1b]777;notify;taskdeck;" + text + "\a"
		}
		if tmux {
			seq = "\x1bPtmux;" + strings.ReplaceAll(seq, "\x1b", "\x1b\x1b") + "\x1b\\"
		}
		return seq
	}
}
