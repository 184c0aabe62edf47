package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
)

// An agent that is restarted calls again. Two things let its retry find
// the first task instead of launching a second (issue 25, item 8):
//
//   - its idempotency key, sent as the Idempotency-Key header or as
//     _meta["io.taskdeck/idempotencyKey"] (stdio has no headers), becomes
//     the record's key, scoped to the agent's principal; and
//   - on a server whose config has "reattach" for the tool, the same agent
//     (principal and clientInfo name) calling with the same arguments
//     while its first call is still open is given that task.
//
// Either way the task id the agent is given must be the same for every
// repeat, so its secret is derived from what the repeats share rather
// than drawn at random: whoever can send the repeat may read the task
// anyway, by sending it.
const (
	idempotencyHeader = "Idempotency-Key"
	idempotencyMeta   = "io.taskdeck/idempotencyKey"
	// maxAgentKey bounds an agent's key, in bytes.
	maxAgentKey = 200
)

// repeat is what lets an agent's call be found again.
type repeat struct {
	key      string // the record's idempotency key; "" for none
	reattach bool   // an open call of the same agent is re-attached to
	secret   string // the task id's secret; "" for a fresh random one
}

// repeatOf reads the agent's key and the server's reattach setting for a
// call; a key that is not a short printable string is refused.
func (ep *endpoint) repeatOf(ctx context.Context, id json.RawMessage, cp callParams, m meta) (repeat, *response) {
	key, from := "", ""
	if h, ok := ctx.Value(agentHeadersKey{}).(http.Header); ok && h.Get(idempotencyHeader) != "" {
		key, from = h.Get(idempotencyHeader), "the "+idempotencyHeader+" header"
	}
	if v, ok := cp.Meta[idempotencyMeta]; ok {
		s, isText := v.(string)
		switch {
		case !isText:
			return repeat{}, fail(id, jsonrpc.CodeInvalidParams, fmt.Sprintf("_meta %q must be a string", idempotencyMeta))
		case key != "" && s != key:
			return repeat{}, fail(id, jsonrpc.CodeInvalidParams, fmt.Sprintf("the %s header %q and _meta %q %q differ; send one key", idempotencyHeader, key, idempotencyMeta, s))
		}
		key, from = s, fmt.Sprintf("_meta %q", idempotencyMeta)
	}
	if key != "" && (len(key) > maxAgentKey || strings.IndexFunc(key, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0) {
		return repeat{}, fail(id, jsonrpc.CodeInvalidParams, fmt.Sprintf("the idempotency key in %s must be printable text of at most %d bytes", from, maxAgentKey))
	}
	who := ep.who.who.Name
	r := repeat{reattach: ep.cfg.Reattaches(cp.Name)}
	switch {
	case key != "":
		r.key = agentKeyPrefix(who) + key
		r.secret = derivedSecret("key", who, key)
	case r.reattach:
		r.secret = derivedSecret("reattach", who, m.Agent, model.ArgsHash(ep.ref(), cp.Name, cp.Arguments))
	}
	return r, nil
}

// agentKeyPrefix scopes an agent's idempotency key to its principal.
func agentKeyPrefix(who string) string { return "proxy:" + who + ":" }

// derivedSecret is a task id secret that every repeat of a call computes
// alike (see above); its 128 bits are as long as a random one's.
func derivedSecret(parts ...string) string {
	return hashHandle("taskdeck repeat\x00" + strings.Join(parts, "\x00"))[:32]
}

// openRepeat is the agent's open call that this one repeats, if any: of
// this server and tool, by the same principal, with the handle every
// repeat derives (which names the agent and the arguments).
func (ep *endpoint) openRepeat(ctx context.Context, tool string, hash string) (*model.Task, error) {
	list, err := ep.p.opts.Deck.List(ctx, deck.Filter{Server: ep.cfg.Name, Tool: tool, Groups: []string{"open"}, Statuses: []model.Status{model.StatusCalling}})
	if err != nil {
		return nil, err
	}
	for _, e := range list {
		if t := e.Task; t.HandleHash == hash && t.Owner == ep.who.who.Name && !ended(t) {
			return t, nil
		}
	}
	return nil, nil
}
