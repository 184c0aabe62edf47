package model

import (
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
