package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskdeck/taskdeck/internal/nearest"
	"github.com/taskdeck/taskdeck/mcpclient/wire"
	"github.com/taskdeck/taskdeck/model"
)

// DefaultToolsTTL is how long a session uses a tool list whose server
// gave no ttlMs before listing again.
const DefaultToolsTTL = 5 * time.Minute

// maxToolPages bounds tools/list pagination against a server whose
// cursors never end.
const maxToolPages = 100

// ToolList is a server's tools as one session listed them.
type ToolList struct {
	Tools  []*mcp.Tool        // as go-sdk decoded them, sorted by name
	Raw    []json.RawMessage  // every tool exactly as the server sent it, in its order
	byName map[string]rawTool // from Raw

	fetched time.Time
	ttl     time.Duration
}

type rawTool struct {
	sent        json.RawMessage
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// toolCache is a session's tool list. go-sdk mirrors x-mcp-header
// arguments into Mcp-Param-* headers (SEP-2243) only for tools listed on
// the same session, so the list lives with the session and is listed
// again when stale; mu is held while listing, so callers share one list.
type toolCache struct {
	mu   sync.Mutex
	list *ToolList
}

// Tools returns the session's tool list, listing it when there is none
// yet or it is older than its ttlMs (DefaultToolsTTL when the server gave
// none).
func (s *Session) Tools(ctx context.Context) (*ToolList, error) {
	l, _, err := s.tools.get(ctx, s, false)
	return l, err
}

// ListedTools is Tools, listing again now when refresh is set.
func (s *Session) ListedTools(ctx context.Context, refresh bool) (*ToolList, error) {
	l, _, err := s.tools.get(ctx, s, refresh)
	return l, err
}

// get returns the list, listing it when stale or when refresh is set;
// fetched tells whether it was listed by this call. (While a server's
// ttlMs runs, go-sdk answers a listing from its own copy: refresh cannot
// see past a list the server declared valid.)
func (c *toolCache) get(ctx context.Context, s *Session, refresh bool) (*ToolList, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l := c.list; l != nil && !refresh && time.Since(l.fetched) < l.ttl {
		return l, false, nil
	}
	l, err := s.listTools(ctx)
	if err != nil {
		return nil, false, err
	}
	c.list = l
	return l, true, nil
}

// listTools sends tools/list, following pagination, and keeps every tool
// as it was sent next to go-sdk's decoding of it.
func (s *Session) listTools(ctx context.Context) (*ToolList, error) {
	ctx, cancel := WithRequestTimeout(ctx, s.timeout)
	defer cancel()
	l := &ToolList{byName: map[string]rawTool{}}
	var ttlMs int
	seen := map[string]bool{}
	cursor := ""
	for page := 0; ; page++ {
		info := &callInfo{}
		res, err := s.cs.ListTools(withCallInfo(ctx, info), &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, classify(s.ref.String(), err, false, nil)
		}
		var sent struct {
			Tools []json.RawMessage `json:"tools"`
			TTLMs int               `json:"ttlMs"`
		}
		if raw := info.result(); raw != nil {
			if err := json.Unmarshal(raw, &sent); err != nil {
				return nil, &TransportError{Server: s.ref.String(), Err: fmt.Errorf("tools/list result: %w", err)}
			}
		} else {
			// go-sdk answered from its own cache (the server's ttlMs
			// still runs): its decoding is all there is.
			for _, t := range res.Tools {
				b, _ := json.Marshal(t)
				sent.Tools = append(sent.Tools, b)
			}
			sent.TTLMs = res.TTLMs
		}
		if sent.TTLMs > 0 && (ttlMs == 0 || sent.TTLMs < ttlMs) {
			ttlMs = sent.TTLMs
		}
		for _, raw := range sent.Tools {
			var t rawTool
			if json.Unmarshal(raw, &t) != nil || t.Name == "" {
				continue // a tool without a name cannot be called
			}
			t.sent = raw
			l.Raw = append(l.Raw, raw)
			l.byName[t.Name] = t
		}
		l.Tools = append(l.Tools, res.Tools...)
		seen[cursor] = true
		cursor = res.NextCursor
		if cursor == "" || seen[cursor] || page+1 >= maxToolPages {
			break
		}
	}
	// Timed from the answer, as go-sdk times its own copy of a list with a
	// ttlMs: ours then runs out no sooner than its, and the next listing
	// reaches the server (go-sdk would answer it from its copy).
	l.fetched, l.ttl = time.Now(), DefaultToolsTTL
	if ttlMs > 0 {
		l.ttl = time.Duration(ttlMs) * time.Millisecond
	}
	slices.SortFunc(l.Tools, func(a, b *mcp.Tool) int { return strings.Compare(a.Name, b.Name) })
	return l, nil
}

// refusedForHeaders tells whether a server refused a request for its
// headers (400, -32020) before acting on it.
func refusedForHeaders(err error) bool {
	var je *jsonrpc.Error
	return errors.As(err, &je) && je.Code == wire.CodeHeaderMismatch
}

// Sent is a tool exactly as the server sent it, nil if it listed none
// of that name.
func (l *ToolList) Sent(name string) json.RawMessage { return l.byName[name].sent }

// Description is a tool's description as the server sent it.
func (l *ToolList) Description(name string) string { return l.byName[name].Description }

// CallError is a call that does not fit the server's tool list: an
// unknown tool or arguments its input schema refuses. Nothing was sent.
type CallError struct{ msg string }

func (e *CallError) Error() string { return e.msg }

// Check tells whether a call of tool with args (a JSON object) fits the
// list: an unknown name or arguments the tool's input schema refuses is a
// *CallError. A schema taskdeck cannot read is not held against the call:
// the server has the last word.
func (l *ToolList) Check(tool string, args json.RawMessage) error {
	t, ok := l.byName[tool]
	if !ok {
		return l.unknown(tool)
	}
	sc, err := model.ReadSchema(t.InputSchema)
	if err != nil {
		return nil
	}
	resolved, err := sc.Resolve(nil)
	if err != nil {
		return nil
	}
	var v any = map[string]any{}
	if len(args) > 0 {
		if err := json.Unmarshal(args, &v); err != nil {
			return &CallError{msg: fmt.Sprintf("--args: %v", err)}
		}
	}
	// SEP-2243: null on an optional argument that travels as a header
	// means "send no header", so it stands for the argument's absence,
	// whatever the schema's type (the body goes as given).
	for _, a := range sc.Arguments() {
		if a.Header != "" && !a.Required {
			dropNull(v, strings.Split(a.Name, "."))
		}
	}
	if err := resolved.Validate(v); err != nil {
		return &CallError{msg: fmt.Sprintf("--args of %s: %s", tool, explain(sc, v, err))}
	}
	return nil
}

// dropNull removes the property at path from v if it is null.
func dropNull(v any, path []string) {
	for _, name := range path[:len(path)-1] {
		m, _ := v.(map[string]any)
		v = m[name]
	}
	last := path[len(path)-1]
	if m, ok := v.(map[string]any); ok {
		if val, ok := m[last]; ok && val == nil {
			delete(m, last)
		}
	}
}

// unknown names a tool that is not in the list, with the names close to it.
func (l *ToolList) unknown(tool string) *CallError {
	return UnknownTool(tool, slices.Collect(maps.Keys(l.byName)))
}

// UnknownTool is the *CallError for a tool the server does not list
// among names: it names the ones meant, if some are close, else the
// first ten.
func UnknownTool(tool string, names []string) *CallError {
	names = slices.Sorted(slices.Values(names))
	switch close := nearest.Names(tool, names); {
	case len(close) > 0:
		return &CallError{msg: fmt.Sprintf("the server has no tool %q; did you mean %s?", tool, strings.Join(close, ", "))}
	case len(names) == 0:
		return &CallError{msg: fmt.Sprintf("the server has no tool %q; it lists no tools", tool)}
	}
	if len(names) > 10 {
		names = append(names[:10], "…")
	}
	return &CallError{msg: fmt.Sprintf("the server has no tool %q; it has %s", tool, strings.Join(names, ", "))}
}

var (
	// jsonschema-go reports where validation failed as a JSON pointer in
	// "validating /properties/a/properties/b: …" (the last one is deepest).
	failedAt = regexp.MustCompile(`validating (/[^:]*): `)
	missing  = regexp.MustCompile(`required: missing properties: (\[.*?\])`)
	extra    = regexp.MustCompile(`unexpected additional properties (\[.*?\])`)
)

// explain turns a jsonschema-go validation error into one line that names
// the argument, what it needs and what it got.
func explain(sc *model.Schema, args any, err error) string {
	msg := err.Error()
	var path []string
	if m := failedAt.FindAllStringSubmatch(msg, -1); len(m) > 0 {
		// The argument is named by the leading properties/NAME pairs; what
		// follows (items/…) is inside its value.
		parts := strings.Split(strings.TrimPrefix(m[len(m)-1][1], "/"), "/")
		for i := 0; i+1 < len(parts) && parts[i] == "properties"; i += 2 {
			path = append(path, parts[i+1])
		}
	}
	var names []string
	if m := missing.FindStringSubmatch(msg); m != nil && json.Unmarshal([]byte(m[1]), &names) == nil && len(names) > 0 {
		path = append(path, names[0])
		if a, ok := sc.ArgumentAt(path); ok {
			return fmt.Sprintf("%s is missing: want %s", a.Name, a.Summary())
		}
		return strings.Join(path, ".") + " is missing"
	}
	if m := extra.FindStringSubmatch(msg); m != nil && json.Unmarshal([]byte(m[1]), &names) == nil && len(names) > 0 {
		var known []string
		for _, a := range sc.Arguments() {
			known = append(known, a.Name)
		}
		return fmt.Sprintf("unknown argument %s; it takes %s", strings.Join(append(path, names[0]), "."), strings.Join(known, ", "))
	}
	if a, ok := sc.ArgumentAt(path); ok {
		got, _ := json.Marshal(valueAt(args, path))
		if r := []rune(string(got)); len(r) > 60 {
			got = []byte(string(r[:60]) + "…")
		}
		return fmt.Sprintf("%s: want %s; got %s", a.Name, a.Summary(), got)
	}
	_, after, _ := strings.Cut(msg, "validating root: ")
	if after == "" {
		after = msg
	}
	return after
}

func valueAt(v any, path []string) any {
	for _, name := range path {
		m, _ := v.(map[string]any)
		v = m[name]
	}
	return v
}

// Arguments lists the arguments of the named tool's input schema
// (model.Schema.Arguments). A tool the server did not list is a
// *CallError that names the close ones.
func (l *ToolList) Arguments(tool string) ([]model.Argument, error) {
	t, ok := l.byName[tool]
	if !ok {
		return nil, l.unknown(tool)
	}
	sc, err := model.ReadSchema(t.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("the input schema of %s cannot be read: %v", tool, err)
	}
	return sc.Arguments(), nil
}
