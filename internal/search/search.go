// Package search is the one search of tasks that the dashboard's filter
// and `taskdeck ls --search` share: words that must all appear in a
// task's text (its id, server, tool, status, message, arguments and
// result, its agent and its key), and field terms that look in one field
// (tool:sleep, server:web, status:failed, agent:ci-bot, key:deploy-42).
// A term with a leading - must not match.
package search

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/taskdeck/taskdeck/internal/nearest"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/termtext"
)

// Fields are the fields a term may name.
var Fields = []string{"id", "server", "tool", "status", "msg", "args", "result", "agent", "key"}

// textCap bounds the text of a task's arguments and result a search
// looks in: at 100,000 tasks the dashboard's rows must stay small.
const textCap = 2048

// Text is a task's text as the search sees it, in lower case and
// sanitized. Quotes are dropped from arguments and results, so that
// seconds:5 finds {"seconds":5}.
type Text struct {
	id, server, tool, status, msg, args, result, agent, key string
	all                                                     string // every field, for plain words
}

// Of is the text of a task whose message is msg (what its row shows).
func Of(t *model.Task, msg string) Text {
	flat := func(raw []byte) string {
		if len(raw) > textCap {
			raw = raw[:textCap]
		}
		return strings.ToLower(termtext.Line(string(bytes.ReplaceAll(raw, []byte(`"`), nil))))
	}
	x := Text{
		id: strings.ToLower(t.ID), server: strings.ToLower(termtext.Line(t.Server.String())), tool: strings.ToLower(termtext.Line(t.Tool)),
		status: string(t.Status), msg: strings.ToLower(termtext.Line(msg)), args: flat(t.Arguments), result: flat(t.Result),
		agent: strings.ToLower(termtext.Line(t.Agent)), key: strings.ToLower(termtext.Line(t.IdempotencyKey)),
	}
	x.all = strings.Join([]string{x.id, x.server, x.tool, x.status, x.msg, x.args, x.result, x.agent, x.key}, "\x00")
	return x
}

func (x *Text) field(name string) string {
	switch name {
	case "id":
		return x.id
	case "server":
		return x.server
	case "tool":
		return x.tool
	case "status":
		return x.status
	case "msg":
		return x.msg
	case "args":
		return x.args
	case "result":
		return x.result
	case "agent":
		return x.agent
	case "key":
		return x.key
	}
	return x.all
}

// term is one word of a search.
type term struct {
	field string // one of Fields, or "" for every field
	text  string // lower case
	not   bool
}

// Query is a parsed search; every term must hold. The empty query
// matches everything.
type Query []term

// Parse reads a search. A word field:value whose field is not one of
// Fields is a plain word (JSON such as "a":1 stays searchable).
func Parse(s string) Query {
	var q Query
	for _, w := range strings.Fields(strings.ToLower(s)) {
		var t term
		if len(w) > 1 && w[0] == '-' {
			t.not, w = true, w[1:]
		}
		if f, v, ok := strings.Cut(w, ":"); ok && v != "" && slices.Contains(Fields, f) {
			t.field, w = f, v
		}
		t.text = w
		q = append(q, t)
	}
	return q
}

// Unmatched explains a search that matched nothing when one of its words
// looks like a field term (name:value) whose name is not a field: it was
// searched as a plain word (so that seconds:5 finds {"seconds":5}), but
// a misspelt or unknown field is the likelier cause. nil otherwise.
func (q Query) Unmatched() error {
	for _, t := range q {
		name, _, ok := strings.Cut(t.text, ":")
		if t.field != "" || t.not || !ok || name == "" || strings.IndexFunc(name, func(r rune) bool { return r < 'a' || r > 'z' }) >= 0 {
			continue
		}
		hint := ""
		if close := nearest.Names(name, Fields); len(close) > 0 {
			hint = fmt.Sprintf("did you mean %s:? ", close[0])
		}
		return fmt.Errorf("no task matches %q: %q is not a search field, and no task holds it as a word; %sthe fields are %s", t.text, name, hint, strings.Join(Fields, ", "))
	}
	return nil
}

// Match tells whether the text holds every term.
func (q Query) Match(x *Text) bool {
	for _, t := range q {
		if strings.Contains(x.field(t.field), t.text) == t.not {
			return false
		}
	}
	return true
}

// Field is the text of one of Fields as the search sees it ("": every
// field).
func (x *Text) Field(name string) string { return x.field(name) }

// Split parts the terms on field from the others: a caller with many
// texts that share a few values of field decides on each value once.
func (q Query) Split(field string) (on, rest Query) {
	for _, t := range q {
		if t.field == field {
			on = append(on, t)
		} else {
			rest = append(rest, t)
		}
	}
	return on, rest
}

// MatchValue tells whether a field's value (as Text.Field gives it)
// holds every term of q; q's terms are all on that field (Split).
func (q Query) MatchValue(value string) bool {
	for _, t := range q {
		if strings.Contains(value, t.text) == t.not {
			return false
		}
	}
	return true
}

// Narrows tells whether every text q matches also matches prev, so that
// q's matches may be sought among prev's alone (a letter typed at the end
// of a search): each term of prev is implied by a term of q on the same
// field, a longer word that holds it, or for a - term a shorter one.
func (q Query) Narrows(prev Query) bool {
	for _, p := range prev {
		if !slices.ContainsFunc(q, func(t term) bool {
			if t.field != p.field || t.not != p.not {
				return false
			}
			if t.not {
				return strings.Contains(p.text, t.text)
			}
			return strings.Contains(t.text, p.text)
		}) {
			return false
		}
	}
	return true
}
