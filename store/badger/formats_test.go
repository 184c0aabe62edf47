package badger

import (
	"os/exec"
	"strings"
	"testing"
)

// TestFormatsPinned fences the durability layer: it reads the file
// formats of one Badger release (formatsOf), and a build with another
// must not pass until they are checked again. It asks go for the release
// this module builds with (go.mod's, or its replacement's).
func TestFormatsPinned(t *testing.T) {
	out, err := exec.CommandContext(t.Context(), "go", "list", "-m", "-f", "{{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}", "github.com/dgraph-io/badger/v4").Output()
	if err != nil {
		t.Fatalf("go list -m github.com/dgraph-io/badger/v4: %v", err)
	}
	if got := strings.TrimSpace(string(out)); got != formatsOf {
		t.Fatalf("Badger is %s, but walcheck.go, walsync.go, guard.go, tablesums.go and reclaim.go read the file formats of %s: "+
			"check Badger's changes to its WAL, table and value-log formats, then update formatsOf", got, formatsOf)
	}
}
