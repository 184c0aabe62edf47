package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func TestNotifyConfig(t *testing.T) {
	cfg, err := ParseConfig("c.json", []byte(`{"notify": {
		"webhooks": [{"url": "https://hooks.example/td", "secret": "${TD_WEBHOOK_SECRET}", "events": ["input_required", "failed"], "servers": ["build"]},
		             {"url": "http://127.0.0.1:9/hook", "secret": "`+testSecret+`"}],
		"commands": [{"argv": ["notify-send", "taskdeck"], "events": ["input_required"], "timeout": "3s"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	n := cfg.Notify
	if len(n.Webhooks) != 2 || len(n.Commands) != 1 {
		t.Fatalf("%+v", n)
	}
	if !slices.Equal(n.Webhooks[1].Events, DefaultEvents) {
		t.Errorf("an endpoint naming no events gets %v, want the default %v", n.Webhooks[1].Events, DefaultEvents)
	}
	if !n.Webhooks[0].Wants("failed", "build", "x") || n.Webhooks[0].Wants("failed", "other", "x") || n.Webhooks[0].Wants("completed", "build", "x") {
		t.Error("the first webhook's filter: failed on build only")
	}
	if n.Commands[0].Timeout.String() != "3s" {
		t.Errorf("timeout %v", n.Commands[0].Timeout)
	}
	key, err := n.Webhooks[0].ExpandSecret(func(string) (string, bool) { return testSecret, true })
	if err != nil || len(key) != 24 {
		t.Fatalf("secret: %d bytes, %v", len(key), err)
	}
	_, err = n.Webhooks[0].ExpandSecret(func(string) (string, bool) { return "", false })
	if err == nil || !strings.Contains(err.Error(), "TD_WEBHOOK_SECRET is not set") {
		t.Errorf("an unset secret: %v", err)
	}
	_, err = n.Webhooks[0].ExpandSecret(func(string) (string, bool) { return "hunter2-not-a-secret", true })
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "whsec_") {
		t.Errorf("a malformed secret: %v", err)
	}
}

func TestNotifyConfigRefusals(t *testing.T) {
	for _, tc := range []struct{ conf, want string }{
		{`{"webhooks": [{"url": "https://h.example/", "secret": "${S}", "events": ["input_needed"]}]}`,
			`notify.webhooks[0].events[0]: unknown event "input_needed"; the events are input_required, deadline, completed, failed, cancelled, unknown, orphaned`},
		{`{"webhooks": [{"url": "http://hooks.example/td", "secret": "${S}"}]}`, "plain http off loopback: use https"},
		{`{"webhooks": [{"url": "https://h.example/", "secret": "sekrit-value"}]}`, "whsec_"},
		{`{"webhooks": [{"url": "https://u:p@h.example/", "secret": "${S}"}]}`, "may not carry a user or password"},
		{`{"webhooks": [{"url": "https://h.example/", "secret": "${S}", "retries": 3}]}`, `unknown key "retries"`},
		{`{"commands": [{"argv": []}]}`, "notify.commands[0].argv: want the program"},
		{`{"commands": [{"argv": ["x"], "timeout": "1h"}]}`, "notify.commands[0].timeout"},
		{`{"hooks": []}`, `unknown key "hooks"`},
		{`{"pollsFailing": {"polls": 0}}`, "notify.pollsFailing.polls: want a number of failed polls in a row from 1 to 10000, got 0"},
		{`{"pollsFailing": {"after": "forever"}}`, `notify.pollsFailing.after: want a duration from 0s to 24h0m0s such as "2m", got "forever"`},
		{`{"pollsFailing": {"for": "2m"}}`, `unknown key "for"`},
		{`{"pollsFailing": 3}`, `notify.pollsFailing: want {"polls": 3, "after": "2m"}`},
	} {
		_, err := ParseConfig("c.json", []byte(`{"notify": `+tc.conf+`}`))
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: got %v, want one line with %q", tc.conf, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "sekrit") {
			t.Errorf("the error quotes the secret: %v", err)
		}
	}
}

// TestPollsFailingRule: the rule as written, else the defaults.
func TestPollsFailingRule(t *testing.T) {
	for conf, want := range map[string]PollsFailing{
		`{"commands": [{"argv": ["x"], "events": ["polls_failing"]}]}`:     {DefaultFailingPolls, DefaultFailingAfter},
		`{"pollsFailing": {"polls": 5}}`:                                   {5, DefaultFailingAfter},
		`{"pollsFailing": {"polls": 1, "after": "30s"}, "webhooks": []}`:   {1, 30 * time.Second},
		`{"pollsFailing": {"after": "0s"}, "commands": [{"argv": ["x"]}]}`: {DefaultFailingPolls, 0},
	} {
		cfg, err := ParseConfig("c.json", []byte(`{"notify": `+conf+`}`))
		if err != nil || cfg.Notify.PollsFailing != want {
			t.Errorf("%s: got %+v (%v), want %+v", conf, cfg.Notify.PollsFailing, err, want)
		}
	}
}
