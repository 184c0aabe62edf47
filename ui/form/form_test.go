package form

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/taskdeck/taskdeck/deck"
	"reflect"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/ansi"

	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/termtext"
)

var (
	enter     = tea.KeyPressMsg{Code: tea.KeyEnter}
	esc       = tea.KeyPressMsg{Code: tea.KeyEscape}
	ctrlC     = tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl}
	down      = tea.KeyPressMsg{Code: tea.KeyDown}
	space     = tea.KeyPressMsg{Code: tea.KeySpace}
	backspace = tea.KeyPressMsg{Code: tea.KeyBackspace}
)

// keys turns text into key presses.
func keys(s string) []tea.Msg {
	var out []tea.Msg
	for _, r := range s {
		out = append(out, tea.KeyPressMsg{Code: r, Text: string(r)})
	}
	return out
}

// send feeds each message to f as a Bubble Tea program would: it runs the
// commands Update returns and feeds their messages back until none are
// left, before the next message. Commands still running after timerAfter
// are timers (the cursor blink) that a program would deliver much later:
// they are dropped.
func send(t *testing.T, f *Form, msgs ...tea.Msg) {
	t.Helper()
	for _, msg := range msgs {
		queue := []tea.Msg{msg}
		for n := 0; len(queue) > 0; n++ {
			if n > 500 {
				t.Fatal("the form keeps producing messages")
			}
			var cmd tea.Cmd
			f, cmd = f.Update(queue[0])
			queue = append(queue[1:], run(cmd)...)
		}
	}
}

// start runs Init's commands through the same loop.
func start(t *testing.T, f *Form) *Form {
	t.Helper()
	f.SetSize(80, 40) // the dashboard gives a form its height: room for the errors beside fields
	for _, msg := range run(f.Init()) {
		send(t, f, msg)
	}
	return f
}

// timerAfter is how long a command may run before it counts as a timer:
// scaled for a busy machine (50 ms at load 35 dropped a form's own
// message), and below the 530 ms of the cursor's blink, the first timer.
var timerAfter = min(waitfor.Scale(100*time.Millisecond), 400*time.Millisecond)

func run(cmd tea.Cmd) []tea.Msg {
	if cmd == nil {
		return nil
	}
	ch := make(chan tea.Msg, 1)
	go func() { ch <- cmd() }()
	var msg tea.Msg
	select {
	case msg = <-ch:
	case <-time.After(timerAfter):
		return nil
	}
	// tea.BatchMsg and tea's unexported sequenceMsg are both []tea.Cmd.
	if v := reflect.ValueOf(msg); v.Kind() == reflect.Slice && v.Type().Elem() == reflect.TypeFor[tea.Cmd]() {
		var out []tea.Msg
		for i := range v.Len() {
			out = append(out, run(v.Index(i).Interface().(tea.Cmd))...)
		}
		return out
	}
	if msg == nil {
		return nil
	}
	return []tea.Msg{msg}
}

func view(f *Form) string { return ansi.Strip(f.View()) }

func input(t *testing.T, schema string) *Form {
	t.Helper()
	s, err := model.ParseFormSchema(json.RawMessage(schema))
	if err != nil {
		t.Fatal(err)
	}
	f, err := ForInput("approve · input approve-1", &model.Elicitation{Mode: "form", Message: "Please answer", Schema: s})
	if err != nil {
		t.Fatal(err)
	}
	return start(t, f)
}

func arguments(t *testing.T, schema string) *Form {
	t.Helper()
	f, err := ForArguments("sleep · arguments", deck.Tool{InputSchema: json.RawMessage(schema)})
	if err != nil {
		t.Fatal(err)
	}
	return start(t, f)
}

func done(t *testing.T, f *Form, want Action) Result {
	t.Helper()
	r, ok := f.Done()
	if !ok {
		t.Fatalf("form not done; view:\n%s", view(f))
	}
	if r.Action != want {
		t.Fatalf("action %q, want %q", r.Action, want)
	}
	return r
}

func notDone(t *testing.T, f *Form, wantInView string) {
	t.Helper()
	if r, ok := f.Done(); ok {
		t.Fatalf("form done (%+v), want it open", r)
	}
	if v := view(f); !strings.Contains(v, wantInView) {
		t.Fatalf("view lacks %q:\n%s", wantInView, v)
	}
}

func sameJSON(t *testing.T, got json.RawMessage, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("result JSON %s: %v", got, err)
	}
	_ = json.Unmarshal([]byte(want), &w)
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("JSON %s, want %s", got, want)
	}
}

const approveSchema = `{"type":"object","properties":{"approve":{"type":"boolean","title":"Approve"},"reason":{"type":"string","title":"Reason"}},"required":["approve","reason"]}`

func TestApprove(t *testing.T) {
	f := input(t, approveSchema)
	v := view(f)
	for _, want := range []string{"approve · input approve-1", "Please answer", "Approve *", "Reason *", "esc back, nothing sent", "ctrl+x decline or cancel"} {
		if !strings.Contains(v, want) {
			t.Errorf("view lacks %q:\n%s", want, v)
		}
	}
	send(t, f, keys("y")...) // yes, and on to the next field
	send(t, f, enter)        // an empty required reason is refused
	notDone(t, f, "required")
	send(t, f, keys("ok")...)
	send(t, f, enter)
	r := done(t, f, Accept)
	if want := map[string]any{"approve": true, "reason": "ok"}; !reflect.DeepEqual(r.Content, want) {
		t.Fatalf("content %#v, want %#v", r.Content, want)
	}
	sameJSON(t, r.JSON(), `{"approve":true,"reason":"ok"}`)
}

const surveySchema = `{"type":"object","properties":{
	"name":{"type":"string","title":"Name","description":"What we call you"},
	"email":{"type":"string","title":"Email","format":"email"},
	"size":{"type":"string","title":"Size","oneOf":[{"const":"s","title":"Small"},{"const":"l","title":"Large"}]},
	"score":{"type":"number","title":"Score","minimum":0,"maximum":10},
	"count":{"type":"integer","title":"Count","default":2}},
	"required":["email","size","score"]}`

func TestSurvey(t *testing.T) {
	f := input(t, surveySchema)
	v := view(f)
	last := -1
	for _, title := range []string{"Name", "What we call you", "Email *", "Size *", "Small", "Large", "Score *", "Count"} {
		i := strings.Index(v, title)
		if i <= last {
			t.Fatalf("%q missing or out of server order:\n%s", title, v)
		}
		last = i
	}

	send(t, f, enter) // the optional name stays empty
	send(t, f, keys("nope")...)
	send(t, f, enter)
	notDone(t, f, "must be an email address")
	send(t, f, backspace, backspace, backspace, backspace)
	send(t, f, keys("al@example.com")...)
	send(t, f, enter)

	send(t, f, down, enter) // Large

	send(t, f, keys("11")...)
	send(t, f, enter)
	notDone(t, f, "must be at most 10")
	send(t, f, backspace, backspace)
	send(t, f, keys("abc")...)
	send(t, f, enter)
	notDone(t, f, "must be a number")
	send(t, f, backspace, backspace, backspace)
	send(t, f, keys("7.5")...)
	send(t, f, enter)

	if !strings.Contains(view(f), "2") { // the default count is prefilled
		t.Fatalf("default count missing:\n%s", view(f))
	}
	send(t, f, backspace)
	send(t, f, keys("1.5")...)
	send(t, f, enter)
	notDone(t, f, "must be a whole number")
	send(t, f, backspace, backspace, backspace)
	send(t, f, keys("3")...)
	send(t, f, enter)

	r := done(t, f, Accept)
	want := map[string]any{"email": "al@example.com", "size": "l", "score": 7.5, "count": int64(3)}
	if !reflect.DeepEqual(r.Content, want) {
		t.Fatalf("content %#v, want %#v", r.Content, want)
	}
}

func TestMultiSelect(t *testing.T) {
	f := input(t, `{"type":"object","properties":{"tags":{"type":"array","title":"Tags","items":{"anyOf":[{"const":"a","title":"Alpha"},{"const":"b","title":"Beta"}]}}},"required":["tags"]}`)
	send(t, f, enter)
	notDone(t, f, "choose at least one")
	send(t, f, down, space, enter)
	r := done(t, f, Accept)
	if want := map[string]any{"tags": []string{"b"}}; !reflect.DeepEqual(r.Content, want) {
		t.Fatalf("content %#v, want %#v", r.Content, want)
	}
}

func TestOptionalFieldsOmitted(t *testing.T) {
	f := input(t, `{"type":"object","properties":{"note":{"type":"string"},"pick":{"type":"string","enum":["x","y"]},"tags":{"type":"array","items":{"enum":["a"]}}}}`)
	send(t, f, enter, enter, enter) // empty note, "(none)", nothing picked
	r := done(t, f, Accept)
	if len(r.Content) != 0 {
		t.Fatalf("content %#v, want empty", r.Content)
	}
	sameJSON(t, r.JSON(), `{}`)
}

// esc and ctrl+c leave the form and answer nothing (item 7): declining
// and cancelling are the dashboard's explicit, confirmed choices.
func TestEscAndCtrlCGoBack(t *testing.T) {
	for _, k := range []tea.Msg{esc, ctrlC} {
		f := input(t, approveSchema)
		send(t, f, k)
		if r := done(t, f, Back); r.JSON() != nil {
			t.Fatalf("leaving the form has content %s", r.JSON())
		}
		send(t, f, enter) // a finished form ignores further keys
		done(t, f, Back)
	}
	f := arguments(t, `{"type":"object","properties":{"seconds":{"type":"number"}}}`)
	send(t, f, esc)
	done(t, f, Back)
}

// The focused Yes/No button must differ from the other without colour
// (item 11, NO_COLOR): the renderer keeps only text attributes there.
func TestFocusedButtonVisibleWithoutColour(t *testing.T) {
	f := input(t, `{"type":"object","properties":{"ok":{"type":"boolean","title":"OK"}}}`)
	ascii := func() string {
		var b strings.Builder
		w := &colorprofile.Writer{Forward: &b, Profile: colorprofile.Ascii}
		w.WriteString(f.View())
		return lineOf(b.String(), "Yes")
	}
	before := ascii()
	send(t, f, tea.KeyPressMsg{Code: tea.KeyLeft})
	if after := ascii(); after == before {
		t.Fatalf("moving between Yes and No changes nothing without colour: %q", after)
	}
}

func lineOf(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// A schema with more properties than a form shows is not built (item 18):
// an input request is refused with the limit, a tool's arguments are typed
// as one JSON object.
func TestTooManyFields(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	for i := range 10_000 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"f%05d":{"type":"string"}`, i)
	}
	b.WriteString("}}")
	s, err := model.ParseFormSchema(json.RawMessage(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ForInput("big · input x", &model.Elicitation{Mode: "form", Message: "many", Schema: s}); err == nil || !strings.Contains(err.Error(), "10000 fields") {
		t.Fatalf("ForInput of 10,000 fields: %v", err)
	}
	f := arguments(t, b.String())
	if v := view(f); !strings.Contains(v, "Arguments (a JSON object)") || !strings.Contains(v, "10000 arguments") {
		t.Fatalf("arguments of 10,000 fields:\n%s", v)
	}
}

func TestURLMode(t *testing.T) {
	for key, want := range map[string]Action{"y": Accept, "n": Decline} {
		f, err := ForInput("login · input auth-1", &model.Elicitation{Mode: "url", Message: "Sign in to continue", URL: "https://example.com/auth_cb?x=1"})
		if err != nil {
			t.Fatal(err)
		}
		start(t, f)
		for _, s := range []string{"Sign in to continue", "https://example.com/auth_cb?x=1", "Accept", "Decline"} {
			if !strings.Contains(view(f), s) {
				t.Fatalf("view lacks %q:\n%s", s, view(f))
			}
		}
		send(t, f, keys(key)...)
		if r := done(t, f, want); r.Content != nil || r.JSON() != nil {
			t.Fatalf("URL answer has content %#v", r.Content)
		}
	}
}

func TestArguments(t *testing.T) {
	f := arguments(t, `{"type":"object","properties":{"seconds":{"type":"number","description":"How long"}},"required":["seconds"]}`)
	if v := view(f); !strings.Contains(v, "seconds *") || !strings.Contains(v, "How long") {
		t.Fatalf("view:\n%s", v)
	}
	send(t, f, keys("5")...)
	send(t, f, enter)
	sameJSON(t, done(t, f, Accept).JSON(), `{"seconds":5}`)
}

func TestArgumentsNone(t *testing.T) {
	for _, schema := range []string{`{"type":"object"}`, `{"type":"object","properties":{},"additionalProperties":false}`, ``} {
		f := arguments(t, schema)
		notDone(t, f, "this tool takes no arguments")
		send(t, f, enter)
		sameJSON(t, done(t, f, Accept).JSON(), `{}`)
	}
}

func TestArgumentsJSONFallback(t *testing.T) {
	f := arguments(t, `{"type":"object","properties":{"opts":{"type":"object","properties":{"b":{"type":"number"}}}}}`)
	notDone(t, f, "Arguments (a JSON object)")
	send(t, f, enter)
	notDone(t, f, "must be a JSON object")
	send(t, f, keys("[1]")...)
	send(t, f, enter)
	notDone(t, f, "must be a JSON object")
	send(t, f, backspace, backspace, backspace)
	send(t, f, keys(`{"a":{"b":1}}`)...)
	send(t, f, enter)
	r := done(t, f, Accept)
	if string(r.JSON()) != `{"a":{"b":1}}` {
		t.Fatalf("JSON %s", r.JSON())
	}
	if want := map[string]any{"a": map[string]any{"b": 1.0}}; !reflect.DeepEqual(r.Content, want) {
		t.Fatalf("content %#v", r.Content)
	}
}

// The JSON field of a schema too rich for a form lists the tool's
// arguments as the deck described them (deck.Tool.Arguments), sanitized,
// at most maxHelp of them.
func TestArgumentsJSONFallbackListsTheArguments(t *testing.T) {
	args := []deck.Argument{{Name: "opts", Summary: "object, required"}, {Name: "opts.b", Summary: "number, optional, at least 0"}}
	for i := range maxHelp {
		args = append(args, deck.Argument{Name: fmt.Sprintf("x%d", i), Summary: "string, optional\x1b]0;evil\x07"})
	}
	f, err := ForArguments("deploy", deck.Tool{Name: "deploy", InputSchema: json.RawMessage(`{"type":"object","properties":{"opts":{"type":"object"}}}`), Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	f = start(t, f)
	for _, want := range []string{"opts: object, required", "opts.b: number, optional, at least 0", "x5: string, optional", "… and 2 more"} {
		notDone(t, f, want)
	}
	if v := f.View(); strings.Contains(ansi.Strip(v), "x6:") || strings.Contains(v, "\x1b]0;evil") {
		t.Fatalf("more than %d arguments listed, or the server's escape kept:\n%s", maxHelp, v)
	}
}

func TestArgumentsFallbackSchemas(t *testing.T) {
	for _, schema := range []string{
		`{"type":"object","properties":{"items":{"type":"array","items":{"type":"object"}}}}`,
		`{"type":"object","properties":{"x":{"$ref":"#/$defs/x"}},"$defs":{"x":{"type":"string"}}}`,
		`{"type":"object","additionalProperties":{"type":"string"}}`,
		`{"type":"object","properties":{"n":{"type":["number","null"]}}}`,
	} {
		f := arguments(t, schema)
		notDone(t, f, "Arguments (a JSON object)")
		send(t, f, keys("{}")...)
		send(t, f, enter)
		sameJSON(t, done(t, f, Accept).JSON(), `{}`)
	}
}

func TestHostileText(t *testing.T) {
	const evil = "\x1b]0;evil\x07\x1b[31mRED"
	s, err := model.ParseFormSchema(json.RawMessage(`{"type":"object","properties":{
		"a":{"type":"string","title":"` + jsonEsc(evil) + `","description":"` + jsonEsc(evil) + `","default":"` + jsonEsc(evil) + `"},
		"b":{"type":"string","oneOf":[{"const":"x","title":"` + jsonEsc(evil) + `"}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	forms := []*Form{}
	f, _ := ForInput(evil, &model.Elicitation{Mode: "form", Message: evil, Schema: s})
	forms = append(forms, f)
	f, _ = ForInput(evil, &model.Elicitation{Mode: "url", Message: evil, URL: "https://x/" + evil})
	forms = append(forms, f)
	for _, f := range forms {
		start(t, f)
		raw := f.View()
		for _, bad := range []string{"\x1b]", "\x07", "\x1b[31mRED", "evil"} {
			if strings.Contains(raw, bad) {
				t.Fatalf("view contains %q:\n%q", bad, raw)
			}
		}
		if !strings.Contains(ansi.Strip(raw), "RED") {
			t.Fatalf("the harmless text is gone:\n%s", ansi.Strip(raw))
		}
	}
}

func jsonEsc(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

func TestWidth80(t *testing.T) {
	f := input(t, `{"type":"object","properties":{"why":{"type":"string","title":"Why","description":"`+strings.Repeat("a long explanation ", 20)+`"}}}`)
	for _, line := range strings.Split(view(f), "\n") {
		if w := ansi.StringWidth(line); w > 80 {
			t.Fatalf("line %d columns wide: %q", w, line)
		}
	}
}

// The last gate: values huh let through are still checked against the schema.
func TestCollectChecksSchema(t *testing.T) {
	s, _ := model.ParseFormSchema(json.RawMessage(`{"type":"object","properties":{"tags":{"type":"array","items":{"enum":["a"]}}}}`))
	v := newValue(s.Properties[0], false)
	v.picked = []string{"zzz"}
	if _, err := collect(s, []*value{v}); err == nil || !strings.Contains(err.Error(), "not one of the options") {
		t.Fatalf("collect accepted %v: err %v", v.picked, err)
	}
}

// A refused submit keeps the form open with the reason shown.
func TestRefusedSubmitKeepsFormOpen(t *testing.T) {
	f := input(t, approveSchema)
	accept := f.submit
	f.submit = func() (Result, error) { return Result{}, errors.New("reason: the server would refuse this") }
	send(t, f, keys("y")...)
	send(t, f, keys("ok")...)
	send(t, f, enter)
	notDone(t, f, "the server would refuse this")
	notDone(t, f, "Reason *")
	f.submit = accept
	send(t, f, keys("y")...)
	send(t, f, enter) // the reason kept its text
	if r := done(t, f, Accept); r.Content["reason"] != "ok" {
		t.Fatalf("content %#v", r.Content)
	}
}

// Keys typed faster than the form's own focus messages come back (y and
// enter sent together) still land in the field that has the focus: the
// reason typed next is not lost.
func TestKeysTypedTogether(t *testing.T) {
	f := input(t, approveSchema)
	var pending []tea.Msg
	for _, k := range append(keys("y"), enter) {
		var cmd tea.Cmd
		f, cmd = f.Update(k) // the commands' messages come back later, as in a busy program
		pending = append(pending, run(cmd)...)
	}
	send(t, f, pending...)
	send(t, f, append(keys("ok"), enter)...)
	r := done(t, f, Accept)
	if want := map[string]any{"approve": true, "reason": "ok"}; !reflect.DeepEqual(r.Content, want) {
		t.Fatalf("content %v, want %v; view:\n%s", r.Content, want, view(f))
	}
}

// besideField fails unless the view shows "✗ msg" under field's title
// and before next's: beside the field it is about, not under the form.
func besideField(t *testing.T, f *Form, field, msg, next string) {
	t.Helper()
	v := view(f)
	at, errAt, nextAt := -1, -1, -1
	for i, l := range strings.Split(v, "\n") {
		switch {
		case at < 0 && strings.Contains(l, field):
			at = i
		case errAt < 0 && strings.Contains(l, "✗ "+msg):
			errAt = i
		case nextAt < 0 && strings.Contains(l, next):
			nextAt = i
		}
	}
	if at < 0 || errAt < at || nextAt < errAt {
		t.Fatalf("want %q between %q and %q:\n%s", "✗ "+msg, field, next, v)
	}
}

// A field's validation error, and a refused submit's reason that names a
// field, show under that field, not under the last one.
func TestErrorBesideItsField(t *testing.T) {
	f := input(t, `{"type":"object","properties":{"size":{"type":"integer","title":"Size"},"reason":{"type":"string","title":"Reason"}},"required":["size"]}`)
	send(t, f, keys("abc")...)
	send(t, f, enter)
	if msg := f.form.Errors(); len(msg) != 1 {
		t.Fatalf("errors %v, want the size's", msg)
	} else {
		besideField(t, f, "Size *", termtext.Line(msg[0].Error()), "Reason")
	}

	f = input(t, approveSchema)
	f.submit = func() (Result, error) {
		return Result{}, &fieldError{field: 0, name: "approve", err: errors.New("the server wants a yes")}
	}
	send(t, f, keys("n")...)
	send(t, f, keys("ok")...)
	send(t, f, enter)
	besideField(t, f, "Approve *", "the server wants a yes", "Reason *")
	notDone(t, f, "✗ approve: the server wants a yes") // and under the form, with its field's name
}
