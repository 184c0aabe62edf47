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
}

func newCmdAnswer(f *Factory, runF func(*AnswerOptions) error) *cobra.Command {
	opts := &AnswerOptions{f: f}
	return &cobra.Command{
		Use:               "answer ID KEY RESPONSE_JSON",
		Short:             `Answer a task's input request, e.g. '{"action":"accept","content":{...}}'`,
		Args:              cobra.ExactArgs(3),
		ValidArgsFunction: f.completeIDs,
		RunE: func(cmd *cobra.Command, pos []string) error {
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
