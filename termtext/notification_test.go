package termtext

import "testing"

// The desktop notification is OSC 9, OSC 777 where the terminal says it
// uses it, wrapped for tmux inside tmux; the server's text cannot end the
// sequence early or add a parameter.
func TestDesktopNotification(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"TERM": "xterm-256color"}, "\x1b]9;taskdeck: a b\a"},
		{map[string]string{"TERM": "xterm-256color", "VTE_VERSION": "7600"}, "\x1b]777;notify;taskdeck;taskdeck: a b\a"},
		{map[string]string{"TERM": "foot"}, "\x1b]777;notify;taskdeck;taskdeck: a b\a"},
		{map[string]string{"TERM": "tmux-256color", "TMUX": "/tmp/tmux-0/default,1,0"}, "\x1bPtmux;\x1b\x1b]9;taskdeck: a b\a\x1b\\"},
	} {
		got := DesktopNotification(func(k string) string { return c.env[k] })("taskdeck: a;b\x1b]9;\a")
		if got != c.want {
			t.Errorf("%v: %q, want %q", c.env, got, c.want)
		}
	}
}
