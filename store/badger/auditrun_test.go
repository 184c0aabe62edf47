package badger_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/store/badger"
)

// runKey is the key of a run of audit entries first..last.
func runKey(first, last uint64) string {
	return auditKey(last) + string(binary.BigEndian.AppendUint64(nil, first))
}

// runKeys lists the keys of s's runs of more than one entry.
func runKeys(t *testing.T, s *badger.Store) []string {
	t.Helper()
	keys, err := badger.Keys(s)
	must(t, err)
	var out []string
	for _, k := range keys {
		if strings.HasPrefix(k, "a\x00") && len(k) == len(runKey(0, 0)) {
			out = append(out, k)
		}
	}
	return out
}

// splitRun is a run's value as stored: the last entry's hash, and each
// entry's stored form after its length.
func splitRun(t *testing.T, v []byte) (hash []byte, entries [][]byte) {
	t.Helper()
	hash, rest := v[:32:32], v[32:]
	for len(rest) > 0 {
		l, n := binary.Uvarint(rest)
		if n <= 0 || l > uint64(len(rest)-n) {
			t.Fatalf("a run's entries do not split: %q", rest)
		}
		entries, rest = append(entries, rest[n:n+int(l)]), rest[n+int(l):]
	}
	return hash, entries
}

func joinRun(hash []byte, entries [][]byte) []byte {
	v := slices.Clone(hash)
	for _, e := range entries {
		v = append(binary.AppendUvarint(v, uint64(len(e))), e...)
	}
	return v
}

// prunedRun leaves, closed in a new directory, a keyed store with a
// prune of n records by alice, which is one commit: its n entries are one
// run, revisions n+1..2n. It returns the directory.
func prunedRun(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	s := keyedStore(t, dir)
	for range n {
		create(t, s, "", model.StatusCompleted, t0)
	}
	alice := model.Actor{Name: "alice", Role: model.RoleUser}
	if got, err := s.Prune(t0.Add(1), alice); err != nil || got != n {
		t.Fatalf("Prune = %d, %v; want %d", got, err, n)
	}
	if got := runKeys(t, s); !slices.Equal(got, []string{runKey(uint64(n+1), uint64(2*n))}) {
		t.Fatalf("the prune's entries are under %q, want one run %d..%d", got, n+1, 2*n)
	}
	entries, _, err := store.ReadAudit(s, model.AuditFilter{})
	must(t, err)
	if len(entries) != 2*n {
		t.Fatalf("the log lists %d entries, want %d", len(entries), 2*n)
	}
	for i, e := range entries {
		if e.Rev != uint64(i+1) || i >= n && (e.Act != model.ActPrune || e.Actor != alice) {
			t.Fatalf("entry %d = %+v", i+1, e)
		}
	}
	must(t, s.Close())
	return dir
}

// TestAuditRunOneKeyPerCommit: the entries of one commit (a prune's) are
// one key, list in order with their actor, and verify; an entry inside
// the run rewritten (its actor), with the run's hash recomputed, is named
// by its seal, and the run deleted where the log skips it.
func TestAuditRunOneKeyPerCommit(t *testing.T) {
	const n = 8
	dir := prunedRun(t, n)
	if code, out, errOut := verify(t, dir); code != 0 || !strings.Contains(out, fmt.Sprintf("audit log verified: %d audit entries", 2*n)) {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	t.Run("entry rewritten", func(t *testing.T) {
		dir := prunedRun(t, n)
		var rewritten model.AuditBody
		must(t, badger.Rewrite(dir, runKey(n+1, 2*n), func(v []byte) []byte {
			_, entries := splitRun(t, v)
			canon := bytes.ReplaceAll(badger.UnpackAudit(entries[2]), []byte(`"name":"alice"`), []byte(`"name":"mallory"`))
			entries[2] = badger.PackAudit(canon)
			must(t, json.Unmarshal(canon, &rewritten))
			// Whoever can write the store can recompute the chain.
			var prev []byte
			for i, e := range entries {
				prev = model.ChainHash(prev, uint64(n+1+i), badger.UnpackAudit(e))
			}
			return joinRun(prev, entries)
		}))
		code, out, errOut := verify(t, dir)
		want := fmt.Sprintf("audit entry %d (task %s): its seal does not match", n+3, rewritten.Task)
		if code != 6 || !strings.Contains(errOut, want) {
			t.Fatalf("exit %d, want 6 naming %q's seal\n%s%s", code, want, out, errOut)
		}
	})
	t.Run("run deleted", func(t *testing.T) {
		dir := prunedRun(t, n)
		must(t, badger.DeleteClosed(dir, runKey(n+1, 2*n)))
		s := openStore(t, dir)
		create(t, s, "", model.StatusCompleted, t0) // the log goes on after the run
		must(t, s.Close())
		code, out, errOut := verify(t, dir)
		if want := fmt.Sprintf("audit entry %d: missing", n+1); code != 6 || !strings.Contains(errOut, want) {
			t.Fatalf("exit %d, want 6 and %q\n%s%s", code, want, out, errOut)
		}
	})
}

// TestAuditEntryKeysStillReadAndVerify: a schema 3 store, whose every
// audit entry has a key of its own (a prune's too), opens; its log and
// the runs written after it list every entry in order with its actor and
// verify, and pruning the log up to past the old entries leaves a
// checkpoint after which the runs still verify.
func TestAuditEntryKeysStillReadAndVerify(t *testing.T) {
	const n = 8
	alice := model.Actor{Name: "alice", Role: model.RoleUser}
	dir := t.TempDir()
	key, err := store.LoadAuditKey(dir)
	must(t, err)
	write := func(s *badger.Store) {
		s.SetAuditKey(key)
		for range n {
			create(t, s, "", model.StatusCompleted, t0)
		}
		if got, err := s.Prune(t0.Add(1), alice); err != nil || got != n {
			t.Fatalf("Prune = %d, %v; want %d", got, err, n)
		}
	}
	s := openStore(t, dir)
	badger.WriteEntryKeys(s)
	write(s)
	if got := runKeys(t, s); len(got) != 0 {
		t.Fatalf("schema 3 wrote runs %q", got)
	}
	must(t, badger.PutRaw(s, "v\x00", "3"))
	must(t, s.Close())

	s = openStore(t, dir)
	if v, err := badger.Raw(s, "v\x00"); err != nil || v != "4" {
		t.Fatalf("schema after open = %q, %v; want 4", v, err)
	}
	write(s)
	if got := runKeys(t, s); len(got) != 1 {
		t.Fatalf("the second prune's entries are under %q, want one run", got)
	}
	entries, _, err := store.ReadAudit(s, model.AuditFilter{})
	must(t, err)
	if len(entries) != 4*n {
		t.Fatalf("the log lists %d entries, want %d", len(entries), 4*n)
	}
	for i, e := range entries {
		if prune := i/n%2 == 1; e.Rev != uint64(i+1) || e.Actor.IsZero() || prune != (e.Act == model.ActPrune) {
			t.Fatalf("entry %d = %+v", i+1, e)
		}
	}
	rep, err := store.VerifyAudit(s, key)
	must(t, err)
	if rep.Fault != nil || rep.Entries != 4*n {
		t.Fatalf("VerifyAudit = %+v (fault %v)", rep, rep.Fault)
	}
	cut := entries[2*n].At // the first entry written by schema 4
	if got, err := s.PruneAudit(cut); err != nil || got != 2*n {
		t.Fatalf("PruneAudit = %d, %v; want the %d old entries", got, err, 2*n)
	}
	must(t, s.Close())
	if code, out, errOut := verify(t, dir); code != 0 || !strings.Contains(out, fmt.Sprintf("audit log verified: %d audit entries", 2*n)) {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}
