package badger_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/store/badger"
)

// TestArgumentsAreWrittenOnce: a record with 100 KB of arguments keeps
// them under a key of their own, so a poll's rewrite of the record is
// small, and every read gives the arguments back as they were sent.
func TestArgumentsAreWrittenOnce(t *testing.T) {
	s := newStore(t)
	rec := largeRecord(t, s, 100<<10)
	created, err := badger.KeyVersion(s, "A\x00"+rec.ID)
	must(t, err)
	for i := range 20 {
		progress(t, s, rec.ID, i)
	}
	if v, err := badger.KeyVersion(s, "A\x00"+rec.ID); err != nil || v != created {
		t.Errorf("the arguments' key was written at version %d, then again at %d (%v): polls rewrite them", created, v, err)
	}
	v, err := badger.Raw(s, "s\x00working\x00"+rec.ID)
	must(t, err)
	if len(v) > 4<<10 {
		t.Errorf("the record's stored value is %d bytes for %d bytes of arguments: a rewrite copies them", len(v), len(rec.Arguments))
	}
	if a, err := badger.Raw(s, "A\x00"+rec.ID); err != nil || a != string(rec.Arguments) {
		t.Errorf("the arguments' own key holds %d bytes (%v), want the %d of the record's arguments", len(a), err, len(rec.Arguments))
	}
	assertArgs(t, s, rec.ID, rec.Arguments)
}

// assertArgs checks that every read of record id gives args back.
func assertArgs(t *testing.T, s *badger.Store, id string, args json.RawMessage) {
	t.Helper()
	check := func(how string, got *model.Task) {
		t.Helper()
		if got == nil || !bytes.Equal(got.Arguments, args) {
			n := -1
			if got != nil {
				n = len(got.Arguments)
			}
			t.Errorf("%s: arguments of %d bytes, want the %d written", how, n, len(args))
		}
	}
	got, err := s.Get(id)
	must(t, err)
	check("Get", got)
	find := func(how string, recs []*model.Task, err error) {
		t.Helper()
		must(t, err)
		i := slices.IndexFunc(recs, func(r *model.Task) bool { return r.ID == id })
		if i < 0 {
			t.Fatalf("%s: no record %s", how, id)
		}
		check(how, recs[i])
	}
	all, err := s.All()
	find("All", all, err)
	byStatus, err := s.ByStatus(got.Status)
	find("ByStatus", byStatus, err)
	newest, err := s.Newest(100)
	find("Newest", newest, err)
	_, snap, err := s.Snapshot()
	find("Snapshot", snap, err)
	changes, _, _, err := s.ChangesSince(0)
	var changed []*model.Task
	for _, c := range changes {
		if c.Task != nil {
			changed = append(changed, c.Task)
		}
	}
	find("ChangesSince", changed, err)
}

// TestSchema2RecordsReadBack: records written with their arguments
// inline (schema 2, before they were kept apart), open and finished, read
// back exactly after an upgrade, verify against their audit entries, and
// move their arguments apart at their next change.
func TestSchema2RecordsReadBack(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	restore := badger.WriteArgsInline()
	open := largeRecord(t, s, 100<<10)
	done := largeRecord(t, s, 100<<10)
	_, err := s.Update(done.ID, moveTo(model.StatusCompleted, t0.Add(time.Minute)))
	must(t, err)
	restore()
	must(t, badger.PutRaw(s, "v\x00", "2"))
	must(t, s.Close())

	s = openStore(t, dir)
	if v, err := badger.Raw(s, "v\x00"); err != nil || v != "4" {
		t.Fatalf("schema version after opening a schema 2 store: %q, %v", v, err)
	}
	assertArgs(t, s, open.ID, open.Arguments)
	assertArgs(t, s, done.ID, done.Arguments)
	assertAuditVerifies(t, s)

	progress(t, s, open.ID, 1)
	if v, err := badger.Raw(s, "s\x00working\x00"+open.ID); err != nil || len(v) > 4<<10 {
		t.Errorf("after a change the record's value is %d bytes (%v): its arguments stayed inline", len(v), err)
	}
	assertArgs(t, s, open.ID, open.Arguments)
	assertAuditVerifies(t, s)
}

func assertAuditVerifies(t *testing.T, s *badger.Store) {
	t.Helper()
	rep, err := store.VerifyAudit(s, nil)
	must(t, err)
	if rep.Fault != nil {
		t.Fatalf("the audit log does not verify: %+v", rep.Fault)
	}
}

// TestNoArgumentsOutliveTheirRecord: prune, forget and an update that
// makes the arguments small again each take the arguments' key with them
// in their commit.
func TestNoArgumentsOutliveTheirRecord(t *testing.T) {
	s := newStore(t)
	var recs []*model.Task
	for range 4 {
		recs = append(recs, largeRecord(t, s, 8<<10))
	}
	if n := argsKeys(t, s); n != 4 {
		t.Fatalf("%d argument keys for 4 records with 8 KB of arguments, want 4", n)
	}
	for _, rec := range recs[:2] {
		_, err := s.Update(rec.ID, moveTo(model.StatusCompleted, t0.Add(time.Minute)))
		must(t, err)
	}
	n, err := s.Prune(time.Time{}, tester)
	must(t, err)
	if n != 2 {
		t.Fatalf("Prune deleted %d, want 2", n)
	}
	must(t, s.Delete(recs[2].ID, tester))
	small := json.RawMessage(`{"n":1}`)
	_, err = s.Update(recs[3].ID, func(r *model.Task) (bool, error) {
		r.Arguments = small
		return true, nil
	})
	must(t, err)
	if n := argsKeys(t, s); n != 0 {
		t.Errorf("%d argument keys left after prune, forget and shrinking, want 0", n)
	}
	assertArgs(t, s, recs[3].ID, small)
	assertAuditVerifies(t, s)
}

func argsKeys(t *testing.T, s *badger.Store) int {
	t.Helper()
	keys, err := badger.Keys(s)
	must(t, err)
	n := 0
	for _, k := range keys {
		if strings.HasPrefix(k, "A\x00") {
			n++
		}
	}
	return n
}

// TestLoadKeepsArgumentsApart: a store filled by Load stores big
// arguments as Create does, and reads them back.
func TestLoadKeepsArgumentsApart(t *testing.T) {
	var recs []*model.Task
	for i := range 300 {
		args, err := json.Marshal(map[string]any{"n": i, "text": strings.Repeat("x", i%3*1500)})
		must(t, err)
		rec := model.NewIntent(model.ServerRef{Name: "s"}, "tool", args, "", t0.Add(time.Duration(i)*time.Second))
		must(t, rec.MoveTo(model.StatusCalling, "", rec.CreatedAt))
		recs = append(recs, rec)
	}
	dir := t.TempDir()
	n, err := badger.Load(dir, slices.Values(recs))
	must(t, err)
	if n != len(recs) {
		t.Fatalf("Load stored %d records, want %d", n, len(recs))
	}
	s := openStore(t, dir)
	if got := argsKeys(t, s); got != 200 {
		t.Errorf("%d argument keys for the 200 records with 1.5 KB or more of arguments", got)
	}
	for _, rec := range recs[len(recs)-3:] {
		assertArgs(t, s, rec.ID, rec.Arguments)
	}
}
