package mcpclient

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/mcpclient/wire"
	"github.com/taskdeck/taskdeck/termtext"
)

// ErrTaskUnknown means that the server answered -32602 to a tasks/* request. The task
// expired, was purged, or the server lost it in a restart; it is gone.
var ErrTaskUnknown = errors.New("the server no longer knows this task")

// ErrNoTasks means that the server does not implement the Tasks extension (-32601).
var ErrNoTasks = errors.New("the server does not support the tasks extension")

// ErrExtensionRequired means that the server insists on the tasks extension (-32021).
var ErrExtensionRequired = errors.New("the server requires the tasks extension on this request")

// ServerError is any other JSON-RPC error the server answered with.
type ServerError struct {
	Code    int64
	Message string
	Data    json.RawMessage
}

func (e *ServerError) Error() string {
	return fmt.Sprintf("server error %d: %s", e.Code, e.Message)
}

// VersionError means that the server does not speak our protocol version (-32022).
type VersionError struct {
	Supported []string
}

func (e *VersionError) Error() string {
	if len(e.Supported) == 0 {
		return "the server does not support protocol " + wire.ProtocolVersion
	}
	return fmt.Sprintf("the server does not support protocol %s (it supports %s)",
		wire.ProtocolVersion, strings.Join(e.Supported, ", "))
}

// TransportError means that the server could not be reached, or the exchange broke.
// Whether a request that failed this way took effect is unknown.
type TransportError struct {
	Server string
	Err    error
	// RetryAfter is the wait the server asked for (429/503), if any.
	RetryAfter time.Duration
	// Transient: go-sdk rejected this one request (429/5xx, an HTTP
	// exchange that failed) and keeps the session usable, or the request
	// went out on its own (tasks/get over HTTP), past the session.
	// Otherwise the session is broken (go-sdk fails it for good, e.g. on
	// a body it cannot decode) and must be dropped and reconnected.
	Transient bool
}

func (e *TransportError) Error() string {
	var re *RedirectError
	var big *tooLargeError
	switch {
	case errors.As(e.Err, &re):
		return fmt.Sprintf("server %s %s", e.Server, re.Error())
	case errors.As(e.Err, &big):
		return fmt.Sprintf("server %s: %s", e.Server, big.Error())
	case e.Answered():
		return fmt.Sprintf("server %s answered, but not in the protocol: %s", e.Server, cleanText(e.Err.Error()))
	}
	return fmt.Sprintf("server %s unreachable: %s", e.Server, cleanText(e.Err.Error()))
}

// Answered reports an exchange that failed on what the server sent (an
// answer that does not decode), not on reaching it.
func (e *TransportError) Answered() bool {
	// go-sdk's own decode failure has no type: only its text says so.
	return errors.Is(e.Err, wire.ErrInvalid) || strings.Contains(e.Err.Error(), "failed to decode response")
}

func (e *TransportError) Unwrap() error { return e.Err }

// RedirectError means that the server answered with an HTTP redirect. taskdeck does
// not follow one: streamable HTTP has no use for it, and following it
// would send the request, and the configured headers, to another host.
// The server that answered started nothing.
type RedirectError struct {
	Method   string // the JSON-RPC method of the request
	Code     int    // the HTTP status
	Location string // where it pointed, redacted
}

func (e *RedirectError) Error() string {
	return fmt.Sprintf("answered %s with a redirect (HTTP %d) to %s; taskdeck does not follow redirects: if you trust that address, configure it as the server's url",
		cmp.Or(e.Method, "a request"), e.Code, e.Location)
}

// codeSDKRejected is go-sdk's code for "rejected by transport".
const codeSDKRejected = -32005

// classify maps what go-sdk returned to our typed errors. taskMethod tells
// whether -32602 means "task unknown" (tasks/*) or "bad params" (tools/call).
func classify(server string, err error, taskMethod bool, info *callInfo) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) {
		return cleanError{err}
	}
	var werr *jsonrpc.Error
	// go-sdk reports a request that never got a JSON-RPC answer (refused
	// connection, 429/502/503/504) as its own "rejected by transport" error.
	if errors.As(err, &werr) && !(werr.Code == codeSDKRejected && werr.Message == "rejected by transport") {
		switch werr.Code {
		case wire.CodeInvalidParams:
			if taskMethod {
				return ErrTaskUnknown
			}
		case wire.CodeMethodNotFound:
			if taskMethod {
				return ErrNoTasks
			}
		case wire.CodeMissingCapability, wire.LegacyCodeMissingCapability:
			return ErrExtensionRequired
		case wire.CodeUnsupportedVersion, wire.LegacyCodeUnsupportedVersion:
			var data struct {
				Supported []string `json:"supported"`
			}
			_ = json.Unmarshal(werr.Data, &data) // the list is a courtesy
			return &VersionError{Supported: data.Supported}
		}
		return &ServerError{Code: werr.Code, Message: RedactedLine(werr.Message), Data: werr.Data}
	}
	var own *requestError
	te := &TransportError{Server: config.RedactURLs(server), Err: err, Transient: werr != nil && werr.Code == codeSDKRejected || errors.As(err, &own)}
	if info != nil {
		info.mu.Lock()
		te.RetryAfter = info.retryAfter
		info.mu.Unlock()
	}
	return te
}

// cleanError is an error from go-sdk or net/http in taskdeck's words: its
// text is cleaned (cleanText), what it wraps is unchanged.
type cleanError struct{ err error }

func (e cleanError) Error() string { return cleanText(e.err.Error()) }
func (e cleanError) Unwrap() error { return e.err }

var (
	// go-sdk says `calling "M": sending "M": rejected by transport: ` in
	// front of what went wrong; only M says anything. It reports a failed
	// server/discover through its fallback, initialize.
	sdkCalling = regexp.MustCompile(`calling "([^"]+)": `)
	sdkNoise   = regexp.MustCompile(`sending "[^"]+": |rejected by transport(: )?`)
	// net/http's url.Error: `Post "URL": `; the server is named already.
	httpOp = regexp.MustCompile(`\b(Post|Get|Delete) "[^"]*": `)
)

// cleanText is an error text as taskdeck prints, stores and logs it: in
// this protocol's words, with no secret from a URL, on one line.
func cleanText(s string) string {
	s = sdkCalling.ReplaceAllStringFunc(s, func(m string) string {
		if method := sdkCalling.FindStringSubmatch(m)[1]; method != "initialize" {
			return method + ": "
		}
		return "connecting: "
	})
	s = sdkNoise.ReplaceAllString(s, "")
	s = httpOp.ReplaceAllString(s, "")
	return RedactedLine(s)
}

// RedactedLine keeps a server's or transport's message to one line of at
// most 300 characters, whose URLs have lost their secrets: it may be
// stored or shown.
func RedactedLine(s string) string { return termtext.OneLine(config.RedactURLs(s), 300) }
