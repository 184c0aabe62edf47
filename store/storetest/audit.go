package storetest

import (
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
)

var (
	alice = model.Actor{Name: "alice", Role: model.RoleUser}
	bob   = model.Actor{Name: "agent-b", Role: model.RoleAgent, Label: "claude"}
)

// AuditKey is the audit key the contract's audit tests seal with.
var AuditKey = []byte("storetest's audit key, 32 bytes.")

// keyed seals s's audit entries with AuditKey from now on.
func keyed(s store.Backend) {
	s.(interface{ SetAuditKey([]byte) }).SetAuditKey(AuditKey)
}

// Every change has its audit entry, at its revision, naming its act and
// actor; concurrent writes (a backend's batches) chain in revision order;
// the chain and the records verify.
func testAuditNamesEveryChange(t *testing.T, s store.Backend) {
	keyed(s)
	rec := Intent("", T0)
	rec.Act = &model.Act{Kind: model.ActCall, Actor: alice}
	Must(t, s.Create(rec))
	if rec.History[0].By != alice {
		t.Fatalf("the intent's first transition is by %+v, want %+v", rec.History[0].By, alice)
	}
	_, err := s.Update(rec.ID, func(r *model.Task) (bool, error) {
		if err := r.MoveTo(model.StatusInputRequired, "", T0); err != nil {
			return false, err
		}
		r.InputRequests = map[string]model.InputRequest{"ok": {Method: "elicitation/create"}}
		return true, nil
	})
	Must(t, err)
	got, err := s.Update(rec.ID, func(r *model.Task) (bool, error) {
		r.PendingAnswers = map[string]json.RawMessage{"ok": json.RawMessage(`{"action":"accept"}`)}
		r.MarkAnswered([]string{"ok"}, T0)
		r.Act = &model.Act{Kind: model.ActAnswer, Actor: bob, Keys: []string{"ok"}}
		return true, nil
	})
	Must(t, err)
	if got.Answers[0].By != bob || got.Act.Actor != bob {
		t.Fatalf("the answer is by %+v (act %+v), want %+v", got.Answers[0].By, got.Act, bob)
	}
	var wg sync.WaitGroup
	made := make([]*model.Task, 16)
	for i := range made {
		wg.Go(func() {
			made[i] = Create(t, s, "", model.StatusCompleted, T0)
		})
	}
	wg.Wait()
	Must(t, s.Delete(made[0].ID, alice))
	if n, err := s.Prune(time.Time{}, bob); err != nil || n != len(made)-1 {
		t.Fatalf("Prune = %d, %v; want %d", n, err, len(made)-1)
	}

	entries, cp, err := store.ReadAudit(s, model.AuditFilter{})
	Must(t, err)
	if cp.Rev != 0 || uint64(len(entries)) != s.Revision() {
		t.Fatalf("%d entries from checkpoint %d; want one per revision, %d", len(entries), cp.Rev, s.Revision())
	}
	for i, e := range entries {
		if e.Rev != uint64(i+1) {
			t.Fatalf("entry %d has revision %d", i, e.Rev)
		}
	}
	want := []model.AuditBody{
		{Task: rec.ID, Act: model.ActCall, Actor: alice, To: model.StatusCalling},
		{Task: rec.ID, Act: model.ActUpdate, Actor: entries[1].Actor, From: model.StatusCalling, To: model.StatusInputRequired},
		{Task: rec.ID, Act: model.ActAnswer, Actor: bob, Keys: []string{"ok"}, From: model.StatusInputRequired, To: model.StatusInputRequired},
	}
	for i, w := range want {
		e := entries[i].AuditBody
		if e.Task != w.Task || e.Act != w.Act || e.Actor != w.Actor || !slices.Equal(e.Keys, w.Keys) || e.From != w.From || e.To != w.To || e.Record == "" {
			t.Fatalf("entry %d = %+v, want %+v", i+1, e, w)
		}
	}
	if a := entries[1].Actor; a.Name != "engine" || a.Role != model.RoleEngine {
		t.Fatalf("a change that named no act is by %+v, want the engine", a)
	}
	forget := entries[len(entries)-len(made)]
	if forget.Act != model.ActForget || forget.Actor != alice || forget.Task != made[0].ID || forget.Record != "" {
		t.Fatalf("the forget's entry = %+v", forget)
	}
	for _, e := range entries[len(entries)-len(made)+1:] {
		if e.Act != model.ActPrune || e.Actor != bob {
			t.Fatalf("a prune's entry = %+v", e)
		}
	}
	if task, _, err := store.ReadAudit(s, model.AuditFilter{Task: rec.ID}); err != nil || len(task) != 3 {
		t.Fatalf("the entries of task %s: %d, %v; want 3", rec.ID, len(task), err)
	}
	readInPages(t, s, entries)
	rep, err := store.VerifyAudit(s, AuditKey)
	Must(t, err)
	if rep.Fault != nil || !rep.Keyed || rep.Entries != len(entries) || rep.Records != 1 {
		t.Fatalf("VerifyAudit = %+v (fault %v); want %d entries, 1 record, no fault", rep, rep.Fault, len(entries))
	}
}

// Pruning the log leaves a checkpoint after which the rest verifies; the
// records whose entries went are no longer checked.
func testAuditPruneKeepsAVerifiableChain(t *testing.T, s store.Backend) {
	keyed(s)
	old := []*model.Task{Create(t, s, "", model.StatusCompleted, T0), Create(t, s, "", model.StatusWorking, T0)}
	_, err := s.Update(old[1].ID, MoveTo(model.StatusCompleted, T0))
	Must(t, err)
	// Entries are stamped with the time of their commit: cut after these.
	cut := time.Now()
	Create(t, s, "", model.StatusWorking, T0)
	newest := Create(t, s, "", model.StatusFailed, T0)
	tail := s.(store.AuditTail)
	if cp, err := tail.AuditCheckpoint(); err != nil || cp != (model.AuditCheckpoint{}) {
		t.Fatalf("AuditCheckpoint before any prune = %+v, %v; want none", cp, err)
	}
	if n, err := s.PruneAudit(cut); err != nil || n != 3 {
		t.Fatalf("PruneAudit = %d, %v; want the 3 entries made before the cut", n, err)
	}
	entries, cp, err := store.ReadAudit(s, model.AuditFilter{})
	Must(t, err)
	if cp.Rev != 3 || cp.Hash == "" || len(entries) != 2 || entries[0].Rev != 4 {
		t.Fatalf("after PruneAudit: checkpoint %+v, %d entries", cp, len(entries))
	}
	// The chain's length (telemetry's taskdeck_audit_entries) is the
	// revision less the checkpoint's, read without the log.
	if got, err := tail.AuditCheckpoint(); err != nil || got != cp || s.Revision()-got.Rev != uint64(len(entries)) {
		t.Fatalf("AuditCheckpoint after PruneAudit = %+v, %v (revision %d); want %+v, %d entries after it", got, err, s.Revision(), cp, len(entries))
	}
	if since, _, err := store.ReadAudit(s, model.AuditFilter{Since: entries[1].At}); err != nil || len(since) != 1 || since[0].Task != newest.ID {
		t.Fatalf("entries since the last: %+v, %v", since, err)
	}
	readInPages(t, s, entries)
	rep, err := store.VerifyAudit(s, AuditKey)
	Must(t, err)
	if rep.Fault != nil || rep.Entries != 2 || rep.Checkpoint != cp {
		t.Fatalf("VerifyAudit after PruneAudit = %+v (fault %v)", rep, rep.Fault)
	}
	if n, err := s.PruneAudit(cut); err != nil || n != 0 {
		t.Fatalf("PruneAudit again = %d, %v; want nothing more", n, err)
	}
}

// LastAudit (store.AuditTail) reads nothing from an empty log, then the
// last entry kept, as the whole log reads it, sealed with the key.
func testAuditTail(t *testing.T, s store.Backend) {
	tail := s.(store.AuditTail)
	if _, _, found, err := tail.LastAudit(); err != nil || found {
		t.Fatalf("an empty log's last entry: found %v, %v", found, err)
	}
	keyed(s)
	for range 3 {
		Create(t, s, "", model.StatusCompleted, T0)
	}
	var lastRev uint64
	var lastBody []byte
	_, err := s.AuditLog(0, func(_ model.AuditCheckpoint, rev uint64, body, _ []byte) error {
		lastRev, lastBody = rev, slices.Clone(body)
		return nil
	})
	Must(t, err)
	rev, body, found, err := tail.LastAudit()
	Must(t, err)
	if !found || rev != lastRev || string(body) != string(lastBody) || !model.SealedBy(AuditKey, body) {
		t.Fatalf("LastAudit: %d %s (found %v), want %d %s sealed with the key", rev, body, found, lastRev, lastBody)
	}
}

// readInPages reads the log a few entries at a time (Limit, and the last
// revision read as After), from every start inside and between the runs
// of entries one commit wrote, and wants the whole read's entries and
// hashes.
func readInPages(t *testing.T, s store.Backend, whole []model.AuditEntry) {
	t.Helper()
	for _, size := range []int{1, 2, 3, 5} {
		var got []model.AuditEntry
		var after uint64
		for {
			page, _, err := store.ReadAudit(s, model.AuditFilter{After: after, Limit: size})
			Must(t, err)
			got = append(got, page...)
			if len(page) < size {
				break
			}
			after = page[len(page)-1].Rev
		}
		if len(got) != len(whole) {
			t.Fatalf("read %d at a time: %d entries, want %d", size, len(got), len(whole))
		}
		for i := range got {
			if got[i].Rev != whole[i].Rev || got[i].Hash != whole[i].Hash || got[i].Task != whole[i].Task || got[i].Act != whole[i].Act {
				t.Fatalf("read %d at a time, entry %d: %d %s %s, want %d %s %s", size, i, got[i].Rev, got[i].Act, got[i].Hash, whole[i].Rev, whole[i].Act, whole[i].Hash)
			}
		}
	}
}
