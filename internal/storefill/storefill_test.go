package storefill

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/store/badger"
)

func openStore(t *testing.T, dir string) *badger.Store {
	t.Helper()
	s, err := badger.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A loaded store reads back as the same records created one Create after
// another: records, counts, pages, the change feed and the audit log; but
// for the revisions, which concurrent Creates hand out in commit order
// (and the audit entries' times and hashes).
func TestLoadMatchesCreate(t *testing.T) {
	var recs []*model.Task
	for r := range Records(20, 280) {
		recs = append(recs, r)
	}
	created, loaded := filepath.Join(t.TempDir(), "created"), filepath.Join(t.TempDir(), "loaded")
	s, err := badger.Open(created, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := s.Create(r.Clone()); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	n, err := badger.Load(loaded, func(yield func(*model.Task) bool) {
		for _, r := range recs {
			if !yield(r.Clone()) {
				return
			}
		}
	})
	if err != nil || n != len(recs) {
		t.Fatalf("Load: %d records, %v", n, err)
	}
	a, b := openStore(t, created), openStore(t, loaded)
	reads := map[string]func(s *badger.Store) (any, error){
		"All":      func(s *badger.Store) (any, error) { return noRev(s.All()) },
		"Counts":   func(s *badger.Store) (any, error) { return s.Counts() },
		"Revision": func(s *badger.Store) (any, error) { return s.Revision(), nil },
		"Window": func(s *badger.Store) (any, error) {
			w, err := s.Window(50)
			w.Open, _ = noRev(w.Open, nil)
			w.Finished, _ = noRev(w.Finished, nil)
			return w, err
		},
		"Page": func(s *badger.Store) (any, error) { return noRev(s.Page(recs[200].ID, 30, model.StatusCompleted)) },
		"Get": func(s *badger.Store) (any, error) {
			r, err := s.Get(recs[7].ID)
			return noRev([]*model.Task{r}, err)
		},
		// Every record once, at its revision.
		"ChangesSince": func(s *badger.Store) (any, error) {
			ch, upTo, ok, err := s.ChangesSince(0)
			var tasks []*model.Task
			for _, c := range ch {
				if c.Task == nil || c.Task.Revision != c.Rev {
					t.Errorf("change %+v", c)
				}
				tasks = append(tasks, c.Task)
			}
			slices.SortFunc(tasks, func(x, y *model.Task) int { return strings.Compare(x.ID, y.ID) })
			tasks, _ = noRev(tasks, nil)
			return []any{tasks, upTo, ok}, err
		},
		"audit": func(s *badger.Store) (any, error) {
			entries, cp, err := store.ReadAudit(s, model.AuditFilter{})
			for i := range entries {
				entries[i].Rev, entries[i].At, entries[i].Hash = 0, time.Time{}, ""
			}
			slices.SortFunc(entries, func(x, y model.AuditEntry) int { return strings.Compare(x.Task, y.Task) })
			return []any{entries, cp}, err
		},
	}
	for name, read := range reads {
		va, errA := read(a)
		vb, errB := read(b)
		if errA != nil || errB != nil {
			t.Fatalf("%s: %v, %v", name, errA, errB)
		}
		if ja, jb := jsonOf(t, va), jsonOf(t, vb); ja != jb {
			t.Errorf("%s differs:\ncreated %.600s\nloaded  %.600s", name, ja, jb)
		}
	}
	rep, err := store.VerifyAudit(b, nil)
	if err != nil || rep.Fault != nil || rep.Entries != len(recs) || rep.Records != len(recs) {
		t.Fatalf("the loaded store's audit log: %+v, %v", rep, err)
	}
}

// noRev clears the tasks' revisions, which the loaded store hands out in
// another order.
func noRev(tasks []*model.Task, err error) ([]*model.Task, error) {
	for _, t := range tasks {
		if t != nil {
			t.Revision = 0
		}
	}
	return tasks, err
}

// Ten million records are streamed a chunk at a time: a store of several
// chunks counts, pages and verifies as one, and takes the next Create.
func TestLoadManyChunks(t *testing.T) {
	const open, finished = 1000, 44_000
	dir := filepath.Join(t.TempDir(), "store")
	if err := Fill(dir, open, finished); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, dir)
	counts, err := s.Counts()
	if err != nil || counts[model.StatusWorking] != open || counts[model.StatusCompleted] != finished || len(counts) != 2 {
		t.Fatalf("counts %v, %v", counts, err)
	}
	if s.Revision() != open+finished {
		t.Fatalf("revision %d, want %d", s.Revision(), open+finished)
	}
	tasks, err := s.OpenTasks()
	if err != nil || len(tasks) != open {
		t.Fatalf("%d open tasks, %v", len(tasks), err)
	}
	var ids []string
	for before := ""; ; {
		page, err := s.Page(before, 5000, model.StatusCompleted)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			ids = append(ids, r.ID)
		}
		before = page[len(page)-1].ID
	}
	if len(ids) != finished || !slices.IsSortedFunc(ids, func(x, y string) int { return strings.Compare(y, x) }) {
		t.Fatalf("paging the completed index gave %d ids (want %d, newest first)", len(ids), finished)
	}
	for _, id := range []string{tasks[0].ID, ids[0], ids[finished/2], ids[finished-1]} {
		if r, err := s.Get(id); err != nil || r.ID != id || r.Revision == 0 {
			t.Fatalf("Get %s: %+v, %v", id, r, err)
		}
	}
	rep, err := store.VerifyAudit(s, nil)
	if err != nil || rep.Fault != nil || rep.Entries != open+finished {
		t.Fatalf("audit: %+v, %v", rep, err)
	}
	// The store goes on as any other: a new record after a reopen.
	next := model.NewIntent(model.ServerRef{Name: "demo"}, "sleep", json.RawMessage(`{}`), "", tasks[0].CreatedAt)
	if err := s.Create(next); err != nil || next.Revision != open+finished+1 {
		t.Fatalf("Create after Load: revision %d, %v", next.Revision, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir)
	if r, err := s.Get(next.ID); err != nil || r.Revision != open+finished+1 {
		t.Fatalf("after reopen: %+v, %v", r, err)
	}
}

func TestLoadRefusesDisorder(t *testing.T) {
	var recs []*model.Task
	for r := range Records(0, 3) {
		recs = append(recs, r)
	}
	slices.Reverse(recs)
	_, err := badger.Load(t.TempDir(), slices.Values(recs))
	if err == nil || !strings.Contains(err.Error(), "increasing order") {
		t.Fatalf("records in decreasing id order: %v", err)
	}
	dir := t.TempDir()
	if err := Fill(dir, 1, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := badger.Load(dir, Records(1, 1)); err == nil || !strings.Contains(err.Error(), "empty directory") {
		t.Fatalf("Load over a store: %v", err)
	}
}
