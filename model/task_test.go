package model

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestNewIDSortsByTime(t *testing.T) {
	t0 := time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	steps := []time.Duration{0, time.Millisecond, 2 * time.Millisecond, time.Second, time.Hour, 24 * time.Hour, 365 * 24 * time.Hour}
	var ids []string
	for _, d := range steps {
		ids = append(ids, NewID(t0.Add(d)))
	}
	if !sort.StringsAreSorted(ids) {
		t.Fatalf("ids do not sort by time: %v", ids)
	}
	for _, id := range ids {
		if len(id) != len(ids[0]) {
			t.Fatalf("ids of different lengths: %v", ids)
		}
		for _, r := range id {
			if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z') {
				t.Fatalf("id %q has %q", id, r)
			}
		}
	}
	// Across the whole range a store will see (1970 … 2200).
	a := NewID(time.UnixMilli(1))
	b := NewID(time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC))
	if a >= b {
		t.Fatalf("%s >= %s", a, b)
	}
}

func TestNewIDSameMillisecondSortsByCall(t *testing.T) {
	now := time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	prev := NewID(now)
	for range 1000 {
		id := NewID(now)
		if id <= prev {
			t.Fatalf("%s after %s in the same millisecond", id, prev)
		}
		prev = id
	}
}

func TestNewIDUnique(t *testing.T) {
	const n = 10000
	seen := make(map[string]bool, 2*n)
	// With the real clock, as the tracker calls it.
	for range n {
		id := NewID(time.Now())
		if seen[id] {
			t.Fatalf("duplicate id %s", id)
		}
		seen[id] = true
	}
	// All in one millisecond: the worst case for the random part.
	same := time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	for range n {
		id := NewID(same)
		if seen[id] {
			t.Fatalf("duplicate id %s within one millisecond", id)
		}
		seen[id] = true
	}
}

func TestNewIDConcurrent(t *testing.T) {
	now := time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 500 {
				id := NewID(now)
				mu.Lock()
				if seen[id] {
					t.Errorf("duplicate id %s", id)
				}
				seen[id] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}

func TestArgsHash(t *testing.T) {
	build := ServerRef{Name: "build"}
	h := func(s ServerRef, tool, args string) string { return ArgsHash(s, tool, json.RawMessage(args)) }

	base := h(build, "compile", `{"target":"all","opts":{"o":2,"g":true},"files":["a","b"]}`)
	equal := map[string]string{
		"keys reordered":        `{"files":["a","b"],"opts":{"g":true,"o":2},"target":"all"}`,
		"whitespace":            "{ \"target\" : \"all\",\n \"opts\":{\"o\":2, \"g\":true}, \"files\":[\"a\", \"b\"] }",
		"nested keys reordered": `{"opts":{"g":true,"o":2},"target":"all","files":["a","b"]}`,
		"escaped same string":   `{"target":"\u0061ll","opts":{"o":2,"g":true},"files":["a","b"]}`,
	}
	for name, args := range equal {
		if got := h(build, "compile", args); got != base {
			t.Errorf("%s: hash differs", name)
		}
	}
	differ := map[string]string{
		"other value":        `{"target":"lib","opts":{"o":2,"g":true},"files":["a","b"]}`,
		"array order":        `{"target":"all","opts":{"o":2,"g":true},"files":["b","a"]}`,
		"extra key":          `{"target":"all","opts":{"o":2,"g":true},"files":["a","b"],"x":null}`,
		"number vs string":   `{"target":"all","opts":{"o":"2","g":true},"files":["a","b"]}`,
		"missing nested key": `{"target":"all","opts":{"o":2},"files":["a","b"]}`,
	}
	for name, args := range differ {
		if got := h(build, "compile", args); got == base {
			t.Errorf("%s: hash equal", name)
		}
	}
	if h(build, "link", `{"target":"all","opts":{"o":2,"g":true},"files":["a","b"]}`) == base {
		t.Error("other tool: hash equal")
	}
	if h(ServerRef{Name: "test"}, "compile", `{"target":"all","opts":{"o":2,"g":true},"files":["a","b"]}`) == base {
		t.Error("other server: hash equal")
	}
	if h(ServerRef{URL: "build"}, "compile", `{"target":"all","opts":{"o":2,"g":true},"files":["a","b"]}`) == base {
		t.Error("server name vs URL with the same text: hash equal")
	}
	// Large integers must not collapse through float64.
	if h(build, "t", `{"n":12345678901234567890}`) == h(build, "t", `{"n":12345678901234567891}`) {
		t.Error("integers that differ beyond float64 precision hash equal")
	}
	if h(build, "t", `{"id":9007199254740993}`) == h(build, "t", `{"id":9007199254740992}`) {
		t.Error("2^53+1 and 2^53 hash equal")
	}
	// Missing arguments and an empty object are the same call.
	if ArgsHash(build, "t", nil) != h(build, "t", `{}`) {
		t.Error("nil args and {} differ")
	}
	// Keys in any order, at every level, name the same call.
	if h(build, "compile", `{"z":1,"a":{"y":[1,{"q":2,"b":3}],"c":null},"m":"x"}`) !=
		h(build, "compile", `{"m":"x","a":{"c":null,"y":[1,{"b":3,"q":2}]},"z":1}`) {
		t.Error("shuffled keys hash differently")
	}
	// Garbage must not hash like valid JSON it starts with.
	if h(build, "t", `{"a":1} {"b":2}`) == h(build, "t", `{"a":1}`) {
		t.Error("trailing data ignored")
	}
}

func TestPendingInputs(t *testing.T) {
	task := &Task{InputRequests: map[string]InputRequest{
		"zeta": {Method: "elicitation/create"}, "alpha": {Method: "elicitation/create"},
		"mid": {Method: "roots/list"}, "beta": {Method: "sampling/createMessage"},
	}}
	if got, want := task.PendingInputs(), []string{"alpha", "beta", "mid", "zeta"}; !slices.Equal(got, want) {
		t.Fatalf("PendingInputs = %v, want %v", got, want)
	}
	task.MarkAnswered([]string{"beta", "zeta", "not-asked"}, time.Now())
	if got, want := task.PendingInputs(), []string{"alpha", "mid"}; !slices.Equal(got, want) {
		t.Fatalf("PendingInputs = %v, want %v", got, want)
	}
	task.MarkAnswered([]string{"alpha", "mid"}, time.Now())
	if got := task.PendingInputs(); len(got) != 0 {
		t.Fatalf("PendingInputs = %v, want none", got)
	}
	if got := (&Task{}).PendingInputs(); len(got) != 0 {
		t.Fatalf("no inputs: %v", got)
	}
}

func fullTask() *Task {
	t0 := time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	task := NewIntent(ServerRef{Name: "build"}, "compile", json.RawMessage(`{"a":1}`), "k", t0)
	_ = task.MoveTo(StatusWorking, "", t0)
	_ = task.MoveTo(StatusInputRequired, "", t0)
	task.TTLMs, task.PollIntervalMs = i64(1000), i64(500)
	task.InputRequests = map[string]InputRequest{"name": {Method: "elicitation/create", Params: json.RawMessage(`{"message":"hi"}`)}}
	task.AnsweredKeys = []string{"old"}
	task.PendingAnswers = map[string]json.RawMessage{"name": json.RawMessage(`{"action":"accept"}`)}
	task.Result = json.RawMessage(`{"content":[]}`)
	task.Error = &RPCError{Code: 1, Message: "m", Data: json.RawMessage(`{"d":1}`)}
	return task
}

func TestCloneIsDeep(t *testing.T) {
	orig := fullTask()
	want, _ := json.Marshal(orig)

	c := orig.Clone()
	got, _ := json.Marshal(c)
	if string(got) != string(want) {
		t.Fatalf("clone differs:\n%s\n%s", got, want)
	}

	c.Arguments[0] = 'X'
	c.Result[0] = 'X'
	c.InputRequests["name"].Params[0] = 'X'
	c.InputRequests["new"] = InputRequest{Method: "roots/list"}
	c.AnsweredKeys[0] = "changed"
	c.PendingAnswers["name"][0] = 'X'
	c.PendingAnswers["other"] = json.RawMessage(`{}`)
	c.AnsweredKeys = append(c.AnsweredKeys, "more")
	c.History[0].Message = "changed"
	c.History = append(c.History, Transition{To: StatusFailed})
	c.Error.Message = "changed"
	c.Error.Data[0] = 'X'
	*c.TTLMs = 99
	*c.PollIntervalMs = 99
	c.Status = StatusFailed

	after, _ := json.Marshal(orig)
	if string(after) != string(want) {
		t.Fatalf("mutating the clone changed the original:\n%s\nwas\n%s", after, want)
	}

	// A record with nothing optional set clones too.
	empty := (&Task{}).Clone()
	if empty.Error != nil || empty.TTLMs != nil || empty.InputRequests != nil {
		t.Fatalf("empty clone = %+v", empty)
	}
}

func TestDeadlineAndInterval(t *testing.T) {
	t0 := time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	task := &Task{ServerCreatedAt: t0, TTLMs: i64(60000), PollIntervalMs: i64(5000)}
	if got := task.Deadline(); !got.Equal(t0.Add(time.Minute)) {
		t.Errorf("Deadline = %v", got)
	}
	if got := task.ServerPollInterval(); got != 5*time.Second {
		t.Errorf("ServerPollInterval = %v", got)
	}
	for _, x := range []*Task{
		{ServerCreatedAt: t0},                 // null ttl: unlimited
		{ServerCreatedAt: t0, TTLMs: i64(0)},  // 0: never expires (C# store)
		{TTLMs: i64(1000)},                    // no createdAt
		{ServerCreatedAt: t0, TTLMs: i64(-1)}, // nonsense
	} {
		if !x.Deadline().IsZero() {
			t.Errorf("Deadline(%+v) = %v, want zero", x, x.Deadline())
		}
	}
	if got := (&Task{PollIntervalMs: i64(-5)}).ServerPollInterval(); got != 0 {
		t.Errorf("negative interval = %v", got)
	}
}

func TestServerRefString(t *testing.T) {
	if got := (ServerRef{Name: "build", URL: "https://x"}).String(); got != "build" {
		t.Error(got)
	}
	if got := (ServerRef{URL: "https://x"}).String(); got != "https://x" {
		t.Error(got)
	}
}

func TestNewIntent(t *testing.T) {
	t0 := time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	task := NewIntent(ServerRef{Name: "build"}, "compile", json.RawMessage(`{"a":1}`), "key", t0)
	if task.Status != StatusCalling || task.IdempotencyKey != "key" || task.ID == "" ||
		task.ArgsHash != ArgsHash(ServerRef{Name: "build"}, "compile", json.RawMessage(`{"a":1}`)) ||
		len(task.History) != 1 || task.History[0].To != StatusCalling || !task.History[0].At.Equal(t0) {
		t.Fatalf("intent = %+v", task)
	}
}

func TestWaitsForInput(t *testing.T) {
	asks := map[string]InputRequest{"a": {Method: "elicitation/create"}, "b": {Method: "elicitation/create"}}
	for _, c := range []struct {
		name string
		task Task
		want bool
	}{
		{"unanswered request", Task{Status: StatusInputRequired, InputRequests: asks}, true},
		{"one of two answered", Task{Status: StatusInputRequired, InputRequests: asks, AnsweredKeys: []string{"a"}}, true},
		{"all answered", Task{Status: StatusInputRequired, InputRequests: asks, AnsweredKeys: []string{"a", "b"}}, false},
		{"input_required, requests not fetched yet", Task{Status: StatusInputRequired}, false},
		{"working with stale requests", Task{Status: StatusWorking, InputRequests: asks}, false},
		{"completed", Task{Status: StatusCompleted}, false},
	} {
		if got := c.task.WaitsForInput(); got != c.want {
			t.Errorf("%s: WaitsForInput = %v, want %v", c.name, got, c.want)
		}
	}
}

// A server's durations, however large, never overflow: they saturate.
func TestServerDurationsSaturate(t *testing.T) {
	t0 := time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	for _, ms := range []int64{9e12, 1e13, 1 << 62, 1<<63 - 1} {
		task := &Task{ServerCreatedAt: t0, TTLMs: i64(ms), PollIntervalMs: i64(ms)}
		if got := task.ServerPollInterval(); got < time.Hour {
			t.Errorf("pollIntervalMs %d: ServerPollInterval = %v, want a huge positive delay", ms, got)
		}
		if got := task.Deadline(); !got.After(t0.Add(100 * 24 * time.Hour)) {
			t.Errorf("ttlMs %d: Deadline = %v, want far after createdAt", ms, got)
		}
	}
}

func TestDropAnswersLetsTheKeysBeAnsweredAgain(t *testing.T) {
	task := &Task{Status: StatusInputRequired,
		InputRequests:  map[string]InputRequest{"a": {}, "b": {}},
		PendingAnswers: map[string]json.RawMessage{"a": json.RawMessage(`{}`), "b": json.RawMessage(`{}`)},
		AnsweredKeys:   []string{"a", "b"}}
	task.DropAnswers([]string{"a"})
	if task.Answered("a") || !task.Answered("b") || task.PendingAnswers["a"] != nil || task.PendingAnswers["b"] == nil {
		t.Fatalf("after DropAnswers(a): answered %v, pending %v", task.AnsweredKeys, task.PendingAnswers)
	}
	task.DropAnswers([]string{"b"})
	if task.PendingAnswers != nil || len(task.AnsweredKeys) != 0 || !task.WaitsForInput() {
		t.Fatalf("after dropping every answer: answered %v, pending %v", task.AnsweredKeys, task.PendingAnswers)
	}
}

// A call asked for input before its task exists has nothing to poll; its
// rounds are counted from its history, across restarts.
func TestNeedsInputBeforeTheTaskExists(t *testing.T) {
	now := time.Unix(1000, 0)
	rec := NewIntent(ServerRef{Name: "s"}, "tool", nil, "", now)
	for round := 1; round <= 2; round++ {
		if err := rec.MoveTo(StatusInputRequired, "asked", now); err != nil {
			t.Fatal(err)
		}
		if !rec.NeedsInput() || rec.Pollable() || rec.InputRounds() != round {
			t.Fatalf("round %d: NeedsInput %v, Pollable %v, rounds %d", round, rec.NeedsInput(), rec.Pollable(), rec.InputRounds())
		}
		if err := rec.MoveTo(StatusCalling, "answered", now); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rec.Apply(Snapshot{TaskID: "t1", Status: StatusInputRequired}, now); err != nil {
		t.Fatal(err)
	}
	if rec.NeedsInput() || !rec.Pollable() || rec.InputRounds() != 2 {
		t.Fatalf("a task asking for input: NeedsInput %v, Pollable %v, rounds %d", rec.NeedsInput(), rec.Pollable(), rec.InputRounds())
	}
}

// Only what ended without its result, or may never have started, is re-run.
func TestRerunnable(t *testing.T) {
	want := map[Status]bool{StatusFailed: true, StatusCancelled: true, StatusUnknown: true, StatusOrphaned: true}
	for _, st := range AllStatuses {
		if got := (&Task{Status: st}).Rerunnable(); got != want[st] {
			t.Errorf("%s: Rerunnable %v, want %v", st, got, want[st])
		}
	}
}

// Every id NewID makes is IDLen long and ValidID; no other shape is.
func TestValidID(t *testing.T) {
	id := NewID(time.Now())
	if len(id) != IDLen || !ValidID(id) {
		t.Fatalf("NewID made %q", id)
	}
	for _, bad := range []string{"", id[:IDLen-1], id + "0", "06h36f", strings.ToUpper(id), id[:IDLen-1] + "!"} {
		if ValidID(bad) {
			t.Errorf("ValidID(%q)", bad)
		}
	}
}
