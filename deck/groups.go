package deck

import (
	"fmt"
	"slices"
	"strings"

	"github.com/taskdeck/taskdeck/model"
)

// Group is a named set of records an operator asks for as one: the
// dashboard's group views and `ls --status GROUP` share these.
type Group struct {
	Name  string `json:"name"`  // what `--status` and Filter.Group take
	Title string `json:"title"` // what the dashboard shows
	// Statuses are the statuses the group reads; Admits narrows them.
	Statuses []model.Status `json:"statuses"`
	// Waiting admits only records with a question the operator has not
	// answered yet (of Statuses).
	Waiting bool `json:"waiting,omitempty"`
	// PollsFailing also admits open records whose last poll failed,
	// whatever their status: what they show may no longer be true.
	PollsFailing bool `json:"pollsFailing,omitempty"`
}

// Groups are the groups, in the order the dashboard numbers them (1 to 4).
var Groups = []Group{
	{Name: "open", Title: "open", Statuses: []model.Status{model.StatusWorking, model.StatusInputRequired}},
	{Name: "waiting", Title: "waiting for me", Statuses: []model.Status{model.StatusInputRequired}, Waiting: true},
	{Name: "finished", Title: "finished", Statuses: []model.Status{model.StatusCompleted, model.StatusFailed, model.StatusCancelled, model.StatusUnknown}},
	{Name: "problems", Title: "problems", Statuses: []model.Status{model.StatusFailed, model.StatusUnknown, model.StatusOrphaned}, PollsFailing: true},
}

// GroupNamed finds a group by its name.
func GroupNamed(name string) (Group, bool) {
	i := slices.IndexFunc(Groups, func(g Group) bool { return g.Name == name })
	if i < 0 {
		return Group{}, false
	}
	return Groups[i], true
}

// Admits reports whether a record (with its poll state) is in the group.
func (g Group) Admits(e Entry) bool {
	t := e.Task
	return g.Holds(t.Status, t.Status == model.StatusInputRequired && t.WaitsForInput(), t.Status.Pollable() && e.Poll.Errors > 0)
}

// Holds is Admits from what a frontend already knows of a record: its
// status, whether it waits for the operator, whether its polls fail.
func (g Group) Holds(st model.Status, waits, pollsFailing bool) bool {
	if g.PollsFailing && pollsFailing {
		return true
	}
	return slices.Contains(g.Statuses, st) && (!g.Waiting || waits)
}

// Reads are the statuses a store must read to find the group's records.
func (g Group) Reads() []model.Status {
	if !g.PollsFailing {
		return g.Statuses
	}
	out := slices.Clone(g.Statuses)
	for _, st := range []model.Status{model.StatusWorking, model.StatusInputRequired} {
		if !slices.Contains(out, st) {
			out = append(out, st)
		}
	}
	return out
}

// ParseStatuses reads a `--status` value: a status, a group, or several
// of either separated by commas. A group that needs more than statuses
// (waiting, problems) comes back in groups, for Filter.Group.
func ParseStatuses(s string) (statuses []model.Status, groups []Group, err error) {
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if g, ok := GroupNamed(part); ok {
			groups = append(groups, g)
			continue
		}
		st, err := model.ParseStatus(part)
		if err != nil {
			return nil, nil, fmt.Errorf("unknown status or group %q: give one of %s, or a group: %s", part, statusNames(), groupNames())
		}
		statuses = append(statuses, st)
	}
	return statuses, groups, nil
}

func statusNames() string {
	names := make([]string, len(model.AllStatuses))
	for i, st := range model.AllStatuses {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}

func groupNames() string {
	names := make([]string, len(Groups))
	for i, g := range Groups {
		names[i] = g.Name
	}
	return strings.Join(names, ", ")
}

// Admits reports whether the filter admits a record, Limit and Before
// aside (they page a list): its status is one of Statuses or a group of
// Groups admits it (neither given: any status), and its server, tool,
// key and text match. A group name not in Groups admits nothing.
func (f Filter) Admits(e Entry) bool {
	t := e.Task
	if len(f.Statuses)+len(f.Groups) > 0 && !slices.Contains(f.Statuses, t.Status) &&
		!slices.ContainsFunc(f.Groups, func(name string) bool { g, ok := GroupNamed(name); return ok && g.Admits(e) }) {
		return false
	}
	switch {
	case f.Server != "" && t.Server.Name != f.Server && t.Server.URL != f.Server,
		f.Tool != "" && t.Tool != f.Tool,
		f.Key != "" && t.IdempotencyKey != f.Key:
		return false
	case f.Text == "":
		return true
	}
	text := strings.ToLower(f.Text)
	for _, s := range []string{string(t.Arguments), t.StatusMessage, string(t.Result)} {
		if strings.Contains(strings.ToLower(s), text) {
			return true
		}
	}
	return false
}
