package config

import (
	"strings"
	"testing"
	"time"
)

func TestServerDeadlines(t *testing.T) {
	cfg, err := ParseConfig("c.json", []byte(`{"mcpServers": {
		"build": {"command": "b", "deadline": "2h", "toolDeadlines": {"deploy": "30m"}, "onDeadline": "cancel"},
		"plain": {"command": "p"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := cfg.Server("build")
	if got := b.Deadlines.For("deploy"); got != 30*time.Minute {
		t.Errorf("deploy's own deadline: %v, want 30m", got)
	}
	if got := b.Deadlines.For("lint"); got != 2*time.Hour {
		t.Errorf("another tool's deadline: %v, want the server's 2h", got)
	}
	if b.Deadlines.On != OnDeadlineCancel {
		t.Errorf("onDeadline %q", b.Deadlines.On)
	}
	if p, _ := cfg.Server("plain"); p.Deadlines.For("x") != 0 || p.Deadlines.On != "" {
		t.Errorf("a server without deadlines: %+v", p.Deadlines)
	}
}

func TestServerDeadlinesRefused(t *testing.T) {
	for _, tc := range []struct{ entry, want string }{
		{`"deadline": "soon"`, `mcpServers.s.deadline: want a positive duration up to 8784h0m0s such as "2h" or "30m", got "soon"`},
		{`"deadline": "-1h"`, `mcpServers.s.deadline: want a positive duration`},
		{`"deadline": 7200`, `mcpServers.s.deadline: want a positive duration up to 8784h0m0s such as "2h" or "30m", got a number`},
		{`"deadline": "9000h"`, `mcpServers.s.deadline: want a positive duration`},
		{`"toolDeadlines": {"deploy": "0s"}`, `mcpServers.s.toolDeadlines.deploy: want a positive duration`},
		{`"toolDeadlines": ["deploy"]`, `mcpServers.s.toolDeadlines: want an object of tool names to durations`},
		{`"onDeadline": "ignore"`, `mcpServers.s.onDeadline: want "decline" (decline the unanswered input) or "cancel" (cancel the task); leave it out to only be told, got "ignore"`},
		{`"deadlines": "2h"`, `mcpServers.s.deadlines: unknown key "deadlines"; did you mean "deadline"?`},
	} {
		_, err := ParseConfig("c.json", []byte(`{"mcpServers": {"s": {"command": "x", `+tc.entry+`}}}`))
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: got %v, want one line with %q", tc.entry, err, tc.want)
		}
	}
}
