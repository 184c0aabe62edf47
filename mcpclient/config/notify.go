package config

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Event kinds a "notify" endpoint may ask for (issue 27).
const (
	EventInputRequired = "input_required"
	EventDeadline      = "deadline" // a wait for input ran past its deadline (deadline.go)
	EventCompleted     = "completed"
	EventFailed        = "failed"
	EventCancelled     = "cancelled"
	EventUnknown       = "unknown"
	EventOrphaned      = "orphaned"
	// EventFound: reconcile recorded a task a server lists and no record
	// held (a 2025-11-25 server's tasks/list), for a person to adopt or leave.
	EventFound = "found"
	// EventPollsFailing is of a server, not a task: every poll of it
	// failed for a while (PollsFailing), and again once one succeeds.
	EventPollsFailing = "polls_failing"
)

// EventKinds are the events taskdeck emits, in the order it names them.
var EventKinds = []string{EventInputRequired, EventDeadline, EventCompleted, EventFailed, EventCancelled, EventUnknown, EventOrphaned, EventFound, EventPollsFailing}

// DefaultEvents are what an endpoint that names none is told of: what
// needs a person (a found task waits for someone to adopt or leave it).
var DefaultEvents = []string{EventInputRequired, EventDeadline, EventFailed, EventOrphaned, EventFound}

// Bounds of a command hook's run.
const (
	DefaultHookTimeout = 10 * time.Second
	MaxHookTimeout     = 5 * time.Minute
)

// The polls_failing rule's defaults: a server's polls count as failing
// once at least DefaultFailingPolls in a row failed over at least
// DefaultFailingAfter, with none answered between.
const (
	DefaultFailingPolls = 3
	DefaultFailingAfter = 2 * time.Minute
	// MaxFailingAfter bounds the wait: past a day nobody is told in time.
	MaxFailingAfter = 24 * time.Hour
	MaxFailingPolls = 10000
)

// Notify is the config's "notify": where events go.
type Notify struct {
	Webhooks []Webhook
	Commands []CommandHook
	// PollsFailing is when a server's polls count as failing
	// ("pollsFailing": {"polls": 3, "after": "2m"}).
	PollsFailing PollsFailing
}

// PollsFailing is the polls_failing rule: Polls failed polls in a row,
// the first at least After before the last.
type PollsFailing struct {
	Polls int
	After time.Duration
}

// WantsServer is Wants for an event of a server: the tools filter does
// not apply (every tool of the server is concerned).
func (f Filter) WantsServer(kind, server string) bool {
	return slices.Contains(f.Events, kind) && (len(f.Servers) == 0 || slices.Contains(f.Servers, server))
}

// Filter says which events an endpoint wants: by kind, and, when set, by
// server and tool name.
type Filter struct {
	Events  []string `json:"events"`
	Servers []string `json:"servers"`
	Tools   []string `json:"tools"`
}

// Wants reports whether an event of kind about a task of server and tool
// passes the filter.
func (f Filter) Wants(kind, server, tool string) bool {
	return slices.Contains(f.Events, kind) &&
		(len(f.Servers) == 0 || slices.Contains(f.Servers, server)) &&
		(len(f.Tools) == 0 || slices.Contains(f.Tools, tool))
}

// Webhook is one "notify.webhooks" entry. Secret is as written (a ${VAR}
// reference or the whsec_ value); ExpandSecret reads it.
type Webhook struct {
	URL    string
	Secret string
	Filter
	path, where string
}

// CommandHook is one "notify.commands" entry: argv run with the event's
// JSON on stdin, never through a shell.
type CommandHook struct {
	Argv    []string
	Timeout time.Duration
	Filter
}

// Endpoint names an endpoint in the outbox and in `notify status`: a hash
// of where it sends, so that editing its filter keeps its pending events.
func (w Webhook) Endpoint() string { return endpointName("webhook", w.URL) }

// Endpoint is Webhook.Endpoint's for a command hook.
func (c CommandHook) Endpoint() string { return endpointName("command", strings.Join(c.Argv, "\x00")) }

func endpointName(kind, target string) string {
	sum := sha256.Sum256([]byte(kind + "\x00" + target))
	return kind[:1] + hex.EncodeToString(sum[:6])
}

// Empty reports whether no endpoint is configured.
func (n Notify) Empty() bool { return len(n.Webhooks) == 0 && len(n.Commands) == 0 }

// ExpandSecret reads the webhook's secret (from lookup when it is a
// ${VAR}) and decodes it from the Standard Webhooks form whsec_<base64>.
// Errors name the variable, never the value.
func (w Webhook) ExpandSecret(lookup func(string) (string, bool)) ([]byte, error) {
	v := w.Secret
	if m := varRef.FindStringSubmatch(v); m != nil && m[0] == v {
		val, ok := lookup(m[1])
		if !ok || val == "" {
			return nil, &ConfigError{Path: w.path, Where: w.where + ".secret", Msg: fmt.Sprintf("environment variable %s is not set; export it before starting taskdeck", m[1])}
		}
		v = val
	}
	key, err := decodeSecret(v)
	if err != nil {
		return nil, &ConfigError{Path: w.path, Where: w.where + ".secret", Msg: err.Error()}
	}
	return key, nil
}

func decodeSecret(v string) ([]byte, error) {
	b64, ok := strings.CutPrefix(v, "whsec_")
	key, err := base64.StdEncoding.DecodeString(b64)
	if !ok || err != nil || len(key) < 24 || len(key) > 64 {
		return nil, fmt.Errorf("want a secret in the Standard Webhooks form whsec_<base64 of 24 to 64 random bytes> (e.g. \"whsec_$(head -c32 /dev/urandom | base64)\")")
	}
	return key, nil
}

// checkWebhookURL refuses what is not http(s), and http off loopback.
func checkWebhookURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Sprintf("want an http(s) URL such as \"https://hooks.example/td\", got %q", RedactURL(raw))
	}
	if u.User != nil {
		return "a webhook URL may not carry a user or password; the signature authenticates taskdeck"
	}
	if u.Scheme == "http" && !(ServerConfig{URL: raw}).IsLoopbackOrHTTPS() {
		return fmt.Sprintf("%s is plain http off loopback: use https (http only for localhost, 127.0.0.1 or ::1)", RedactURL(raw))
	}
	return ""
}

func parseNotify(cfg *Config, raw json.RawMessage, fail func(string, string, ...any) error) error {
	if raw == nil || isJSONNull(raw) {
		return nil
	}
	var top struct {
		Webhooks     []json.RawMessage `json:"webhooks"`
		Commands     []json.RawMessage `json:"commands"`
		PollsFailing json.RawMessage   `json:"pollsFailing"`
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		return fail("notify", `want {"webhooks": [{"url": ..., "secret": "${VAR}"}], "commands": [{"argv": [...]}]}, got %s`, jsonKind(raw))
	}
	if err := knownKeys(raw, "notify", []string{"webhooks", "commands", "pollsFailing"}, fail); err != nil {
		return err
	}
	rule, err := parsePollsFailing(top.PollsFailing, fail)
	if err != nil {
		return err
	}
	cfg.Notify.PollsFailing = rule
	for i, r := range top.Webhooks {
		where := fmt.Sprintf("notify.webhooks[%d]", i)
		var w struct {
			URL    string `json:"url"`
			Secret string `json:"secret"`
			Filter
		}
		if err := json.Unmarshal(r, &w); err != nil || isJSONNull(r) {
			return fail(where, `want {"url": "https://...", "secret": "${VAR}", "events": [...]}, got %s`, jsonKind(r))
		}
		if err := knownKeys(r, where, []string{"url", "secret", "events", "servers", "tools"}, fail); err != nil {
			return err
		}
		if msg := checkWebhookURL(w.URL); msg != "" {
			return fail(where+".url", "%s", msg)
		}
		if m := varRef.FindStringSubmatch(w.Secret); m == nil || m[0] != w.Secret || !varName.MatchString(m[1]) {
			if _, err := decodeSecret(w.Secret); err != nil {
				// Never quote it: it may be the secret itself.
				return fail(where+".secret", "want a ${VAR} reference (or the secret itself): %v", err)
			}
		}
		f, err := checkFilter(w.Filter, where, fail)
		if err != nil {
			return err
		}
		cfg.Notify.Webhooks = append(cfg.Notify.Webhooks, Webhook{URL: w.URL, Secret: w.Secret, Filter: f, path: cfg.path, where: where})
	}
	for i, r := range top.Commands {
		where := fmt.Sprintf("notify.commands[%d]", i)
		var c struct {
			Argv    []string `json:"argv"`
			Timeout string   `json:"timeout"`
			Filter
		}
		if err := json.Unmarshal(r, &c); err != nil || isJSONNull(r) {
			return fail(where, `want {"argv": ["notify-send", "taskdeck"], "events": [...]}, got %s`, jsonKind(r))
		}
		if err := knownKeys(r, where, []string{"argv", "timeout", "events", "servers", "tools"}, fail); err != nil {
			return err
		}
		if len(c.Argv) == 0 || c.Argv[0] == "" {
			return fail(where+".argv", `want the program and its arguments, such as ["notify-send", "taskdeck"] (run without a shell)`)
		}
		timeout := DefaultHookTimeout
		if c.Timeout != "" {
			d, err := time.ParseDuration(c.Timeout)
			if err != nil || d <= 0 || d > MaxHookTimeout {
				return fail(where+".timeout", "want a positive duration up to %s such as \"10s\", got %q", MaxHookTimeout, c.Timeout)
			}
			timeout = d
		}
		f, err := checkFilter(c.Filter, where, fail)
		if err != nil {
			return err
		}
		cfg.Notify.Commands = append(cfg.Notify.Commands, CommandHook{Argv: c.Argv, Timeout: timeout, Filter: f})
	}
	return nil
}

func parsePollsFailing(raw json.RawMessage, fail func(string, string, ...any) error) (PollsFailing, error) {
	rule := PollsFailing{Polls: DefaultFailingPolls, After: DefaultFailingAfter}
	if raw == nil || isJSONNull(raw) {
		return rule, nil
	}
	const where = "notify.pollsFailing"
	var r struct {
		Polls *int   `json:"polls"`
		After string `json:"after"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return rule, fail(where, `want {"polls": 3, "after": "2m"}, got %s`, jsonKind(raw))
	}
	if err := knownKeys(raw, where, []string{"polls", "after"}, fail); err != nil {
		return rule, err
	}
	if r.Polls != nil {
		if *r.Polls < 1 || *r.Polls > MaxFailingPolls {
			return rule, fail(where+".polls", "want a number of failed polls in a row from 1 to %d, got %d", MaxFailingPolls, *r.Polls)
		}
		rule.Polls = *r.Polls
	}
	if r.After != "" {
		d, err := time.ParseDuration(r.After)
		if err != nil || d < 0 || d > MaxFailingAfter {
			return rule, fail(where+".after", "want a duration from 0s to %s such as \"2m\", got %q", MaxFailingAfter, r.After)
		}
		rule.After = d
	}
	return rule, nil
}

func checkFilter(f Filter, where string, fail func(string, string, ...any) error) (Filter, error) {
	if f.Events == nil {
		f.Events = slices.Clone(DefaultEvents)
	}
	for i, e := range f.Events {
		if !slices.Contains(EventKinds, e) {
			return f, fail(fmt.Sprintf("%s.events[%d]", where, i), "unknown event %q; the events are %s", e, strings.Join(EventKinds, ", "))
		}
	}
	return f, nil
}
