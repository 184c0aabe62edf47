package proxy

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
)

// legacyLine is one outcome legacy.mjs printed.
type legacyLine struct {
	Fail     string   `json:"fail"`
	Session  *string  `json:"session"`
	Version  string   `json:"protocolVersion"`
	Tool     string   `json:"tool"`
	Kind     string   `json:"kind"`
	TaskID   string   `json:"taskId"`
	Status   string   `json:"status"`
	Text     string   `json:"text"`
	Listed   []string `json:"listed"`
	Statuses []string `json:"statuses"`
	Peeked   string   `json:"peeked"`
	Error    string   `json:"error"`
}

// runLegacyAgent runs legacy.mjs with token to its end and returns what
// it printed.
func runLegacyAgent(t *testing.T, dir, token string, args ...string) []legacyLine {
	t.Helper()
	cmd, lines := startScript(t, dir, []string{"TASKDECK_AGENT_TOKEN=" + token}, "legacy.mjs", args...)
	var got []legacyLine
	var text []string
	for lines.Scan() {
		t.Log(lines.Text())
		text = append(text, lines.Text())
		var l legacyLine
		if err := json.Unmarshal(lines.Bytes(), &l); err != nil {
			t.Fatalf("the agent printed %q: %v", lines.Text(), err)
		}
		got = append(got, l)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the agent failed (%v): %s", err, strings.Join(text, "\n"))
	}
	return got
}

// The official TypeScript client pinned to 2025-11-25, with the official
// tasks requester's generation-1 side (ext-tasks 0.2.2), through the
// proxy in front of the demo server: a session the proxy issued; call →
// task → poll → result, a failure, a cancel, every one a record the agent
// was told of; tasks/list gives its own tasks; another agent's list is
// empty and the first agent's task id is unknown to it.
func TestLegacyAgentTaskFlows(t *testing.T) {
	dir := agentDir(t)
	r, _ := twoAgents(t)
	got := runLegacyAgent(t, dir, tokenA, r.url, "flows")
	if len(got) == 0 || got[0].Session == nil || *got[0].Session == "" || got[0].Version != "2025-11-25" {
		t.Fatalf("the agent's first line %+v: want a session of 2025-11-25", got[0])
	}
	var told, ids []string
	var listed legacyLine
	for _, l := range got[1:] {
		switch {
		case l.Listed != nil:
			listed = l
		case l.Tool != "":
			told = append(told, strings.TrimSpace(strings.Join([]string{l.Tool, l.Kind, l.Status, l.Text}, " ")))
			ids = append(ids, l.TaskID)
		}
	}
	want := []string{
		"echo task completed hello",
		"sleep task completed slept 1 s",
		"fail task failed simulated failure",
		"sleep task cancelled",
	}
	if strings.Join(told, "\n") != strings.Join(want, "\n") {
		t.Errorf("the agent was told:\n%s\nwant:\n%s", strings.Join(told, "\n"), strings.Join(want, "\n"))
	}
	if !slices.Equal(listed.Listed, ids) {
		t.Errorf("tasks/list gave %q, want the agent's tasks %q", listed.Listed, ids)
	}
	if want := []string{"completed", "completed", "failed", "cancelled"}; !slices.Equal(listed.Statuses, want) {
		t.Errorf("tasks/list said %q, want %q", listed.Statuses, want)
	}

	// Every task the agent heard of is a record of its own, as it was told.
	list, err := r.eng.List(context.Background(), deck.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != len(want) {
		t.Fatalf("%d records for the agent's %d calls", len(list), len(want))
	}
	byID := map[string]*model.Task{}
	for _, e := range list {
		byID[e.Task.ID] = e.Task
	}
	for i, id := range ids {
		rid, _, _ := strings.Cut(id, handleSep)
		rec := byID[rid]
		if rec == nil {
			t.Errorf("the agent's task %s names no record", id)
			continue
		}
		if rec.Owner != "a" || rec.Agent != "ts-legacy-agent" || string(rec.Status) != strings.Fields(want[i])[2] {
			t.Errorf("record %s (%s): owner %q, agent %q, %s; the agent was told %s", rec.ID, rec.Tool, rec.Owner, rec.Agent, rec.Status, want[i])
		}
	}

	// Agent b, on the same server, sees none of it.
	peek := runLegacyAgent(t, dir, tokenB, r.url, "peek", ids[1])
	last := peek[len(peek)-2:]
	if len(last[0].Listed) != 0 {
		t.Errorf("agent b's tasks/list gave %q, want none", last[0].Listed)
	}
	if last[1].Peeked != ids[1] || last[1].Status != "" || !strings.Contains(last[1].Error, "Task not found") {
		t.Errorf("agent b's tasks/get of a's task: %+v, want it unknown", last[1])
	}
}
