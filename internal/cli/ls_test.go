package cli

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store/badger"
)

// TestLsStatusGroups: `ls --status` takes the dashboard's groups, alone
// or with statuses; --json says when a waiting task began to wait, when
// a task expires, and what was answered when.
func TestLsStatusGroups(t *testing.T) {
	t.Parallel()
	c := newInproc(t)
	c.writeConfig(fmt.Sprintf(`{"mcpServers":{"demo":{"url":%q}}}`, demoURL(t)))
	id := func(r clitest.Result) string { return clitest.OnlyID(t, r) }
	// --wait prints "TIME ID STATUS TOOL" lines.
	waited := func(r clitest.Result) string {
		f := strings.Fields(r.Stdout)
		if len(f) < 2 {
			t.Fatalf("no task id:\n%s", r)
		}
		return f[1]
	}
	echo := id(c.run("call", "--server", "demo", "echo", "--args", `{"text":"hi"}`).Must(t, exitOK))
	sleep := id(c.run("call", "--server", "demo", "sleep", "--args", `{"seconds":600}`).Must(t, exitOK))
	ask := waited(c.run("call", "--server", "demo", "approve", "--args", `{"action":"deploy"}`, "--wait").Must(t, exitWaiting))
	done := waited(c.run("call", "--server", "demo", "approve", "--args", `{"action":"ship"}`, "--wait").Must(t, exitWaiting))
	failed := waited(c.run("call", "--server", "demo", "fail", "--args", `{"mode":"error"}`, "--wait").Must(t, exitTaskBad))
	c.run("answer", done, "approve-1", `{"action":"accept","content":{"approve":true,"reason":"ok"}}`).Must(t, exitOK)

	type row struct {
		ID           string    `json:"id"`
		Status       string    `json:"status"`
		WaitingSince time.Time `json:"waitingSince"`
		ExpiresAt    time.Time `json:"expiresAt"`
		Answers      []struct {
			Key      string          `json:"key"`
			At       time.Time       `json:"at"`
			Response json.RawMessage `json:"response"`
		} `json:"answers"`
	}
	ls := func(status string) map[string]row {
		t.Helper()
		out := map[string]row{}
		for l := range strings.Lines(c.run("ls", "--json", "--status", status).Must(t, exitOK).Stdout) {
			var r row
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatalf("ls --json: %v in %q", err, l)
			}
			out[r.ID] = r
		}
		return out
	}
	ids := func(m map[string]row) []string {
		var out []string
		for id := range m {
			out = append(out, id)
		}
		slices.Sort(out)
		return out
	}
	set := func(ids ...string) []string { slices.Sort(ids); return ids }

	if got := ids(ls("waiting")); !slices.Equal(got, []string{ask}) {
		t.Errorf("--status waiting: %v, want %s", got, ask)
	}
	if got := ids(ls("finished")); !slices.Contains(got, echo) || !slices.Contains(got, failed) || slices.Contains(got, sleep) {
		t.Errorf("--status finished: %v", got)
	}
	if got := ids(ls("problems,waiting")); !slices.Equal(got, set(failed, ask)) {
		t.Errorf("--status problems,waiting: %v, want %v", got, set(failed, ask))
	}
	open := ls("open")
	if !slices.Contains(ids(open), sleep) || !slices.Contains(ids(open), ask) {
		t.Errorf("--status open: %v", ids(open))
	}
	if r := open[ask]; r.WaitingSince.IsZero() || r.ExpiresAt.IsZero() {
		t.Errorf("a waiting task's --json lacks waitingSince or expiresAt: %+v", r)
	}
	if r := open[sleep]; !r.WaitingSince.IsZero() {
		t.Errorf("a working task has waitingSince %v", r.WaitingSince)
	}
	all := ls("working,input_required,completed")
	if a := all[done].Answers; len(a) != 1 || a[0].Key != "approve-1" || a[0].At.IsZero() || !strings.Contains(string(a[0].Response), `"reason":"ok"`) {
		t.Errorf("the answered task's --json answers: %+v", a)
	}

	r := c.run("ls", "--status", "open,stuck").Must(t, exitUsage)
	clitest.OneErrorLine(t, r)
	if !strings.Contains(r.Stderr, `"stuck"`) || !strings.Contains(r.Stderr, "problems") {
		t.Errorf("an unknown group: %q", r.Stderr)
	}
}

// TestLsShowsTheQuestionGetShowsTheAnswer: a waiting task's line in `ls`
// carries what it asks, not only its status message; `get` of an
// answered task says what was answered, when and by whom.
func TestLsShowsTheQuestionGetShowsTheAnswer(t *testing.T) {
	t.Parallel()
	c := newInproc(t)
	c.writeConfig(fmt.Sprintf(`{"mcpServers":{"demo":{"url":%q}}}`, demoURL(t)))
	f := strings.Fields(c.run("call", "--server", "demo", "approve", "--args", `{"action":"deploy"}`, "--wait").Must(t, exitWaiting).Stdout)
	if len(f) < 2 {
		t.Fatal("call --wait printed no task id")
	}
	id := f[1]
	var row string
	for l := range strings.Lines(c.run("ls").Must(t, exitOK).Stdout) {
		if strings.HasPrefix(l, id) {
			row = l
		}
	}
	if !strings.Contains(row, "Approve deploy?") {
		t.Errorf("ls: the waiting task's line does not carry its question:\n%s", row)
	}

	c.run("answer", id, "approve-1", `{"action":"accept","content":{"approve":true,"reason":"ok"}}`).Must(t, exitOK)
	out := c.run("get", id).Must(t, exitOK).Stdout
	_, after, ok := strings.Cut(out, "answered:\n")
	if !ok {
		t.Fatalf("get: no answered section:\n%s", out)
	}
	line, _, _ := strings.Cut(after, "\n")
	want := `approve-1 = {"action":"accept","content":{"approve":true,"reason":"ok"}}  at `
	if !strings.HasPrefix(strings.TrimSpace(line), want) || !strings.Contains(line, " by "+deck.LocalUser().Name) {
		t.Errorf("get: answered line %q, want %q… by %s", line, want, deck.LocalUser().Name)
	}
}

// TestLsPagesThroughTheStore: ls and the bulk commands read the store a
// page at a time (listPage); across the pages' edges nothing is lost or
// listed twice, --limit stops at the newest N, a search finds what only
// the oldest page holds, and an agent there is in the table.
func TestLsPagesThroughTheStore(t *testing.T) {
	t.Parallel()
	c := newInproc(t)
	const total, old = 2*listPage + 500, 10
	want := loadStore(t, c.dataDir, total, func(i int, rec *model.Task) {
		if i < old {
			rec.Tool = "oldtool"
		}
		if i%3 > 0 {
			_ = rec.MoveTo(model.StatusCompleted, "", rec.CreatedAt)
		}
		if i == 0 {
			rec.Agent = "ci-bot"
		}
	})
	ids := func(r clitest.Result) []string {
		var out []string
		for l := range strings.Lines(r.Stdout) {
			var e struct{ ID string }
			if err := json.Unmarshal([]byte(l), &e); err != nil {
				t.Fatalf("%v in %q", err, l)
			}
			out = append(out, e.ID)
		}
		return out
	}
	if got := ids(c.run("ls", "--json").Must(t, exitOK)); !slices.Equal(got, want) {
		t.Fatalf("ls --json listed %d records, want all %d newest first (first difference at %d)", len(got), total, firstDiff(got, want))
	}
	if got := ids(c.run("ls", "--json", "--limit", fmt.Sprint(listPage+7)).Must(t, exitOK)); !slices.Equal(got, want[:listPage+7]) {
		t.Fatalf("ls --limit %d listed %d records, want the newest %d", listPage+7, len(got), listPage+7)
	}
	table := c.run("ls", "--search", "tool:oldtool").Must(t, exitOK).Stdout
	if rows := strings.Count(table, "\n") - 1; rows != old || !strings.Contains(table, "ci-bot") || !strings.Contains(table, want[total-1]) {
		t.Fatalf("ls --search tool:oldtool: %d rows, want the %d oldest, the oldest's agent ci-bot among them:\n%s", rows, old, table)
	}
	if lines := strings.Count(c.run("ls").Must(t, exitOK).Stdout, "\n"); lines != total+1 {
		t.Fatalf("ls printed %d lines, want a header and %d rows", lines, total)
	}
	c.run("forget", "--search", "tool:oldtool", "--yes").Must(t, exitOK)
	if got := ids(c.run("ls", "--json").Must(t, exitOK)); !slices.Equal(got, want[:total-old]) {
		t.Fatalf("after forget --search tool:oldtool: %d records listed, want the %d newest", len(got), total-old)
	}
}

// TestCompleteIDsOffersOpenAndNewest: a task id's completion offers the
// open tasks and the newest records, not every record (which froze the
// shell for seconds on a large store).
func TestCompleteIDsOffersOpenAndNewest(t *testing.T) {
	t.Parallel()
	c := newInproc(t)
	const total = 2000
	ids := loadStore(t, c.dataDir, total, func(i int, rec *model.Task) {
		if i >= 5 { // the five oldest stay open
			_ = rec.MoveTo(model.StatusCompleted, "", rec.CreatedAt)
		}
	})
	var offered []string
	for l := range strings.Lines(c.run("__complete", "get", "").Must(t, exitOK).Stdout) {
		if id, _, ok := strings.Cut(l, "\t"); ok {
			offered = append(offered, id)
		}
	}
	for _, id := range append(ids[:completeRecent:completeRecent], ids[total-5:]...) {
		if !slices.Contains(offered, id) {
			t.Fatalf("completion offered %d ids, not %s (want the %d newest and the 5 open ones)", len(offered), id, completeRecent)
		}
	}
	if len(offered) != completeRecent+5 {
		t.Fatalf("completion offered %d ids, want %d: the newest %d and the 5 open ones", len(offered), completeRecent+5, completeRecent)
	}
}

// loadStore fills a new store at dir with total working records made a
// millisecond apart, each first passed to shape, and returns their ids,
// newest first.
func loadStore(t *testing.T, dir string, total int, shape func(i int, rec *model.Task)) []string {
	t.Helper()
	base := time.Now().Add(-time.Hour)
	var ids []string
	_, err := badger.Load(dir, func(yield func(*model.Task) bool) {
		for i := range total {
			at := base.Add(time.Duration(i) * time.Millisecond)
			rec := model.NewIntent(model.ServerRef{Name: "demo"}, "sleep", json.RawMessage(`{"seconds":1}`), "", at)
			rec.TaskID = fmt.Sprintf("TASK%06d", i)
			_ = rec.MoveTo(model.StatusWorking, "", at)
			shape(i, rec)
			rec.ArgsHash = model.ArgsHash(rec.Server, rec.Tool, rec.Arguments)
			ids = append([]string{rec.ID}, ids...)
			if !yield(rec) {
				return
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
