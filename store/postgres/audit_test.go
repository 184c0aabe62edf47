package postgres_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/cli"
	"github.com/taskdeck/taskdeck/internal/pgtest"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/store/storetest"
)

// verifyCLI runs `taskdeck audit verify` on the database conn.
func verifyCLI(t *testing.T, conn string) (code int, out string) {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "config.json")
	storetest.Must(t, os.WriteFile(conf, []byte("{}\n"), 0o600))
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code = cli.NewFactory(strings.NewReader(""), &stdout, &stderr).Execute(ctx,
		[]string{"--data-dir", filepath.Join(dir, "data"), "--config", conf, "--store", conn, "audit", "verify"})
	return code, stdout.String() + stderr.String()
}

// rechainSQL recomputes the SHA-256 chain of the whole log, as whoever
// can write the database can after changing an entry.
const rechainSQL = `DO $$
DECLARE h bytea := (SELECT audit_cp_hash FROM taskdeck_meta); r record;
BEGIN
	FOR r IN SELECT rev, body FROM taskdeck_audit ORDER BY rev LOOP
		h := sha256(h || int8send(r.rev) || r.body);
		UPDATE taskdeck_audit SET hash = h WHERE rev = r.rev;
	END LOOP;
	UPDATE taskdeck_meta SET audit = h;
END $$`

// TestAuditVerifyAfterAnUpdateBehindTheBack: an UPDATE of a record's
// body, or of an audit entry, on PostgreSQL makes `taskdeck audit verify`
// exit 6 naming the first entry that no longer matches; also when the
// record's entry is made to match it and the whole chain is recomputed,
// by its seal under the fleet's audit key ($TASKDECK_AUDIT_KEY), which
// the database does not hold.
func TestAuditVerifyAfterAnUpdateBehindTheBack(t *testing.T) {
	key := bytes.Repeat([]byte{0x5a}, 32)
	t.Setenv(store.AuditKeyEnv, hex.EncodeToString(key))
	for _, c := range []struct {
		name string
		sql  []string
		want string
	}{
		{"record", []string{`UPDATE taskdeck_tasks SET body = replace(convert_from(body, 'UTF8'), '"name":"alice"', '"name":"mallory"')::bytea`},
			"audit entry 3 (task %s): the record does not match"},
		{"entry", []string{`UPDATE taskdeck_audit SET body = replace(convert_from(body, 'UTF8'), '"name":"alice"', '"name":"mallory"')::bytea WHERE rev = 1`},
			"audit entry 1 (task %s): its hash does not match"},
		{"entry deleted", []string{`DELETE FROM taskdeck_audit WHERE rev = 2`}, "audit entry 2: missing"},
		{"record and entry, chain recomputed", []string{
			`UPDATE taskdeck_tasks SET body = convert_to(replace(convert_from(body, 'UTF8'), '"name":"alice"', '"name":"mallory"'), 'UTF8')`,
			`UPDATE taskdeck_audit a SET body = convert_to(regexp_replace(convert_from(a.body, 'UTF8'), '"record":"[0-9a-f]{64}"', '"record":"' || encode(sha256(t.body), 'hex') || '"'), 'UTF8')
				FROM taskdeck_tasks t WHERE a.rev = t.revision`,
			rechainSQL},
			"audit entry 3 (task %s): its seal does not match"},
		{"entry, chain recomputed", []string{
			`UPDATE taskdeck_audit SET body = convert_to(replace(convert_from(body, 'UTF8'), '"name":"alice"', '"name":"mallory"'), 'UTF8') WHERE rev = 1`,
			rechainSQL},
			"audit entry 1 (task %s): its seal does not match"},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn := pgtest.DB(t)
			s := open(t, conn)
			s.SetAuditKey(key)
			alice := model.Actor{Name: "alice", Role: model.RoleUser}
			rec := storetest.Intent("", storetest.T0)
			rec.Act = &model.Act{Kind: model.ActCall, Actor: alice}
			storetest.Must(t, s.Create(rec))
			for _, st := range []model.Status{model.StatusWorking, model.StatusCompleted} {
				_, err := s.Update(rec.ID, storetest.MoveTo(st, storetest.T0))
				storetest.Must(t, err)
			}
			storetest.Must(t, s.Close())
			if code, out := verifyCLI(t, conn); code != 0 || !strings.Contains(out, "audit log verified: 3 audit entries") {
				t.Fatalf("before: exit %d\n%s", code, out)
			}
			for _, sql := range c.sql {
				exec(t, conn, sql)
			}
			want := strings.Replace(c.want, "%s", rec.ID, 1)
			if code, out := verifyCLI(t, conn); code != 6 || !strings.Contains(out, want) {
				t.Fatalf("after %s: exit %d, want 6 and %q\n%s", c.sql, code, want, out)
			}
		})
	}
}
