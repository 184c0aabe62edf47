package e2e

import (
	"slices"
	"strings"
	"testing"
)

// `ls --search` takes the dashboard's search: field terms, words found
// in arguments and results, and -term.
func TestLsSearch(t *testing.T) {
	t.Parallel()
	d, _ := tuiDeck(t)
	echo := d.call("echo", `{"text":"needle"}`)
	fail := d.call("fail", `{"mode":"error"}`)
	d.run("watch").Must(t, 0) // both end
	sleep := d.call("sleep", `{"seconds":3000}`)
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"tool:sleep", []string{sleep}},
		{"args:seconds:3000", []string{sleep}},
		{"needle", []string{echo}},
		{"status:failed", []string{fail}},
		{"-tool:sleep -tool:echo", []string{fail}},
		{"server:demo tool:ech", []string{echo}},
	} {
		r := d.run("ls", "--search", c.query, "--json").Must(t, 0)
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
			if line != "" {
				got = append(got, parseTask(t, line).ID)
			}
		}
		slices.Sort(got)
		slices.Sort(c.want)
		if !slices.Equal(got, c.want) {
			t.Errorf("ls --search %q: %v, want %v", c.query, got, c.want)
		}
	}
}
