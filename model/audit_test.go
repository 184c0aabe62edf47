package model

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// A sealed entry copied to a later place in the log, with the chain
// recomputed (a record rolled back to an earlier version, with the entry
// that once wrote it), keeps its seal but not its place: it names as the
// record it replaced one that is not the task's last entry.
func TestAuditReplayedEntryFails(t *testing.T) {
	key := []byte("a test's audit key of 32 bytes..")
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	v1 := &Task{ID: "t1", Status: StatusWorking}
	v2 := &Task{ID: "t1", Status: StatusCompleted}
	bodies := [][]byte{
		SealAudit(key, NewAuditBody(nil, v1, []byte(`{"v":1}`), &Act{Kind: ActCall}, at).Marshal()),
	}
	v1.Revision = 1
	bodies = append(bodies, SealAudit(key, NewAuditBody(v1, v2, []byte(`{"v":2}`), nil, at).Marshal()))
	// The attacker's log: entry 2 again at 3, v2 rolled back over.
	v2.Revision = 2
	replayed := append(bodies, bodies[1])

	check := func(log [][]byte) *AuditFault {
		v, f := NewAuditVerifier(AuditCheckpoint{}, key)
		if f != nil {
			return f
		}
		var prev []byte
		for i, b := range log {
			rev := uint64(i + 1)
			prev = ChainHash(prev, rev, b)
			if f := v.Next(rev, b, prev); f != nil {
				return f
			}
		}
		return nil
	}
	if f := check(bodies); f != nil {
		t.Fatalf("the log as written: %v", f)
	}
	f := check(replayed)
	if f == nil || f.Rev != 3 || !strings.Contains(f.Reason, "replaced the record written at revision 1") {
		t.Fatalf("the replayed entry: %v; want entry 3 named", f)
	}
	// Unkeyed, the same log verifies: only the seal makes Prev binding.
	v, _ := NewAuditVerifier(AuditCheckpoint{}, nil)
	var prev []byte
	for i, b := range replayed {
		prev = ChainHash(prev, uint64(i+1), b)
		if f := v.Next(uint64(i+1), b, prev); f != nil {
			t.Fatalf("unkeyed: %v", f)
		}
	}
}

// TestAuditAppendMatchesJSON: the canonical bytes the store writes and
// hashes are json.Marshal's, whatever the strings hold.
func TestAuditAppendMatchesJSON(t *testing.T) {
	at := time.Date(2026, 12, 2, 15, 4, 5, 120_000_000, time.UTC)
	bodies := []AuditBody{
		{},
		{At: at, Task: "06h36f", Act: ActCall, Actor: Actor{Name: "alice", Role: RoleUser}},
		{At: at.In(time.FixedZone("x", 3600)), Task: "t", Act: "answer", Actor: Actor{Name: "a", Role: "agent", Host: "h1", Label: "claude"},
			Keys: []string{"approve", "", "a<b"}, From: StatusWorking, To: StatusCompleted, Record: strings.Repeat("ab", 32), Prev: 12, Seal: strings.Repeat("0f", 32)},
		{At: time.Unix(0, 1).UTC(), Task: "é\u2028\x00\"\\&", Actor: Actor{Name: "\xff\xfe", Role: "\t"}, Keys: []string{}},
	}
	for i, b := range bodies {
		want, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		if got := b.AppendJSON([]byte("x")); string(got) != "x"+string(want) {
			t.Errorf("body %d: AppendJSON gives\n%s\njson.Marshal\n%s", i, got[1:], want)
		}
	}
}

func FuzzAuditAppendMatchesJSON(f *testing.F) {
	f.Add("task", "call", "alice", "user", "", "", "k", "working", "", int64(1), uint64(0))
	f.Add("<&>", "\u2028", "\xff", "\x7f", "h", "l", "", "", "completed", int64(-5), uint64(9))
	f.Fuzz(func(t *testing.T, task, act, name, role, host, label, key, from, to string, ns int64, prev uint64) {
		b := AuditBody{At: time.Unix(0, ns).UTC(), Task: task, Act: act, Actor: Actor{Name: name, Role: role, Host: host, Label: label},
			From: Status(from), To: Status(to), Record: task, Prev: prev, Seal: key}
		if key != "" {
			b.Keys = []string{key, name}
		}
		want, err := json.Marshal(b)
		if err != nil {
			t.Skip(err)
		}
		if got := b.AppendJSON(nil); string(got) != string(want) {
			t.Errorf("AppendJSON gives\n%s\njson.Marshal\n%s", got, want)
		}
	})
}
