package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/internal/search"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/present"
)

// filter is what ls and the bulk commands select tasks by: statuses and
// groups (--status), and the dashboard's search (--search).
type filter struct {
	status   string
	Search   string
	Statuses []model.Status
	Groups   []string
}

func (fl *filter) flags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&fl.status, "status", "", "only tasks with this status or in this group (open, waiting, finished, problems); several separated by commas")
	cmd.Flags().StringVar(&fl.Search, "search", "", "only tasks the dashboard's search finds: words, and tool:X server:X status:X args:X result:X terms; -term excludes")
	cmd.RegisterFlagCompletionFunc("status", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		var names []string
		for _, s := range model.AllStatuses {
			names = append(names, string(s))
		}
		for _, g := range deck.Groups {
			names = append(names, g.Name)
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	})
}

// parse checks --status.
func (fl *filter) parse() error {
	if fl.status == "" {
		return nil
	}
	st, groups, err := deck.ParseStatuses(fl.status)
	if err != nil {
		return usageErr("--status: %v", err)
	}
	fl.Statuses = st
	for _, g := range groups {
		fl.Groups = append(fl.Groups, g.Name)
	}
	return nil
}

func (fl *filter) set() bool { return fl.status != "" || fl.Search != "" }

// listPage is how many records ls and the bulk commands read from the
// store at a time: what they hold is one page, however many it keeps (a
// year of history took 400 MB and 2.5 s before the first line at 100,000).
const listPage = 1000

// pages calls fn with the records the filter admits, newest first, one
// page at a time, until limit have passed (0: every one); more says that
// pages may follow. It reports how many passed.
func (fl *filter) pages(ctx context.Context, dk deck.Deck, limit int, fn func(found []deck.Entry, more bool) error) (int, error) {
	q := search.Parse(fl.Search)
	n, before := 0, ""
	for {
		page, err := dk.List(ctx, deck.Filter{Statuses: fl.Statuses, Groups: fl.Groups, Limit: listPage, Before: before})
		if err != nil {
			return n, err
		}
		var found []deck.Entry
		for _, e := range page {
			if x := search.Of(e.Task, e.Task.StatusMessage); q.Match(&x) && (limit == 0 || n < limit) {
				found, n = append(found, e), n+1
			}
		}
		last := len(page) < listPage || limit > 0 && n == limit
		if len(found) > 0 {
			if err := fn(found, !last); err != nil {
				return n, err
			}
		}
		if last {
			break
		}
		before = page[len(page)-1].Task.ID
	}
	if n == 0 {
		if err := q.Unmatched(); err != nil {
			return 0, &exitError{code: exitUsage, err: err}
		}
	}
	return n, nil
}

// bulk is how cancel, forget and rerun choose their tasks: ids on the
// command line, ids on stdin ("-": the first word of each line, so that
// `taskdeck ls` can be piped in), or a filter. A filter's choice is
// confirmed on a terminal, or by --yes.
type bulk struct {
	filter
	yes bool
}

func (b *bulk) flags(cmd *cobra.Command) {
	b.filter.flags(cmd)
	cmd.Flags().BoolVarP(&b.yes, "yes", "y", false, "act on what --status/--search select without asking")
}

// check refuses, before anything opens, a choice that names nothing or
// names tasks twice over.
func (b *bulk) check(args []string, verb string) error {
	if err := b.parse(); err != nil {
		return err
	}
	switch {
	case len(args) > 0 && b.set():
		return usageErr("give task ids or --status/--search, not both")
	case len(args) == 0 && !b.set():
		return usageErr("name the tasks to %s: ids, - to read ids from stdin, or --status/--search", verb)
	}
	return nil
}

// ids returns the tasks to act on (check has passed). fits says whether a
// record can take the act: a filter skips those that cannot, and says how
// many.
func (b *bulk) ids(ctx context.Context, f *Factory, dk deck.Deck, args []string, verb string, fits func(*model.Task) bool) ([]string, error) {
	switch {
	case len(args) == 1 && args[0] == "-":
		return readIDs(f.stdin)
	case len(args) > 0:
		return args, nil
	}
	var ids []string
	found, err := b.pages(ctx, dk, 0, func(page []deck.Entry, _ bool) error {
		for _, e := range page {
			if fits(e.Task) {
				ids = append(ids, e.Task.ID)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if skipped := found - len(ids); skipped > 0 {
		fmt.Fprintf(f.stderr, "taskdeck: %s selected cannot be %s; left alone\n", present.Count(skipped, "task"), pastTense(verb))
	}
	if len(ids) == 0 || b.yes {
		return ids, nil
	}
	if !f.canPrompt {
		return nil, usageErr("--status/--search select %s to %s; add --yes to confirm (there is no terminal to ask on)", present.Count(len(ids), "task"), verb)
	}
	fmt.Fprintf(f.stdout, "%s %s (%s)? [y/N] ", verb, present.Count(len(ids), "task"), idList(ids))
	line, _ := bufio.NewReader(f.stdin).ReadString('\n')
	if answer := strings.ToLower(strings.TrimSpace(line)); answer != "y" && answer != "yes" {
		return nil, &exitError{code: exitTaskBad, err: fmt.Errorf("nothing done: not confirmed")}
	}
	return ids, nil
}

// readIDs reads the first word of each line; an ls header is skipped.
func readIDs(r io.Reader) ([]string, error) {
	var ids []string
	sc := bufio.NewScanner(io.LimitReader(r, 64<<20))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] == "ID" {
			continue
		}
		ids = append(ids, fields[0])
	}
	if err := sc.Err(); err != nil {
		return nil, usageErr("reading task ids from stdin: %v", err)
	}
	if len(ids) == 0 {
		return nil, usageErr("no task ids on stdin (one per line, the first word of each)")
	}
	return ids, nil
}

func idList(ids []string) string {
	const shown = 5
	if len(ids) <= shown {
		return strings.Join(ids, ", ")
	}
	return strings.Join(ids[:shown], ", ") + fmt.Sprintf(", and %d more", len(ids)-shown)
}

func pastTense(verb string) string {
	switch verb {
	case "forget":
		return "forgotten"
	case "rerun":
		return "re-run"
	}
	return verb + "led" // cancel
}

// eachID runs act on every id and reports how it went: the first failure
// decides the exit code, and every failure is named.
func eachID(f *Factory, ids []string, act func(i int, id string) error) error {
	if len(ids) == 1 {
		return act(0, ids[0])
	}
	var failed []string
	var first error
	for i, id := range ids {
		if err := act(i, id); err != nil {
			failed = append(failed, id)
			if first == nil {
				first = err
			}
			fmt.Fprintf(f.stderr, "taskdeck: %s: %s\n", id, errorLine(err))
		}
	}
	if first == nil {
		return nil
	}
	return &exitError{code: exitCode(first), err: fmt.Errorf("%s of %d failed (%s); the first: %s", present.Count(len(failed), "task"), len(ids), idList(failed), errorLine(first))}
}
