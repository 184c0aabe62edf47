// Package mcpclient speaks MCP and its tasks extension to the servers in
// taskdeck's config, for the engine (the only caller that changes
// records) and, through Upstream, the proxy.
//
//   - A Pool keeps one Session per server, HTTP or a stdio child
//     (config.ServerConfig), opened on first use and dropped when it
//     breaks.
//   - A Session sends tools/call and the tasks/* requests: CallTool,
//     GetTask, UpdateTask, CancelTask. tasks/get, most of what taskdeck
//     sends, goes out on a direct HTTP path (direct.go) without go-sdk's
//     session layer; every answer, JSON or an event stream
//     (wire.ScanEvents), is bounded to 16 MiB, and no redirect is
//     followed.
//   - Listen subscribes to a server's pushed task changes
//     (subscriptions/listen); a server that will not push is ErrNoPush,
//     and the caller polls.
//   - Tools caches a server's tool list; ToolList.Check refuses, before
//     anything is sent, an unknown tool or arguments the input schema
//     refuses, and Arguments describes them for help (both read the
//     schema as the forms do: model.ReadSchema).
//
// Errors are typed so the engine can classify them (deck.Kind): a
// *ServerError is the server's JSON-RPC answer, a *TransportError a
// failed exchange (whether it took effect is unknown), plus
// ErrTaskUnknown, ErrNoTasks, *VersionError and *RedirectError. Messages
// are one line and carry no URL secrets (config.RedactURLs). The wire
// types, with their lenient decoders, are package wire.
package mcpclient
