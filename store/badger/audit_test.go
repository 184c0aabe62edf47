package badger_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	dgraph "github.com/dgraph-io/badger/v4"

	"github.com/taskdeck/taskdeck/internal/cli"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/store/badger"
)

// keyedStore opens the store in dir with the audit key taskdeck's engine
// seals it with (the key audit verify reads).
func keyedStore(t *testing.T, dir string) *badger.Store {
	t.Helper()
	s := openStore(t, dir)
	key, err := store.LoadAuditKey(dir)
	must(t, err)
	s.SetAuditKey(key)
	return s
}

// auditedStore leaves, closed in a new directory, a store whose record
// (ended, so its JSON is under its record key) was answered by alice and
// forgotten records beside it; it returns the directory and the record.
func auditedStore(t *testing.T) (string, *model.Task) {
	t.Helper()
	dir := t.TempDir()
	s := keyedStore(t, dir)
	alice := model.Actor{Name: "alice", Role: model.RoleUser}
	rec := intent("", t0)
	rec.Act = &model.Act{Kind: model.ActCall, Actor: alice}
	must(t, s.Create(rec))
	for _, st := range []model.Status{model.StatusWorking, model.StatusCompleted} {
		_, err := s.Update(rec.ID, moveTo(st, t0))
		must(t, err)
	}
	gone := intent("", t0)
	must(t, s.Create(gone))
	must(t, s.Delete(gone.ID, alice))
	must(t, s.Close())
	return dir, rec
}

// verify runs `taskdeck audit verify` on the store in dir.
func verify(t *testing.T, dir string) (code int, stdout, stderr string) {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "config.json")
	must(t, os.WriteFile(conf, []byte("{}\n"), 0o600))
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code = cli.NewFactory(strings.NewReader(""), &out, &errb).Execute(ctx, []string{"--data-dir", dir, "--config", conf, "audit", "verify"})
	return code, out.String(), errb.String()
}

func auditKey(rev uint64) string { return string(binary.BigEndian.AppendUint64([]byte("a\x00"), rev)) }

// TestAuditVerifyNamesARewrittenRecord: a record rewritten with Badger's
// own API on the closed store (its actor and status changed) opens, and
// `taskdeck audit verify` exits 6 naming the record and its revision.
func TestAuditVerifyNamesARewrittenRecord(t *testing.T) {
	dir, rec := auditedStore(t)
	if code, out, errOut := verify(t, dir); code != 0 || !strings.Contains(out, "audit log verified: 5 audit entries") {
		t.Fatalf("before the rewrite: exit %d\n%s%s", code, out, errOut)
	}
	must(t, badger.Rewrite(dir, "t\x00"+rec.ID, func(v []byte) []byte {
		return bytes.ReplaceAll(v, []byte(`"name":"alice"`), []byte(`"name":"mallory"`))
	}))
	code, out, errOut := verify(t, dir)
	want := fmt.Sprintf("audit entry 3 (task %s): the record does not match", rec.ID)
	if code != 6 || !strings.Contains(errOut, want) {
		t.Fatalf("after the rewrite: exit %d, want 6 and %q\n%s%s", code, want, out, errOut)
	}
}

// TestAuditVerifyNamesARewrittenEntry: an audit entry rewritten (its
// actor changed) fails at that entry; one rewritten with its hash
// recomputed too, at its seal.
func TestAuditVerifyNamesARewrittenEntry(t *testing.T) {
	for _, c := range []struct {
		name   string
		rehash bool
		at     string
	}{
		{"entry", false, "audit entry 1 (task "},
		{"entry and its hash", true, "audit entry 1 (task "},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, _ := auditedStore(t)
			must(t, badger.Rewrite(dir, auditKey(1), func(v []byte) []byte {
				body := bytes.ReplaceAll(badger.UnpackAudit(v[32:]), []byte(`"name":"alice"`), []byte(`"name":"mallory"`))
				hash := v[:32]
				if c.rehash {
					hash = model.ChainHash(nil, 1, body)
				}
				return append(append([]byte(nil), hash...), badger.PackAudit(body)...)
			}))
			code, out, errOut := verify(t, dir)
			if code != 6 || !strings.Contains(errOut, c.at) {
				t.Fatalf("exit %d, want 6 naming %q\n%s%s", code, c.at, out, errOut)
			}
		})
	}
}

// TestAuditVerifyNamesADeletedEntry: an entry deleted from the middle of
// the log is missed where the log skips it.
func TestAuditVerifyNamesADeletedEntry(t *testing.T) {
	dir, _ := auditedStore(t)
	must(t, badger.DeleteClosed(dir, auditKey(2)))
	code, out, errOut := verify(t, dir)
	if code != 6 || !strings.Contains(errOut, "audit entry 2: missing") {
		t.Fatalf("exit %d, want 6 naming entry 2 missing\n%s%s", code, out, errOut)
	}
}

// rechain recomputes, in txn, the SHA-256 chain of every entry from rev
// on: what whoever can write the store can do after changing one.
func rechain(txn *dgraph.Txn, rev uint64) error {
	var prev []byte
	if rev > 1 {
		item, err := txn.Get([]byte(auditKey(rev - 1)))
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		prev = v[:32]
	}
	for ; ; rev++ {
		item, err := txn.Get([]byte(auditKey(rev)))
		if errors.Is(err, dgraph.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		prev = model.ChainHash(prev, rev, badger.UnpackAudit(v[32:]))
		if err := txn.Set([]byte(auditKey(rev)), append(slices.Clone(prev), v[32:]...)); err != nil {
			return err
		}
	}
}

// TestAuditVerifyNamesARewriteWithItsChain: the record rewritten (its
// caller renamed mallory) and its last entry made to match it, by
// Badger's own API on the closed store, with the SHA-256 chain
// recomputed from there on: the chain and the record agree, but the
// entry's seal, made with the audit key kept beside the store, does not.
// The same with an entry alone rewritten (the call's actor) and the
// chain recomputed. `taskdeck audit verify` exits 6 naming the entry.
func TestAuditVerifyNamesARewriteWithItsChain(t *testing.T) {
	t.Run("record and entry", func(t *testing.T) {
		dir, rec := auditedStore(t)
		must(t, badger.Tamper(dir, func(txn *dgraph.Txn) error {
			item, err := txn.Get([]byte("t\x00" + rec.ID))
			if err != nil {
				return err
			}
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			v = bytes.ReplaceAll(v, []byte(`"name":"alice"`), []byte(`"name":"mallory"`))
			var forged model.Task
			if err := json.Unmarshal(v, &forged); err != nil {
				return err
			}
			sum, err := model.RecordHash(&forged)
			if err != nil {
				return err
			}
			if err := txn.Set([]byte("t\x00"+rec.ID), v); err != nil {
				return err
			}
			// The record's last change is entry 3: make it name the forgery.
			item, err = txn.Get([]byte(auditKey(3)))
			if err != nil {
				return err
			}
			e, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			canon := badger.UnpackAudit(e[32:])
			var body model.AuditBody
			if err := json.Unmarshal(canon, &body); err != nil {
				return err
			}
			canon = bytes.Replace(canon, []byte(body.Record), []byte(sum), 1)
			if err := txn.Set([]byte(auditKey(3)), append(e[:32:32], badger.PackAudit(canon)...)); err != nil {
				return err
			}
			return rechain(txn, 3)
		}))
		code, out, errOut := verify(t, dir)
		want := fmt.Sprintf("audit entry 3 (task %s): its seal does not match", rec.ID)
		if code != 6 || !strings.Contains(errOut, want) {
			t.Fatalf("exit %d, want 6 and %q\n%s%s", code, want, out, errOut)
		}
	})
	t.Run("entry", func(t *testing.T) {
		dir, rec := auditedStore(t)
		must(t, badger.Tamper(dir, func(txn *dgraph.Txn) error {
			item, err := txn.Get([]byte(auditKey(1)))
			if err != nil {
				return err
			}
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			canon := bytes.ReplaceAll(badger.UnpackAudit(v[32:]), []byte(`"name":"alice"`), []byte(`"name":"mallory"`))
			if err := txn.Set([]byte(auditKey(1)), append(v[:32:32], badger.PackAudit(canon)...)); err != nil {
				return err
			}
			return rechain(txn, 1)
		}))
		code, out, errOut := verify(t, dir)
		want := fmt.Sprintf("audit entry 1 (task %s): its seal does not match", rec.ID)
		if code != 6 || !strings.Contains(errOut, want) {
			t.Fatalf("exit %d, want 6 and %q\n%s%s", code, want, out, errOut)
		}
	})
}

// TestAuditEntriesPacked: every entry of a keyed log (calls by a user and
// by an agent on a fleet host with a label, an answer with its keys, the
// engine's moves, a deletion) is stored packed, in at most half its
// canonical bytes, and reads back as exactly those bytes; an entry left
// canonical, as a taskdeck before the packing wrote it, still verifies.
func TestAuditEntriesPacked(t *testing.T) {
	dir := t.TempDir()
	s := keyedStore(t, dir)
	agent := model.Actor{Name: "builder", Role: model.RoleAgent, Host: "host-b", Label: "claude-code 2.1"}
	rec := intent("", t0)
	rec.Act = &model.Act{Kind: model.ActCall, Actor: agent}
	must(t, s.Create(rec))
	_, err := s.Update(rec.ID, func(r *model.Task) (bool, error) {
		r.Act = &model.Act{Kind: model.ActAnswer, Actor: model.Actor{Name: "alice", Role: model.RoleUser}, Keys: []string{"q1", "q2"}}
		return true, r.MoveTo(model.StatusWorking, "answered", t0)
	})
	must(t, err)
	gone := intent("", t0)
	must(t, s.Create(gone))
	must(t, s.Delete(gone.ID, model.Actor{Name: "alice", Role: model.RoleUser}))
	var canon [][]byte
	_, err = s.AuditLog(0, func(_ model.AuditCheckpoint, _ uint64, body, _ []byte) error {
		canon = append(canon, slices.Clone(body))
		return nil
	})
	must(t, err)
	must(t, s.Close())
	if len(canon) != 4 || !bytes.Contains(canon[0], []byte(`"label":"claude-code 2.1"`)) || !bytes.Contains(canon[1], []byte(`"keys":["q1","q2"]`)) {
		t.Fatalf("the log reads:\n%s", bytes.Join(canon, []byte("\n")))
	}
	for i := range canon {
		must(t, badger.Rewrite(dir, auditKey(uint64(i+1)), func(v []byte) []byte {
			if v[32] != 1 || len(v)-32 > len(canon[i])/2 || !bytes.Equal(badger.UnpackAudit(v[32:]), canon[i]) {
				t.Fatalf("entry %d is stored in %d bytes (first %d) for %d canonical:\n%s", i+1, len(v)-32, v[32], len(canon[i]), canon[i])
			}
			if i == 1 {
				return append(v[:32:32], canon[i]...) // as written before the packing
			}
			return v
		}))
	}
	if code, out, errOut := verify(t, dir); code != 0 || !strings.Contains(out, "audit log verified: 4 audit entries") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}

// TestAuditVerifyNamesAGarbledPackedEntry: a packed entry whose bytes no
// longer unpack is named by `audit verify`, not a failure to read.
func TestAuditVerifyNamesAGarbledPackedEntry(t *testing.T) {
	dir, rec := auditedStore(t)
	must(t, badger.Rewrite(dir, auditKey(2), func(v []byte) []byte { return v[:len(v)-3] }))
	code, out, errOut := verify(t, dir)
	if want := "audit entry 2"; code != 6 || !strings.Contains(errOut, want) {
		t.Fatalf("exit %d, want 6 naming %q (task %s)\n%s%s", code, want, rec.ID, out, errOut)
	}
}

// TestAuditPackingKnowsEveryField: an entry with every field of
// model.AuditBody and model.Actor set packs and unpacks to its canonical
// bytes; a field added to either, which the packing (or AppendJSON) would
// drop, fails here.
func TestAuditPackingKnowsEveryField(t *testing.T) {
	var fill func(v reflect.Value, name string)
	fill = func(v reflect.Value, name string) {
		switch {
		case v.Type() == reflect.TypeFor[time.Time]():
			v.Set(reflect.ValueOf(time.Date(2026, 12, 2, 8, 0, 0, 123456789, time.UTC)))
		case name == "Record" || name == "Seal":
			v.SetString(strings.Repeat("0f", 32))
		case v.Kind() == reflect.String:
			v.SetString("value of " + name)
		case v.Kind() == reflect.Uint64:
			v.SetUint(1<<40 + 7)
		case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String:
			v.Set(reflect.ValueOf([]string{"q1", "q2"}))
		case v.Kind() == reflect.Struct:
			for i := range v.NumField() {
				fill(v.Field(i), v.Type().Field(i).Name)
			}
		default:
			t.Fatalf("field %s (%s) is new to the audit packing: pack it (store/audit.go)", name, v.Type())
		}
	}
	var b model.AuditBody
	fill(reflect.ValueOf(&b).Elem(), "AuditBody")
	canon, err := json.Marshal(b) // not b.Marshal, which would miss a new field too
	must(t, err)
	packed := badger.PackAudit(canon)
	if packed[0] != 1 || !bytes.Equal(badger.UnpackAudit(packed), canon) {
		t.Fatalf("packed (first byte %d) unpacks to\n%s\nwant\n%s", packed[0], badger.UnpackAudit(packed), canon)
	}
}
