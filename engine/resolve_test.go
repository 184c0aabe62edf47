package engine

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/store/badger"
	"github.com/taskdeck/taskdeck/store/storetest"
)

// noScan is a store that fails a test reading every record.
type noScan struct {
	store.Backend
	t *testing.T
}

func (s noScan) All() ([]*model.Task, error) {
	s.t.Error("resolve read every record")
	return nil, errors.New("All refused by the test")
}

// An operator's short id, a unique prefix or suffix, names its record
// from the ids alone: no record is decoded to find it.
func TestResolveReadsNoRecords(t *testing.T) {
	st, err := badger.Open(filepath.Join(t.TempDir(), "store"), nil)
	storetest.Must(t, err)
	t.Cleanup(func() { _ = st.Close() })
	var ids []string
	for i := range 3 {
		ids = append(ids, storetest.Create(t, st, "", model.StatusWorking, storetest.T0.Add(time.Duration(i)*time.Hour)).ID)
	}
	e := &Engine{store: noScan{st, t}}
	unique := func(part string) {
		t.Helper()
		n := 0
		for _, id := range ids {
			if strings.HasPrefix(id, part) || strings.HasSuffix(id, part) {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%q is part of %d ids of %v; the test wants one", part, n, ids)
		}
	}
	for _, part := range []string{ids[1][:model.IDLen-4], ids[2][4:]} {
		unique(part)
		rec, err := e.resolve(part)
		if err != nil || !strings.HasPrefix(rec.ID, part) && !strings.HasSuffix(rec.ID, part) {
			t.Errorf("resolve(%q) = %v, %v; want the record it names", part, rec, err)
		}
	}
	if _, err := e.resolve(ids[0][:2]); err == nil || !strings.Contains(err.Error(), "matches several tasks") {
		t.Errorf("resolve of a part of every id: %v; want it ambiguous", err)
	}
	var de *deck.Error
	if _, err := e.resolve("zzzz"); !errors.As(err, &de) || de.Kind != deck.KindNotFound {
		t.Errorf("resolve of no id's part: %v; want not found", err)
	}
}
