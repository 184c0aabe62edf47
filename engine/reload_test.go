package engine

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
)

// An engine that follows its config file reads each edit at the next
// request: a server added is listed and called, a server whose URL
// changed is called at its new URL (its old session dropped), and a
// broken edit is refused for the servers the version in use lacks while
// calls to the others go on.
func TestFollowConfigReadsEdits(t *testing.T) {
	a, b := startDemo(t, demo.Options{}), startDemo(t, demo.Options{})
	path := filepath.Join(t.TempDir(), "config.json")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(fmt.Sprintf(`{"mcpServers":{"demo":{"url":%q}}}`, a.URL))
	cfg, err := mcpconfig.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	e := open(t, t.TempDir(), a, Options{Config: cfg, FollowConfig: true})
	ctx := ctxT(t)
	echo := func(server string) error {
		t.Helper()
		_, err := e.Call(ctx, deck.CallRequest{Server: model.ServerRef{Name: server}, Tool: "echo", Args: json.RawMessage(`{"text":"x"}`)})
		return err
	}
	if err := echo("demo"); err != nil {
		t.Fatal(err)
	}

	write(fmt.Sprintf(`{"mcpServers":{"demo":{"url":%q},"extra":{"url":%q}}}`, b.URL, a.URL))
	servers, err := e.Servers(ctx)
	if err != nil || len(servers) != 2 || servers[1].Name != "extra" {
		t.Fatalf("after the edit, Servers = %+v, %v; want demo and extra", servers, err)
	}
	if err := echo("demo"); err != nil {
		t.Fatal(err)
	}
	if err := echo("extra"); err != nil {
		t.Fatal(err)
	}
	if na, nb := len(a.Requests("tools/call")), len(b.Requests("tools/call")); na != 2 || nb != 1 {
		t.Fatalf("tools/call at the old URL %d, at the new %d; want 2 (before the edit, and extra) and 1", na, nb)
	}

	write(`{"mcpServers":{"demo":`)
	if _, err := e.Servers(ctx); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "invalid JSON") {
		t.Fatalf("Servers of a broken edit: %v; want its refusal naming %s", err, path)
	}
	if err := echo("demo"); err != nil {
		t.Fatalf("a call to a server of the version in use, during a broken edit: %v", err)
	}
	if err := echo("later"); err == nil || !strings.Contains(err.Error(), "invalid JSON") {
		t.Fatalf("a call to a server the version in use lacks, during a broken edit: %v; want the edit's refusal", err)
	}
}
