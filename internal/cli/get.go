package cli

import (
	"context"

	"github.com/spf13/cobra"
	"github.com/taskdeck/taskdeck/deck"
)

// GetOptions is `taskdeck get`, validated.
type GetOptions struct {
	f   *Factory
	ctx context.Context

	ID   string // an id, a unique prefix of one, or an idempotency key
	JSON bool
}

func newCmdGet(f *Factory, runF func(*GetOptions) error) *cobra.Command {
	opts := &GetOptions{f: f}
	cmd := &cobra.Command{
		Use:               "get ID|KEY",
		Short:             "Show one task, by its id or its idempotency key; an open task is refreshed from its server first",
		SuggestFor:        []string{"show", "status", "info"},
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: f.completeIDs,
		RunE: func(cmd *cobra.Command, pos []string) error {
			opts.ctx, opts.ID = cmd.Context(), pos[0]
			if runF != nil {
				return runF(opts)
			}
			return getRun(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print a JSON object")
	return cmd
}

func getRun(opts *GetOptions) error {
	f := opts.f
	dk, err := f.deck(opts.ctx)
	if err != nil {
		return err
	}
	e, err := getByIDOrKey(opts.ctx, dk, opts.ID)
	if err != nil {
		return err
	}
	if e.Task.Pollable() {
		if e, err = pollOnce(opts.ctx, dk, e); err != nil {
			return err
		}
	}
	if opts.JSON {
		return printEntryJSON(f.stdout, e)
	}
	var pollErr string
	if e.Poll.Errors > 0 {
		pollErr = e.Poll.LastError
	}
	printDetail(f.stdout, e, configured(opts.ctx, dk), pollErr)
	return nil
}

// getByIDOrKey reads the record of an idempotency key, else of an id
// (or a unique prefix or suffix of one): a key is exact, where a short
// id's prefix or suffix could name another record by chance.
func getByIDOrKey(ctx context.Context, dk deck.Deck, arg string) (deck.Entry, error) {
	var list []deck.Entry
	var err error
	if arg != "" { // an empty key would filter nothing
		list, err = dk.List(ctx, deck.Filter{Key: arg})
	}
	if err != nil || len(list) > 0 {
		if err != nil {
			return deck.Entry{}, err
		}
		return list[0], nil
	}
	e, err := dk.Get(ctx, arg)
	if deck.KindOf(err) == deck.KindNotFound {
		return e, deck.Errorf(deck.KindNotFound, "no task has the id or the idempotency key %q; `taskdeck ls` lists them", arg)
	}
	return e, err
}

// pollOnce has the deck poll an open task now and returns it as that
// poll left it.
func pollOnce(ctx context.Context, dk deck.Deck, e deck.Entry) (deck.Entry, error) {
	if err := dk.PollNow(ctx, []string{e.Task.ID}); err != nil {
		return e, err
	}
	return dk.Get(ctx, e.Task.ID)
}
