package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskdeck/taskdeck/deck"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/present"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/termtext"
)

// AuditOptions is `taskdeck audit` and its subcommands, validated.
type AuditOptions struct {
	f   *Factory
	ctx context.Context

	Since  time.Time // zero: the whole kept log
	Task   string    // an id or unique prefix; empty: every task
	JSON   bool
	Before time.Time // audit prune
}

func newCmdAudit(f *Factory, runF func(string, *AuditOptions) error) *cobra.Command {
	opts := &AuditOptions{f: f}
	run := func(which string) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, _ []string) error {
			opts.ctx = cmd.Context()
			if runF != nil {
				return runF(which, opts)
			}
			switch which {
			case "verify":
				return auditVerifyRun(opts)
			case "prune":
				return auditPruneRun(opts)
			}
			return auditRun(opts)
		}
	}
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Show the audit log: every change to a task, who made it, in order",
		Long: `Show the audit log: every change to a task record (a call, an answer, a
cancel, a forget, a prune, a re-run, an orphaning, the engine's own moves),
with its actor, in the order of the store's revisions. Each entry is chained
to the one before by a SHA-256 hash; 'taskdeck audit verify' checks the chain
and the records against it.`,
		Args: cobra.NoArgs,
		RunE: run("list"),
	}
	cmd.Flags().Var((*timeFlag)(&opts.Since), "since", "only entries made since this time (RFC 3339, a date, or an age such as 3d or 12h)")
	cmd.Flags().StringVar(&opts.Task, "task", "", "only the entries of this task (id or unique prefix)")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print one JSON object per entry")
	verify := &cobra.Command{
		Use:   "verify",
		Short: "Recompute the audit chain and check every record against it",
		Long: `Recompute the audit chain from its checkpoint and check every record against
the entry of its last change. A mismatch names the first entry or record that
does not match and exits 6: the store was changed behind taskdeck's back.`,
		Args: cobra.NoArgs,
		RunE: run("verify"),
	}
	verify.Flags().BoolVar(&opts.JSON, "json", false, "print the report as a JSON object")
	prune := &cobra.Command{
		Use:   "prune --before TIME",
		Short: "Delete the audit entries made before a time, leaving a checkpoint",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Before.IsZero() {
				return usageErr("audit prune needs --before (RFC 3339, a date, or an age such as 90d)")
			}
			return run("prune")(cmd, args)
		},
	}
	prune.Flags().Var((*timeFlag)(&opts.Before), "before", "delete the entries made before this time (RFC 3339, a date, or an age such as 90d)")
	cmd.AddCommand(verify, prune)
	return cmd
}

func auditRun(opts *AuditOptions) error {
	dk, err := opts.f.deck(opts.ctx)
	if err != nil {
		return err
	}
	f := model.AuditFilter{Since: opts.Since, Task: opts.Task}
	if f.Task != "" {
		// A prefix names a live record; a forgotten one's entries are
		// found by its whole id.
		e, err := dk.Get(opts.ctx, f.Task)
		switch {
		case err == nil:
			f.Task = e.Task.ID
		case deck.KindOf(err) != deck.KindNotFound:
			return err
		}
	}
	w := opts.f.stdout
	f.Limit = auditPage
	for first := true; ; first = false {
		log, err := dk.Audit(opts.ctx, f)
		if err != nil {
			return err
		}
		if first && !opts.JSON && log.Checkpoint.Rev > 0 && f.Since.IsZero() && f.Task == "" {
			fmt.Fprintf(w, "(entries up to revision %d were pruned)\n", log.Checkpoint.Rev)
		}
		for _, e := range log.Entries {
			if err := printAuditEntry(w, e, opts.JSON); err != nil {
				return err
			}
		}
		if len(log.Entries) < f.Limit {
			return nil
		}
		f.After = log.Entries[len(log.Entries)-1].Rev
	}
}

// auditPage is how many entries audit reads at a time: it holds one page
// of the log, however long the log is (the whole log took 178 MB at
// 100,000 entries).
const auditPage = 1000

func printAuditEntry(w io.Writer, e model.AuditEntry, asJSON bool) error {
	if !asJSON {
		_, err := fmt.Fprintln(w, auditLine(e))
		return err
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	_, err = w.Write(append(inertJSON(b), '\n'))
	return err
}

// auditLine is one entry on one line: revision, time, task, act, actor,
// and the move it made.
func auditLine(e model.AuditEntry) string {
	act := termtext.Line(e.Act)
	if len(e.Keys) > 0 {
		act += " " + termtext.OneLine(termtext.Line(strings.Join(e.Keys, ",")), 60)
	}
	move := ""
	switch {
	case e.To == "":
		move = "deleted"
	case e.From == "":
		move = "→ " + string(e.To)
	case e.From != e.To:
		move = string(e.From) + " → " + string(e.To)
	}
	return strings.TrimRight(fmt.Sprintf("%6d  %s  %s  %-10s %-24s %s", e.Rev, e.At.Local().Format(time.DateTime),
		termtext.Line(e.Task), act, present.Actor(e.Actor), move), " ")
}

func auditVerifyRun(opts *AuditOptions) error {
	a, err := opts.f.deck(opts.ctx)
	if err != nil {
		return err
	}
	rep, err := a.VerifyAudit(opts.ctx)
	if err != nil {
		return err
	}
	if opts.JSON {
		b, err := json.Marshal(rep)
		if err != nil {
			return err
		}
		if _, err := opts.f.stdout.Write(append(inertJSON(b), '\n')); err != nil {
			return err
		}
	}
	if rep.Fault != nil {
		return &exitError{code: exitLocal, err: errors.New("audit verify: " + termtext.Line(rep.Fault.Error()))}
	}
	if !opts.JSON {
		from := "its start"
		if rep.Checkpoint.Rev > 0 {
			from = fmt.Sprintf("the checkpoint at revision %d", rep.Checkpoint.Rev)
		}
		records := fmt.Sprintf("%d records match their last entries", rep.Records)
		if rep.Records == 1 {
			records = "1 record matches its last entry"
		}
		seals := "each sealed with the audit key"
		if !rep.Keyed {
			seals = "unkeyed: only the SHA-256 chain, which whoever can write the store can recompute (set $" + store.AuditKeyEnv + " on every host)"
		}
		fmt.Fprintf(opts.f.stdout, "audit log verified: %s from %s to revision %d; %s; %s\n", entries(rep.Entries), from, rep.Last, records, seals)
	}
	return nil
}

func auditPruneRun(opts *AuditOptions) error {
	a, err := opts.f.deck(opts.ctx)
	if err != nil {
		return err
	}
	n, err := a.PruneAudit(opts.ctx, opts.Before)
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.f.stdout, "pruned %s made before %s\n", entries(n), opts.Before.Local().Format(time.DateTime))
	return nil
}

// entries counts audit entries in words.
func entries(n int) string {
	if n == 1 {
		return "1 audit entry"
	}
	return fmt.Sprintf("%d audit entries", n)
}

// timeFlag is a point in time: RFC 3339, a date (local midnight), or an
// age before now ("3d", "12h").
type timeFlag time.Time

func (t *timeFlag) String() string {
	if time.Time(*t).IsZero() {
		return ""
	}
	return time.Time(*t).Format(time.RFC3339)
}

func (t *timeFlag) Type() string { return "time" }

func (t *timeFlag) Set(s string) error {
	if v, err := time.Parse(time.RFC3339Nano, s); err == nil {
		*t = timeFlag(v)
		return nil
	}
	if v, err := time.ParseInLocation(time.DateOnly, s, time.Local); err == nil {
		*t = timeFlag(v)
		return nil
	}
	if d, err := mcpconfig.ParseAge(s); err == nil {
		*t = timeFlag(time.Now().Add(-d))
		return nil
	}
	return fmt.Errorf("%q is not a time; write it like 2026-12-01T09:00:00Z, 2026-12-01, or an age such as 3d or 12h", s)
}
