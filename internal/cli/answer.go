package cli

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/taskdeck/taskdeck/termtext"
)

// AnswerOptions is `taskdeck answer`, validated.
type AnswerOptions struct {
	f   *Factory
	ctx context.Context

	ID       string // an id, or a unique prefix of one
	Key      string
	Response json.RawMessage // valid JSON
	// Deadline, when given, sets the wait's deadline instead of answering
	// (`taskdeck deadline ID DEADLINE`, issue 27).
	Deadline string
}

func newCmdAnswer(f *Factory, runF func(*AnswerOptions) error) *cobra.Command {
	opts := &AnswerOptions{f: f}
	cmd := &cobra.Command{
		Use:   "answer (ID KEY RESPONSE_JSON | --deadline DEADLINE ID)",
		Short: `Answer a task's input request, e.g. '{"action":"accept","content":{...}}', or (--deadline) set by when it must be answered`,
		Example: `  taskdeck answer 06h36fetr0athexq approve-1 '{"action":"accept","content":{"approve":true}}'
  taskdeck answer --deadline 2h 06h36fetr0athexq`,
		Args: func(cmd *cobra.Command, pos []string) error {
			if cmd.Flags().Changed("deadline") {
				if len(pos) != 1 {
					return usageErr("answer --deadline takes the task's ID alone (no KEY or RESPONSE_JSON): it sets by when the request must be answered; answer it without --deadline")
				}
				return nil
			}
			return cobra.ExactArgs(3)(cmd, pos)
		},
		ValidArgsFunction: f.completeIDs,
		RunE: func(cmd *cobra.Command, pos []string) error {
			if cmd.Flags().Changed("deadline") {
				// The same act as `taskdeck deadline ID DEADLINE`.
				return runDeadline(&DeadlineOptions{f: f, ctx: cmd.Context(), ID: pos[0]}, opts.Deadline, nil)
			}
			opts.ctx, opts.ID, opts.Key, opts.Response = cmd.Context(), pos[0], pos[1], json.RawMessage(pos[2])
			if !json.Valid(opts.Response) {
				return usageErr(`RESPONSE_JSON is not valid JSON; e.g. '{"action":"accept","content":{"approve":true}}'`)
			}
			if runF != nil {
				return runF(opts)
			}
			return answerRun(opts)
		},
	}
	cmd.Flags().StringVar(&opts.Deadline, "deadline", "", "instead of answering, set by when the request must be answered, as taskdeck deadline does: a `DEADLINE` that is a duration (2h), a time (RFC 3339 or \"2026-12-02 17:00\" local), or none")
	return cmd
}

func answerRun(opts *AnswerOptions) error {
	dk, err := opts.f.deck(opts.ctx)
	if err != nil {
		return err
	}
	rec, err := dk.Answer(opts.ctx, opts.ID, map[string]json.RawMessage{opts.Key: opts.Response})
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.f.stdout, "answered %s of task %s\n", termtext.Line(opts.Key), rec.ID)
	return nil
}
