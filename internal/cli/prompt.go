package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/termtext"
)

// inputSource answers input requests from --input flags, and on a
// terminal by asking the operator for the rest.
type inputSource struct {
	given map[string]json.RawMessage
	ask   *bufio.Reader // nil when stdin is not a terminal
	out   io.Writer
}

func (f *Factory) inputSource(given map[string]json.RawMessage) *inputSource {
	src := &inputSource{given: given, out: f.stderr}
	if f.canPrompt {
		src.ask = bufio.NewReader(f.stdin)
	}
	return src
}

// beforeStart answers a call whose server asks for input before it
// starts the task, from --input and on a terminal by asking, and sends
// the next round with Continue. Nobody to answer: the call stops (exit 5)
// and its record stays, answerable with `taskdeck answer`.
func (s *inputSource) beforeStart(ctx context.Context, dk deck.Deck, res deck.CallResult) (deck.CallResult, error) {
	rec := res.Task
	answers := map[string]json.RawMessage{}
	for _, key := range rec.PendingInputs() {
		ans, err := s.answer(key, rec.InputRequests[key])
		if err != nil {
			return res, err
		}
		if ans == nil {
			// Say which given keys were not asked for: a typo, most likely.
			var unasked []string
			for _, k := range slices.Sorted(maps.Keys(s.given)) {
				if _, asked := rec.InputRequests[k]; !asked {
					unasked = append(unasked, k)
				}
			}
			return res, needsInput(rec, res.Again, unasked)
		}
		answers[key] = ans
	}
	next, err := dk.Continue(ctx, rec.ID, answers)
	if k := deck.KindOf(err); k == deck.KindUsage || k == deck.KindState {
		// Refused before it was sent: the call still waits.
		return next, &exitError{code: exitUsage, err: fmt.Errorf("%v; task %s still waits for input before it starts: answer with `taskdeck answer %s KEY RESPONSE_JSON`", err, rec.ID, rec.ID)}
	}
	return next, err
}

// forTask answers what it can of a task's pending input requests; an
// empty result means nobody here can answer.
func (s *inputSource) forTask(_ context.Context, t *model.Task) (map[string]json.RawMessage, error) {
	answers := map[string]json.RawMessage{}
	for _, key := range t.PendingInputs() {
		ans, err := s.answer(key, t.InputRequests[key])
		if err != nil {
			return nil, err
		}
		if ans != nil {
			answers[key] = ans
		}
	}
	return answers, nil
}

// answer returns the answer for one key, or nil when there is none.
func (s *inputSource) answer(key string, req model.InputRequest) (json.RawMessage, error) {
	if ans, ok := s.given[key]; ok {
		delete(s.given, key) // each given answer is used once
		return ans, nil
	}
	if s.ask == nil {
		return nil, nil
	}
	return s.prompt(key, req)
}

var errAborted = errors.New("input aborted")

func (s *inputSource) prompt(key string, req model.InputRequest) (json.RawMessage, error) {
	e, err := req.Elicitation()
	if err != nil {
		return nil, fmt.Errorf("input %s: %v; answer it with --input", key, err)
	}
	fmt.Fprintf(s.out, "\nThe server asks (%s): %s\n", termtext.Line(key), termtext.Line(e.Message))
	if e.Mode == "url" {
		fmt.Fprintf(s.out, "  URL: %s\n", termtext.Line(e.URL))
	}
	action, err := s.choose("accept, decline or cancel? [accept] ", []string{"accept", "decline", "cancel"})
	if err != nil {
		return nil, err
	}
	if action != "accept" || e.Mode == "url" {
		return json.Marshal(map[string]any{"action": action})
	}
	content := map[string]any{}
	for _, p := range e.Schema.Properties {
		v, err := s.field(p, e.Schema.IsRequired(p.Name))
		if err != nil {
			return nil, err
		}
		if v != nil {
			content[p.Name] = v
		}
	}
	return json.Marshal(map[string]any{"action": "accept", "content": content})
}

// field asks for one value until it passes the schema's checks.
func (s *inputSource) field(p model.Property, required bool) (any, error) {
	hint := p.Type
	if len(p.Enum) > 0 {
		hint = "one of " + strings.Join(p.Enum, ", ")
	}
	if !required {
		hint += ", optional"
	}
	for {
		fmt.Fprintf(s.out, "  %s (%s)", termtext.Line(p.Label()), termtext.Line(hint))
		if p.Description != "" {
			fmt.Fprintf(s.out, " — %s", termtext.Line(p.Description))
		}
		if len(p.Default) > 0 {
			fmt.Fprintf(s.out, " [%s]", termtext.Line(string(p.Default)))
		}
		fmt.Fprint(s.out, ": ")
		line, err := s.line()
		if err != nil {
			return nil, err
		}
		if line == "" && len(p.Default) > 0 {
			var v any
			if json.Unmarshal(p.Default, &v) == nil {
				return v, nil
			}
		}
		if line == "" && !required {
			return nil, nil
		}
		v, err := p.Parse(line)
		if err == nil {
			return v, nil
		}
		fmt.Fprintf(s.out, "    %v\n", err)
	}
}

func (s *inputSource) choose(question string, options []string) (string, error) {
	for {
		fmt.Fprint(s.out, question)
		line, err := s.line()
		if err != nil {
			return "", err
		}
		if line == "" {
			return options[0], nil
		}
		for _, o := range options {
			if strings.HasPrefix(o, strings.ToLower(line)) {
				return o, nil
			}
		}
	}
}

func (s *inputSource) line() (string, error) {
	line, err := s.ask.ReadString('\n')
	if err != nil && line == "" {
		return "", errAborted
	}
	return strings.TrimSpace(line), nil
}
