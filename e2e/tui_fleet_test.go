package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/pgtest"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store/postgres"
)

// TestTUIFleetShowsWatcher: the dashboard on a shared database, its
// engine one of two (a `serve` on another data dir is the other), names
// in a task's detail pane the engine that watches it, and says "none" in
// the NEXT column of a task whose server no live engine has, at 80×24.
func TestTUIFleetShowsWatcher(t *testing.T) {
	db := pgtest.DB(t)
	srv := startDemo(t, "127.0.0.1:0")
	config := fmt.Sprintf(`{"store":%q,"mcpServers":{"demo":{"url":%q}}}`, db, srv.url)
	other, d := newDeck(t), newDeck(t)
	other.writeConfig(config)
	d.writeConfig(config)
	serve := other.start("serve")
	fleetWait(t, 20*time.Second, "serve to start", func() bool { return serve.exited() || len(serve.Stderr.String()) > 0 })
	if serve.exited() {
		t.Fatalf("serve exited %d: %s", serve.Code, serve.Stderr)
	}
	d.call("sleep", `{"seconds":3000}`)

	ctx, cancel := context.WithTimeout(context.Background(), waitfor.Scale(20*time.Second))
	defer cancel()
	st, err := postgres.Open(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	far := model.NewIntent(model.ServerRef{Name: "elsewhere"}, "report", json.RawMessage(`{}`), "", now)
	far.TaskID = "remote-report"
	if err := far.MoveTo(model.StatusWorking, "", now); err != nil {
		t.Fatal(err)
	}
	if err := st.Create(far); err != nil {
		t.Fatal(err)
	}

	tm := d.dashboard(80, 24)
	s := tm.waitScreen("the row of the task no engine can reach says none", func(s string) bool {
		rows := rowsOf(s, "report")
		return len(rows) == 1 && strings.Contains(rows[0].line, " none")
	})
	if rows := rowsOf(s, "sleep"); len(rows) != 1 || strings.Contains(rows[0].line, " none") {
		t.Errorf("the sleep task's row: %+v\n%s", rows, s)
	}
	tm.selectRow("sleep")
	tm.keys("Enter")
	host, _ := os.Hostname()
	watched := regexp.MustCompile(`watched by ` + regexp.QuoteMeta(host) + `, pid (\d+)`)
	tm.waitScreen("the detail pane names the watching engine", func(s string) bool { return watched.MatchString(s) })
	tm.keys("Escape")
	tm.waitScreen("the table again", func(s string) bool { return len(rowsOf(s, "report")) == 1 })
	tm.selectRow("report")
	tm.keys("Enter")
	tm.waitText("not polled: no engine can reach its server")
	tm.quit()
}
