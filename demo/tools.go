package demo

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/mail"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/taskdeck/taskdeck/mcpclient/wire"
)

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to send back"`
}

type sleepIn struct {
	Seconds float64 `json:"seconds" jsonschema:"how long to sleep, in seconds"`
}

type approveIn struct {
	Action string `json:"action" jsonschema:"the action that needs the user's approval"`
}

type failIn struct {
	Mode string `json:"mode" jsonschema:"error: the task fails with a JSON-RPC error; tool: it completes with isError"`
}

type pipelineIn struct {
	Stages int `json:"stages,omitempty" jsonschema:"how many stages to run"`
}

type noIn struct{}

func (s *Server) addTools() {
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "echo", Description: "Returns the text at once (never a task).",
		InputSchema: schema[echoIn](nil)}, s.echo)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "sleep", Description: "Sleeps, reporting progress each second; cancellable.",
		InputSchema: schema[sleepIn](func(p map[string]*jsonschema.Schema) {
			p["seconds"].Minimum, p["seconds"].Maximum = ptr(0.0), ptr(3600.0)
		})}, s.sleep)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "approve", Description: "Asks the user to approve an action, then reports the decision.",
		InputSchema: schema[approveIn](func(p map[string]*jsonschema.Schema) {
			p["action"].MinLength = ptr(1)
		})}, s.approve)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "fail", Description: "Fails on purpose, as a failed task or as a tool error.",
		InputSchema: schema[failIn](func(p map[string]*jsonschema.Schema) {
			p["mode"].Enum = []any{"error", "tool"}
		})}, s.fail)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "pipeline", Description: "A multi-stage job whose poll interval changes between stages; cancellable.",
		InputSchema: schema[pipelineIn](func(p map[string]*jsonschema.Schema) {
			p["stages"].Minimum, p["stages"].Maximum = ptr(1.0), ptr(20.0)
			p["stages"].Default = json.RawMessage("3")
		})}, s.pipeline)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "survey", Description: "Asks two questions at once and echoes the answers.",
		InputSchema: schema[noIn](nil)}, s.survey)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "confirm_first", Description: "Asks for confirmation on tools/call itself (multi-round-trip), then runs as a task.",
		InputSchema: schema[noIn](nil)}, s.confirmFirst)
	s.taskOnly = map[string]func(*mcp.CallToolParamsRaw) bool{
		"sleep": nil, "approve": nil, "fail": nil, "pipeline": nil, "survey": nil,
		"confirm_first": func(p *mcp.CallToolParamsRaw) bool { _, problem := s.confirmation(p); return problem == "" },
	}
}

// schema infers a tool's input schema from its argument struct; patch
// adds the constraints struct tags cannot express.
func schema[T any](patch func(props map[string]*jsonschema.Schema)) *jsonschema.Schema {
	sc, err := jsonschema.For[T](nil)
	must(err)
	if sc.Properties == nil {
		sc.Properties = map[string]*jsonschema.Schema{} // "properties":{} for clients that want it
	}
	if patch != nil {
		patch(sc.Properties)
	}
	return sc
}

func ptr[T any](v T) *T { return &v }

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func toolError(s string) *mcp.CallToolResult {
	r := text(s)
	r.IsError = true
	return r
}

func (s *Server) echo(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
	return text(in.Text), nil, nil
}

func (s *Server) sleep(ctx context.Context, _ *mcp.CallToolRequest, in sleepIn) (*mcp.CallToolResult, any, error) {
	report(ctx, fmt.Sprintf("slept 0 of %g s", in.Seconds), 0)
	for done := 0.0; done < in.Seconds; {
		step := min(1, in.Seconds-done)
		if err := s.wait(ctx, time.Duration(step*float64(time.Second))); err != nil {
			return nil, nil, err
		}
		done += step
		report(ctx, fmt.Sprintf("slept %g of %g s", done, in.Seconds), 0)
	}
	return text(fmt.Sprintf("slept %g s", in.Seconds)), nil, nil
}

// The answer form of approve, as the spec of the tool gives it.
var approveForm = mustResolve(`{"type":"object","properties":{
	"approve":{"type":"boolean","title":"Approve"},
	"reason":{"type":"string","title":"Reason"}},"required":["approve","reason"]}`)

func (s *Server) approve(ctx context.Context, _ *mcp.CallToolRequest, in approveIn) (*mcp.CallToolResult, any, error) {
	msg := fmt.Sprintf("Approve %s?", in.Action)
	for n := 1; ; n++ {
		key := fmt.Sprintf("approve-%d", n)
		ans, err := ask(ctx, map[string]*mcp.ElicitParams{key: form(msg, approveForm)})
		if err != nil {
			return nil, nil, err
		}
		a := ans[key]
		if a.Action != "accept" {
			return toolError("not approved"), nil, nil
		}
		if problem := check(approveForm, a.Content); problem != "" {
			msg = fmt.Sprintf("Approve %s? (The last answer was not valid: %s.)", in.Action, problem)
			continue
		}
		verdict := "rejected"
		if a.Content["approve"] == true {
			verdict = "approved"
		}
		return text(fmt.Sprintf("%s %s: %s", verdict, in.Action, a.Content["reason"])), nil, nil
	}
}

func (s *Server) fail(ctx context.Context, _ *mcp.CallToolRequest, in failIn) (*mcp.CallToolResult, any, error) {
	report(ctx, "about to fail", 0)
	if err := s.wait(ctx, 500*time.Millisecond); err != nil {
		return nil, nil, err
	}
	if in.Mode == "error" {
		// A *jsonrpc.Error is a protocol error: the task ends failed.
		return nil, nil, &jsonrpc.Error{Code: wire.CodeInternal, Message: "simulated failure"}
	}
	return toolError("simulated tool failure"), nil, nil
}

var (
	stageNames = []string{"fetch", "build", "test", "package", "publish"}
	stagePolls = []time.Duration{200 * time.Millisecond, time.Second, 2 * time.Second}
)

func (s *Server) pipeline(ctx context.Context, _ *mcp.CallToolRequest, in pipelineIn) (*mcp.CallToolResult, any, error) {
	for i := range in.Stages {
		name := stageNames[i%len(stageNames)]
		report(ctx, fmt.Sprintf("stage %d/%d: %s", i+1, in.Stages, name), max(s.scale(stagePolls[i%len(stagePolls)]), time.Millisecond))
		if err := s.wait(ctx, 1500*time.Millisecond); err != nil {
			return nil, nil, err
		}
	}
	return text(fmt.Sprintf("pipeline finished: %d stages", in.Stages)), nil, nil
}

var (
	contactForm = mustResolve(`{"type":"object","properties":{
		"email":{"type":"string","format":"email","title":"Email"},
		"plan":{"type":"string","title":"Plan","oneOf":[
			{"const":"free","title":"Free"},{"const":"pro","title":"Pro"},{"const":"team","title":"Team"}]}},
		"required":["email","plan"]}`)
	ratingForm = mustResolve(`{"type":"object","properties":{
		"score":{"type":"number","title":"Score","minimum":1,"maximum":10}},"required":["score"]}`)
)

// survey asks two questions at once; an invalid answer is asked again
// under a new key, a valid one is kept.
func (s *Server) survey(ctx context.Context, _ *mcp.CallToolRequest, _ noIn) (*mcp.CallToolResult, any, error) {
	questions := map[string]struct {
		msg  string
		form *jsonschema.Resolved
	}{
		"contact": {"How can we reach you, and on which plan?", contactForm},
		"rating":  {"How would you rate us (1 to 10)?", ratingForm},
	}
	got, notes := map[string]map[string]any{}, map[string]string{}
	for n := 1; len(got) < len(questions); n++ {
		reqs := map[string]*mcp.ElicitParams{}
		for name, q := range questions {
			if got[name] == nil {
				reqs[fmt.Sprintf("%s-%d", name, n)] = form(q.msg+notes[name], q.form)
			}
		}
		ans, err := ask(ctx, reqs)
		if err != nil {
			return nil, nil, err
		}
		for key, a := range ans {
			name, _, _ := strings.Cut(key, "-")
			q := questions[name]
			if a.Action != "accept" {
				return toolError("survey declined"), nil, nil
			}
			problem := check(q.form, a.Content)
			if problem == "" && name == "contact" {
				problem = checkEmail(a.Content["email"].(string))
			}
			if problem != "" {
				notes[name] = fmt.Sprintf(" (The last answer was not valid: %s.)", problem)
				continue
			}
			got[name] = a.Content
		}
	}
	res := text(fmt.Sprintf("survey: email=%v plan=%v score=%v",
		got["contact"]["email"], got["contact"]["plan"], got["rating"]["score"]))
	res.StructuredContent = map[string]any{
		"email": got["contact"]["email"], "plan": got["contact"]["plan"], "score": got["rating"]["score"]}
	return res, nil, nil
}

func checkEmail(v string) string {
	if a, err := mail.ParseAddress(v); err != nil || a.Address != v {
		return fmt.Sprintf("%q is not an email address", v)
	}
	return ""
}

var confirmForm = mustResolve(`{"type":"object","properties":{
	"confirm":{"type":"boolean","title":"Confirm"}},"required":["confirm"]}`)

// confirmFirst asks on tools/call itself (MRTR): until the call carries a
// valid answer and our requestState, it returns input_required; the
// middleware makes the answered call a task.
func (s *Server) confirmFirst(ctx context.Context, req *mcp.CallToolRequest, _ noIn) (*mcp.CallToolResult, any, error) {
	confirmed, problem := s.confirmation(req.Params)
	if problem != "" {
		msg := "Run confirm_first?"
		if req.Params.RequestState != "" {
			msg = fmt.Sprintf("Run confirm_first? (%s.)", problem)
		}
		return &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{"confirm": form(msg, confirmForm)},
			RequestState:  s.requestState(),
		}, nil, nil
	}
	if !confirmed {
		return toolError("not confirmed"), nil, nil
	}
	report(ctx, "running", 0)
	if err := s.wait(ctx, 500*time.Millisecond); err != nil {
		return nil, nil, err
	}
	return text("confirmed"), nil, nil
}

// confirmation reads the answer of an MRTR retry; problem is "" once the
// call carries our requestState and a usable answer.
func (s *Server) confirmation(p *mcp.CallToolParamsRaw) (confirmed bool, problem string) {
	if p.RequestState == "" {
		return false, "no answer yet"
	}
	if !hmac.Equal([]byte(p.RequestState), []byte(s.requestState())) {
		return false, "the request state was not ours"
	}
	a, ok := p.InputResponses["confirm"].(*mcp.ElicitResult)
	if !ok {
		return false, `the answer to "confirm" was missing`
	}
	if a.Action != "accept" {
		return false, ""
	}
	if problem := check(confirmForm, a.Content); problem != "" {
		return false, "the last answer was not valid: " + problem
	}
	return a.Content["confirm"] == true, ""
}

// requestState is the opaque MRTR state: a MAC under a per-process key,
// so a client cannot forge it.
func (s *Server) requestState() string {
	m := hmac.New(sha256.New, s.stateKey)
	m.Write([]byte("confirm_first"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func form(msg string, sc *jsonschema.Resolved) *mcp.ElicitParams {
	return &mcp.ElicitParams{Mode: "form", Message: msg, RequestedSchema: sc.Schema()}
}

func mustResolve(src string) *jsonschema.Resolved {
	var sc jsonschema.Schema
	must(json.Unmarshal([]byte(src), &sc))
	r, err := sc.Resolve(nil)
	must(err)
	return r
}

// check validates an answer against its form; "" means valid.
func check(sc *jsonschema.Resolved, content map[string]any) string {
	if content == nil {
		content = map[string]any{}
	}
	if err := sc.Validate(content); err != nil {
		return err.Error()
	}
	return ""
}
