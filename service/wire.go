package service

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
)

// protocol is the wire's version: an owner and a client of another
// version refuse each other with a one-line error instead of guessing.
const protocol = 1

// The bounds of what crosses the socket. A snapshot holds every record,
// so answers may be large; requests carry arguments and answers.
const (
	maxRequest  = 16 << 20
	maxResponse = 512 << 20
)

// The request bodies of the methods whose arguments are not one struct.
type (
	idReq struct {
		ID string `json:"id"`
	}
	foundReq struct {
		ID    string `json:"id"`
		Adopt bool   `json:"adopt"`
	}
	answersReq struct {
		ID      string                     `json:"id"`
		Answers map[string]json.RawMessage `json:"answers"`
	}
	pruneReq struct {
		OlderThan time.Duration `json:"olderThan"`
	}
	pruneResp struct {
		Count int `json:"count"`
	}
	auditPruneReq struct {
		Before time.Time `json:"before"`
	}
	pollNowReq struct {
		IDs []string `json:"ids"`
	}
	idsReq struct {
		IDs []string `json:"ids"`
	}
	// cancelManyResp has one entry per id asked: nil where it went well.
	cancelManyResp struct {
		Errors []*deck.Error `json:"errors"`
	}
	toolsReq struct {
		Server  model.ServerRef `json:"server"`
		Refresh bool            `json:"refresh"`
	}
	watchReq struct {
		From uint64 `json:"from"`
		// Window: a WatchWindow (nil: a Watch of every record).
		Window *deck.Window `json:"window,omitempty"`
	}
	pingResp struct {
		Protocol int `json:"protocol"`
		PID      int `json:"pid"`
		// Config is the owner's server configuration file: its clients'
		// calls resolve server names there.
		Config string `json:"config,omitempty"`
		// Lasting: the owner serves until it is stopped (taskdeck serve),
		// not for the lifetime of a dashboard or a command.
		Lasting bool `json:"lasting,omitempty"`
	}
	empty struct{}
)

// frame is one line of a Watch stream: an event, or the error that ended
// the owner's feed (a stream that stops without one: the owner went).
type frame struct {
	Event *deck.Event `json:"event,omitempty"`
	Err   *deck.Error `json:"error,omitempty"`
}

// The paths of the methods, one per Deck method.
const (
	pathPing       = "/v1/ping"
	pathCall       = "/v1/call"
	pathContinue   = "/v1/continue"
	pathAnswer     = "/v1/answer"
	pathCancel     = "/v1/cancel"
	pathCancelMany = "/v1/cancelMany"
	pathForget     = "/v1/forget"
	pathFound      = "/v1/found"
	pathReconcile  = "/v1/reconcile"
	pathPrune      = "/v1/prune"
	pathPollNow    = "/v1/pollNow"
	pathGet        = "/v1/get"
	pathList       = "/v1/list"
	pathServers    = "/v1/servers"
	pathTools      = "/v1/tools"
	pathCheckCall  = "/v1/checkCall"
	pathWatch      = "/v1/watch"
	// deck.Auditor's.
	pathAudit       = "/v1/audit"
	pathAuditVerify = "/v1/audit/verify"
	pathAuditPrune  = "/v1/audit/prune"
	// deck.Notifier's.
	pathNotifyStatus = "/v1/notify/status"
)

// statusOf gives each kind an HTTP status, for anyone reading the socket
// with curl; the client reads the kind from the body.
func statusOf(k deck.Kind) int {
	switch k {
	case deck.KindUsage, deck.KindNeedsInput:
		return http.StatusBadRequest
	case deck.KindNotFound:
		return http.StatusNotFound
	case deck.KindState, deck.KindConflict:
		return http.StatusConflict
	case deck.KindUnreachable:
		return http.StatusBadGateway
	case deck.KindStoreDown:
		return http.StatusServiceUnavailable
	case deck.KindCanceled:
		return 499 // the client went (nginx's code)
	}
	return http.StatusInternalServerError
}
