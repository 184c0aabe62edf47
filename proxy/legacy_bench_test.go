package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/mcpclient/legacy"
	"github.com/taskdeck/taskdeck/model"
)

// BenchmarkLegacyList: the 2025-11-25 front's tasks/list, read from the
// store (the agent's 100 tasks among 2,000 records of the server, so it
// reads four pages), against a tasks/get of one of them answered from the
// record, on the same session, interleaved:
//
//	go test -run '^$' -bench LegacyList -benchtime 30x ./proxy
func BenchmarkLegacyList(b *testing.B) {
	const records, every = 2000, 20 // one in every 20 is the agent's
	r, _ := benchRig(b, demo.Options{}, quietEngine)
	ctx := context.Background()
	var mine string
	for i := range records {
		owner := "another agent"
		if i%every == 0 {
			owner = "test"
		}
		secret, kept := r.proxy.newHandle()
		res, err := r.eng.Call(ctx, deck.CallRequest{Server: model.ServerRef{Name: "demo"}, Tool: "echo", Args: json.RawMessage(`{"text":"x"}`), Owner: owner, HandleHash: kept})
		if err != nil {
			b.Fatal(err)
		}
		if owner == "test" {
			mine = r.proxy.agentID(res.Task, owner, secret)
		}
	}
	sid, _ := legacyOpen(b, r.url, testToken)
	hdr := legacyHeaders(testToken, sid)
	getParams := fmt.Sprintf(`{"taskId":%q}`, mine)
	timedLegacy := func(method, params string) (time.Duration, answer) {
		start := time.Now()
		_, a := rpc(b, r.url, method, params, hdr)
		return time.Since(start), a
	}
	var tasks []legacy.Task
	if _, a := timedLegacy(legacy.MethodList, `{}`); json.Unmarshal(a.Result["tasks"], &tasks) != nil || len(tasks) != records/every {
		b.Fatalf("tasks/list gave %d tasks (%+v), want %d", len(tasks), a.Error, records/every)
	}
	var get, list samples
	for b.Loop() {
		d, _ := timedLegacy(legacy.MethodGet, getParams)
		get = append(get, d)
		d, _ = timedLegacy(legacy.MethodList, `{}`)
		list = append(list, d)
	}
	g, l := get.report(b, "get"), list.report(b, "list")
	b.ReportMetric(float64(l)/float64(g), "list/get")
}
