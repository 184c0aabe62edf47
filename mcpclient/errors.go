package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/taskdeck/taskdeck/mcpclient/wire"
)

// ErrTaskUnknown: the server answered -32602 to a tasks/* request. The task
// expired, was purged, or the server lost it in a restart; it is gone.
var ErrTaskUnknown = errors.New("the server no longer knows this task")

// ErrNoTasks: the server does not implement the Tasks extension (-32601).
var ErrNoTasks = errors.New("the server does not support the tasks extension")

// ErrExtensionRequired: the server insists on the tasks extension (-32021).
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

// VersionError: the server does not speak our protocol version (-32022).
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

// TransportError: the server could not be reached, or the exchange broke.
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
	if errors.Is(e.Err, wire.ErrInvalid) { // it answered, but not in the protocol
		return fmt.Sprintf("server %s: %s", e.Server, oneLine(e.Err.Error()))
	}
	return fmt.Sprintf("server %s unreachable: %s", e.Server, oneLine(e.Err.Error()))
}

func (e *TransportError) Unwrap() error { return e.Err }

// codeSDKRejected is go-sdk's code for "rejected by transport".
const codeSDKRejected = -32005

// classify maps what go-sdk returned to our typed errors. taskMethod tells
// whether -32602 means "task unknown" (tasks/*) or "bad params" (tools/call).
func classify(server string, err error, taskMethod bool, info *callInfo) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) {
		return err
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
		return &ServerError{Code: werr.Code, Message: oneLine(werr.Message), Data: werr.Data}
	}
	var own *requestError
	te := &TransportError{Server: server, Err: err, Transient: werr != nil && werr.Code == codeSDKRejected || errors.As(err, &own)}
	if info != nil {
		info.mu.Lock()
		te.RetryAfter = info.retryAfter
		info.mu.Unlock()
	}
	return te
}

// oneLine keeps multi-line transport messages to one line.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	const max = 300
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}
