package engine

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLinksNoBackendOfItsOwn: the loop, the tracker and the actions reach
// a fleet's database through store.Shared, never store/postgres, which
// the program that opens one links (package taskdeck).
func TestLinksNoBackendOfItsOwn(t *testing.T) {
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for dep := range strings.Lines(string(out)) {
		if strings.TrimSpace(dep) == "github.com/taskdeck/taskdeck/store/postgres" {
			t.Fatal("package engine links store/postgres; reach it through store.Shared")
		}
	}
}
