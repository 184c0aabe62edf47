package postgres_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/cli"
	"github.com/taskdeck/taskdeck/internal/pgtest"
	"github.com/taskdeck/taskdeck/model"
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

// TestAuditVerifyAfterAnUpdateBehindTheBack: an UPDATE of a record's
// body, or of an audit entry, on PostgreSQL makes `taskdeck audit verify`
// exit 6 naming the first entry that no longer matches.
func TestAuditVerifyAfterAnUpdateBehindTheBack(t *testing.T) {
	for _, c := range []struct {
		name, sql, want string
	}{
		{"record", `UPDATE taskdeck_tasks SET body = replace(convert_from(body, 'UTF8'), '"name":"alice"', '"name":"mallory"')::bytea`,
			"audit entry 3 (task %s): the record does not match"},
		{"entry", `UPDATE taskdeck_audit SET body = replace(convert_from(body, 'UTF8'), '"name":"alice"', '"name":"mallory"')::bytea WHERE rev = 1`,
			"audit entry 1 (task %s): its hash does not match"},
		{"entry deleted", `DELETE FROM taskdeck_audit WHERE rev = 2`, "audit entry 2: missing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn := pgtest.DB(t)
			s := open(t, conn)
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
			exec(t, conn, c.sql)
			want := strings.Replace(c.want, "%s", rec.ID, 1)
			if code, out := verifyCLI(t, conn); code != 6 || !strings.Contains(out, want) {
				t.Fatalf("after %s: exit %d, want 6 and %q\n%s", c.sql, code, want, out)
			}
		})
	}
}
