package config

import (
	"strings"
	"testing"
)

// TestConfigStore: the top-level "store" names the task store; anything
// but a string is refused in one line that says where and what to write.
func TestConfigStore(t *testing.T) {
	cfg, err := ParseConfig("c.json", []byte(`{"store":"postgres://db.example/td","mcpServers":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Store != "postgres://db.example/td" {
		t.Fatalf("store %q", cfg.Store)
	}
	_, err = ParseConfig("c.json", []byte(`{"store":5}`))
	if err == nil || !strings.Contains(err.Error(), "store: want a string") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("a number as the store: %v", err)
	}
}
