package ui

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/taskdeck/taskdeck/termtext"
)

// The filter (/) is a search: words that must all appear in a row's text
// (its id, server, tool, status, message, arguments and result), and
// field terms that look in one field: tool:sleep, server:web,
// status:failed. A term with a leading - must not match.

// searchFields are the fields a term may name.
var searchFields = []string{"id", "server", "tool", "status", "msg", "args", "result"}

// searchCap bounds the text of a task's arguments and result a search
// looks in: at 100,000 tasks the rows must stay small.
const searchCap = 2048

// rowText is a row's text as the search sees it, in lower case. Quotes
// are dropped from arguments and results, so that seconds:5 finds
// {"seconds":5}.
type rowText struct {
	id, server, tool, status, msg, args, result string
	all                                         string // every field, for plain words
}

func newRowText(r *row) rowText {
	t := r.task
	flat := func(raw []byte) string {
		if len(raw) > searchCap {
			raw = raw[:searchCap]
		}
		return strings.ToLower(termtext.Line(string(bytes.ReplaceAll(raw, []byte(`"`), nil))))
	}
	x := rowText{
		id: strings.ToLower(t.ID), server: strings.ToLower(r.server), tool: strings.ToLower(r.tool),
		status: string(t.Status), msg: strings.ToLower(r.msg), args: flat(t.Arguments), result: flat(t.Result),
	}
	x.all = strings.Join([]string{x.id, x.server, x.tool, x.status, x.msg, x.args, x.result}, "\x00")
	return x
}

func (x *rowText) field(name string) string {
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
	}
	return x.all
}

// term is one word of a search.
type term struct {
	field string // one of searchFields, or "" for every field
	text  string // lower case
	not   bool
}

// query is a parsed search; every term must hold.
type query []term

// parseQuery reads a search. A word field:value whose field is not one
// of searchFields is a plain word (JSON such as "a":1 stays searchable).
func parseQuery(s string) query {
	var q query
	for _, w := range strings.Fields(strings.ToLower(s)) {
		var t term
		if len(w) > 1 && w[0] == '-' {
			t.not, w = true, w[1:]
		}
		if f, v, ok := strings.Cut(w, ":"); ok && v != "" && slices.Contains(searchFields, f) {
			t.field, w = f, v
		}
		t.text = w
		q = append(q, t)
	}
	return q
}

func (q query) match(x *rowText) bool {
	for _, t := range q {
		if strings.Contains(x.field(t.field), t.text) == t.not {
			return false
		}
	}
	return true
}

// maxHistory bounds the searches kept.
const maxHistory = 100

// searchHistory is the searches kept with enter, oldest first, in a
// file of one search a line when it has a path. ↑ and ↓ in the filter
// prompt walk it.
type searchHistory struct {
	path  string
	items []string
	pos   int // len(items) when not walking
}

// loadHistory reads the history file; a missing file is an empty
// history.
func loadHistory(path string) (*searchHistory, error) {
	h := &searchHistory{path: path}
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return h, fmt.Errorf("search history %s cannot be read: %w (searches are kept for this session only)", path, err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			if line := termtext.Line(sc.Text()); line != "" {
				h.items = append(h.items, line)
			}
		}
		h.items = h.items[max(len(h.items)-maxHistory, 0):]
	}
	h.pos = len(h.items)
	return h, nil
}

// add keeps a search as the newest (once), and writes the file.
func (h *searchHistory) add(s string) error {
	s = strings.TrimSpace(s)
	defer func() { h.pos = len(h.items) }()
	if s == "" {
		return nil
	}
	h.items = append(slices.DeleteFunc(h.items, func(x string) bool { return x == s }), s)
	h.items = h.items[max(len(h.items)-maxHistory, 0):]
	if h.path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(h.path), 0o700); err != nil {
		return fmt.Errorf("search history not saved: %w", err)
	}
	tmp := h.path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(h.items, "\n")+"\n"), 0o600); err != nil {
		return fmt.Errorf("search history not saved: %w", err)
	}
	if err := os.Rename(tmp, h.path); err != nil {
		return fmt.Errorf("search history not saved: %w", err)
	}
	return nil
}

// step moves through the history (-1 older, +1 newer) and returns the
// search there; past the newest it is empty.
func (h *searchHistory) step(d int) string {
	h.pos = max(min(h.pos+d, len(h.items)), 0)
	if h.pos == len(h.items) {
		return ""
	}
	return h.items[h.pos]
}
