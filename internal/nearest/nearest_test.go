package nearest

import (
	"slices"
	"testing"
)

func TestNames(t *testing.T) {
	keys := []string{"mcpServers", "store", "headers", "command", "args", "env", "url"}
	for _, c := range []struct {
		word string
		want []string
	}{
		{"header", []string{"headers"}},
		{"mcpservers", []string{"mcpServers"}},
		{"stroe", []string{"store"}},
		{"dashbaord", nil},
		{"URL", []string{"url"}},
	} {
		if got := Names(c.word, keys); !slices.Equal(got, c.want) {
			t.Errorf("Names(%q) = %q, want %q", c.word, got, c.want)
		}
	}
}
