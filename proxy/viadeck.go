package proxy

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/taskdeck/taskdeck/mcpclient"
	"github.com/taskdeck/taskdeck/mcpclient/wire"
)

// A stdio server is a child of the engine's pool: the proxy has no raw
// route to it and reaches it through the Deck alone. Its discovery and
// tools are served from the Deck's tool list; requests the Deck does not
// serve (resources, prompts) are refused with a message that says so.

// viaDeck tells an endpoint without a URL.
func (ep *endpoint) viaDeck() bool { return ep.cfg.URL == "" }

func (ep *endpoint) unreachableViaDeck(id json.RawMessage, err error) *response {
	return fail(id, jsonrpc.CodeInternalError, "taskdeck proxy: server "+ep.cfg.Name+" cannot be reached: "+err.Error())
}

// discoverViaDeck answers server/discover for a stdio server.
func (ep *endpoint) discoverViaDeck(ctx context.Context, req *request) *response {
	if _, err := ep.p.opts.Deck.Tools(ctx, ep.ref(), false); err != nil {
		return ep.unreachableViaDeck(req.ID, err)
	}
	return reply(req.ID, map[string]any{
		"resultType":        wire.ResultTypeComplete,
		"supportedVersions": []string{wire.ProtocolVersion},
		"capabilities":      map[string]any{"tools": map[string]any{}, "extensions": map[string]any{wire.ExtensionID: map[string]any{}}},
		"_meta":             map[string]any{"io.modelcontextprotocol/serverInfo": map[string]string{"name": "taskdeck proxy for " + ep.cfg.Name, "version": mcpclient.Version}},
	})
}

// viaDeck answers a request other than a call or a task's for a stdio
// server.
func (ep *endpoint) answerViaDeck(ctx context.Context, req *request) *response {
	switch req.Method {
	case "ping":
		return reply(req.ID, map[string]string{"resultType": wire.ResultTypeComplete})
	case "tools/list":
		list, err := ep.p.opts.Deck.Tools(ctx, ep.ref(), false)
		if err != nil {
			return ep.unreachableViaDeck(req.ID, err)
		}
		tools := make([]json.RawMessage, 0, len(list.Tools))
		for _, t := range list.Tools {
			tools = append(tools, t.Raw)
		}
		return reply(req.ID, map[string]any{"resultType": wire.ResultTypeComplete, "tools": tools})
	}
	return fail(req.ID, jsonrpc.CodeMethodNotFound, "taskdeck proxy serves only tools and tasks for the stdio server "+ep.cfg.Name+"; give it a url in the config to relay "+req.Method)
}
