package taskdeck_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/taskdeck"
)

// The second program on a data directory works through the first one's
// socket, and learns which config names the servers there.
func TestOpenWorksThroughTheOwner(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	cfg := filepath.Join(dir, "servers.json")
	first, err := taskdeck.Open(ctx, taskdeck.Options{DataDir: dir, ConfigPath: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if path, through := first.OwnerConfig(); through || path != cfg {
		t.Fatalf("the first Open: OwnerConfig = %q, %v; want %q, false (it owns the store)", path, through, cfg)
	}
	second, err := taskdeck.Open(ctx, taskdeck.Options{DataDir: dir, ConfigPath: filepath.Join(dir, "other.json")})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if path, through := second.OwnerConfig(); !through || path != cfg {
		t.Fatalf("the second Open: OwnerConfig = %q, %v; want %q, true (through the owner)", path, through, cfg)
	}
}

// The README's library snippet is Example's code, so it compiles.
func TestREADMEShowsTheExample(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	body := string(src)
	body = body[strings.Index(body, "\td, err := taskdeck.Open"):strings.Index(body, "\t// Output:")]
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(body, "\n"), "\n") {
		lines = append(lines, strings.TrimPrefix(l, "\t"))
	}
	if !strings.Contains(string(readme), "```go\n"+strings.Join(lines, "\n")+"\n```") {
		t.Error("README.md's library snippet is not Example's code (taskdeck/example_test.go, from taskdeck.Open to the end of the loop)")
	}
}
