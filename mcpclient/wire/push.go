package wire

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/taskdeck/taskdeck/model"
)

// Push (spec §8): a subscriptions/listen stream for task ids. The stream
// carries, in order, NotificationAcknowledged, then NotificationTasks
// messages, and ends with the listen request's ListenResult.
const (
	MethodListen             = "subscriptions/listen"
	NotificationAcknowledged = "notifications/subscriptions/acknowledged"
	NotificationTasks        = "notifications/tasks"
	// MetaSubscriptionID tags every message of a listen stream with the
	// JSON-RPC id of its listen request.
	MetaSubscriptionID = "io.modelcontextprotocol/subscriptionId"
)

// ListenFilter is params.notifications of subscriptions/listen, and of its
// acknowledgement (the ids the server agreed to push; absent means none).
type ListenFilter struct {
	TaskIDs []string `json:"taskIds,omitempty"`
}

// ListenParams are the params of subscriptions/listen (core's other
// notifications fields are not used by tasks).
type ListenParams struct {
	mcp.ParamsBase
	Notifications ListenFilter `json:"notifications"`
}

// AcknowledgedParams are the params of NotificationAcknowledged.
type AcknowledgedParams struct {
	mcp.ParamsBase
	Notifications ListenFilter `json:"notifications"`
}

// TaskNotificationParams are the params of NotificationTasks: the same
// DetailedTask as tasks/get, plus _meta.
type TaskNotificationParams struct {
	mcp.ParamsBase
	DetailedTask
}

// ListenResult is the graceful end of a listen stream.
type ListenResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

// DecodeTaskNotification checks the params of a notifications/tasks as a
// tasks/get result and turns them into a snapshot.
func DecodeTaskNotification(params json.RawMessage) (*model.Snapshot, error) {
	var p TaskNotificationParams
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, invalid("notifications/tasks: %v", err)
	}
	return DecodeTask(&GetTaskResult{ResultType: ResultTypeComplete, DetailedTask: p.DetailedTask})
}
