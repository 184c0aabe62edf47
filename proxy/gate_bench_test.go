package proxy

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/demo"
)

// BenchmarkGate: the cost of the browser checks and the token on a
// proxied tasks/get answered from the record, as the ratio of the gated
// handler's median to the same proxy's handler without the gate (the
// principal set as the gate would), interleaved round by round on one
// engine and one task. Target: gated/ungated <= 1.05. "gate-ns" is the
// checks alone (admit on a recorded request, 8 agents configured).
//
//	go test -run '^$' -bench Gate -benchtime 2000x ./proxy
func BenchmarkGate(b *testing.B) {
	r, _ := benchRig(b, demo.Options{Hold: true, NoPush: true, PollInterval: time.Hour}, quietEngine)
	m := metaJSON("bench", true)
	_, a := rpc(b, r.url, "tools/call", `{"name":"hold","arguments":{"steps":1},"_meta":`+m+`}`, nil)
	id := str(a.Result["taskId"])
	params := fmt.Sprintf(`{"taskId":%q,"_meta":%s}`, id, m)

	pr := r.proxy.gate.creds[0].principal
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp/{name}", func(w http.ResponseWriter, req *http.Request) {
		r.proxy.serveHTTP(w, req.WithContext(context.WithValue(req.Context(), principalKey{}, pr)))
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ungated := &httptest.Server{Listener: l, Config: &http.Server{Handler: mux}}
	ungated.Start()
	b.Cleanup(ungated.Close)

	var gated, bare samples
	for b.Loop() {
		gated = append(gated, timed(b, r.url, "tasks/get", params, id))
		bare = append(bare, timed(b, ungated.URL+"/mcp/demo", "tasks/get", params, id))
	}
	g, u := gated.report(b, "gated"), bare.report(b, "ungated")
	b.ReportMetric(float64(g)/float64(u), "gated/ungated")

	// The checks alone, on one request, with 8 agents to compare against.
	for i := range 7 {
		r.proxy.gate.creds = append(r.proxy.gate.creds, credential{sum: [32]byte{byte(i + 1)}})
	}
	req := httptest.NewRequest(http.MethodPost, r.url, nil)
	req.Host = l.Addr().String()
	req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, l.Addr()))
	req.Header.Set("Authorization", "Bearer "+testToken)
	const n = 20000
	start := time.Now()
	for range n {
		if why := r.proxy.gate.browser(req); why != "" {
			b.Fatal(why)
		}
		if _, ok := r.proxy.gate.authenticate(req); !ok {
			b.Fatal("the token is not known")
		}
	}
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/n, "gate-ns")
}

// BenchmarkOthersTaskTiming: agent b's tasks/get of agent a's task (its
// whole id, as if leaked) and of an id that names no record, interleaved:
// the two answers are the same bytes, and "others/unknown" says how far
// their times are apart (the first reads and decodes a's record, the
// second finds no key).
//
//	go test -run '^$' -bench OthersTaskTiming -benchtime 3000x ./proxy
func BenchmarkOthersTaskTiming(b *testing.B) {
	r, _ := twoAgents(b)
	idA := callAs(b, r, tokenA)
	unknown := "06h37dcn9gqtx50j" + handleSep + strings.Repeat("a", 26)
	var others, none samples
	for b.Loop() {
		start := time.Now()
		taskReq(b, r, tokenB, "tasks/get", idA)
		others = append(others, time.Since(start))
		start = time.Now()
		taskReq(b, r, tokenB, "tasks/get", unknown)
		none = append(none, time.Since(start))
	}
	o, u := others.report(b, "others"), none.report(b, "unknown")
	b.ReportMetric(float64(o)/float64(u), "others/unknown")
}
