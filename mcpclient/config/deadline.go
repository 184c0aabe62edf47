package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"
)

// What the engine does at a wait's deadline besides the deadline event
// (a server's "onDeadline"); the default is nothing more.
const (
	OnDeadlineDecline = "decline" // decline the input requests still unanswered
	OnDeadlineCancel  = "cancel"  // cancel the task
)

// MaxDeadline bounds a configured deadline: a year is already "never".
const MaxDeadline = 366 * 24 * time.Hour

// Deadlines is what a server entry says of its waits for input: how long
// a wait may last before the engine escalates (issue 27), per tool or for
// every tool, and what it does then.
type Deadlines struct {
	Default time.Duration            // "deadline"; 0: none
	Tools   map[string]time.Duration // "toolDeadlines": a tool's own
	On      string                   // "onDeadline": "", decline or cancel
}

// For is the deadline of a wait of tool (0: none): the tool's own, else
// the server's.
func (d Deadlines) For(tool string) time.Duration {
	if v, ok := d.Tools[tool]; ok {
		return v
	}
	return d.Default
}

// parseDeadlines reads a server entry's "deadline", "toolDeadlines" and
// "onDeadline".
func parseDeadlines(fields map[string]json.RawMessage, fail func(string, string, ...any) error) (Deadlines, error) {
	var d Deadlines
	duration := func(where string, raw json.RawMessage) (time.Duration, error) {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			if v, err := time.ParseDuration(s); err == nil && v > 0 && v <= MaxDeadline {
				return v, nil
			}
		}
		return 0, fail(where, "want a positive duration up to %s such as \"2h\" or \"30m\", got %s", MaxDeadline, badValue(raw))
	}
	var err error
	if raw, ok := fields["deadline"]; ok && !isJSONNull(raw) {
		if d.Default, err = duration(".deadline", raw); err != nil {
			return d, err
		}
	}
	if raw, ok := fields["toolDeadlines"]; ok && !isJSONNull(raw) {
		var tools map[string]json.RawMessage
		if json.Unmarshal(raw, &tools) != nil {
			return d, fail(".toolDeadlines", `want an object of tool names to durations, e.g. {"deploy": "30m"}, got %s`, jsonKind(raw))
		}
		d.Tools = make(map[string]time.Duration, len(tools))
		for _, tool := range slices.Sorted(maps.Keys(tools)) {
			if d.Tools[tool], err = duration(".toolDeadlines"+fieldKey(tool), tools[tool]); err != nil {
				return d, err
			}
		}
	}
	if raw, ok := fields["onDeadline"]; ok && !isJSONNull(raw) {
		if json.Unmarshal(raw, &d.On) != nil || (d.On != OnDeadlineDecline && d.On != OnDeadlineCancel) {
			return d, fail(".onDeadline", "want %q (decline the unanswered input) or %q (cancel the task); leave it out to only be told, got %s",
				OnDeadlineDecline, OnDeadlineCancel, badValue(raw))
		}
	}
	return d, nil
}

// badValue names a refused value in a one-line message: a string quoted
// (its first 40 bytes), anything else by its kind.
func badValue(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return jsonKind(raw)
	}
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return fmt.Sprintf("%q", s)
}
