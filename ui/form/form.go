// Package form shows one form on screen: the answer to an elicitation
// (input request) or a tool's arguments. It hosts a huh v2 form as a
// sub-model and turns what the operator typed into typed, validated values.
package form

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	tea "charm.land/bubbletea/v2"
	"charm.land/huh/v2"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/termtext"
)

// Action is how the operator ended the form.
type Action string

// The actions of an elicitation answer.
const (
	Accept  Action = "accept"
	Decline Action = "decline"
	Cancel  Action = "cancel"
	// Back is no answer: the operator left the form; nothing is sent.
	Back Action = "back"
)

// Result is the outcome of a form.
type Result struct {
	Action Action
	// Content holds the accepted values: string, float64 (number), int64
	// (integer), bool, []string (multi-select). Optional fields left empty
	// are omitted.
	Content map[string]any
	// Key is a new call's idempotency key (WithKey); "" for none.
	Key string
	raw json.RawMessage // the JSON object typed in the fallback field
}

// JSON returns the accepted content as a JSON object, or nil when there is
// none (declined, cancelled, or a URL request).
func (r Result) JSON() json.RawMessage {
	if r.raw != nil {
		return r.raw
	}
	if r.Content == nil {
		return nil
	}
	b, _ := json.Marshal(r.Content) // only strings, finite numbers, bools and []string
	return b
}

// Form is one form on screen: the answer to one input request, or a tool's arguments.
type Form struct {
	title, desc string
	fields      func() []huh.Field // built anew over the same values when the form is rebuilt
	submit      func() (Result, error)
	answers     bool // an input request's answer, which may be declined or cancelled

	form          *huh.Form
	width, height int
	err           error       // why the last submit was refused
	refused       *fieldError // the part of err that belongs to one field, shown beside it
	result        *Result
}

// ForInput builds the form answering an elicitation (form mode: one field per
// property in server order; URL mode: shows the message and the URL and asks
// accept/decline). title names the task (e.g. "approve · input approve-1").
func ForInput(title string, e *model.Elicitation) (*Form, error) {
	if e == nil {
		return nil, errors.New("no input request")
	}
	msg := termtext.Sanitize(e.Message, true)
	switch e.Mode {
	case "url":
		var ok bool
		fields := func() []huh.Field {
			return []huh.Field{huh.NewConfirm().
				Title("Open this URL, then accept").
				Description(termtext.Line(e.URL)).
				Affirmative("Accept").Negative("Decline").
				Value(&ok)}
		}
		submit := func() (Result, error) {
			if ok {
				return Result{Action: Accept}, nil
			}
			return Result{Action: Decline}, nil
		}
		return newForm(title, msg, true, fields, submit), nil
	case "form", "":
		s := e.Schema
		if s == nil {
			s = &model.FormSchema{}
		}
		if n := len(s.Properties); n > MaxFields {
			return nil, fmt.Errorf("it has %d fields, more than the %d a form shows", n, MaxFields)
		}
		return schemaForm(title, msg, true, s, "nothing to fill in"), nil
	}
	return nil, fmt.Errorf("unknown elicitation mode %q", e.Mode)
}

// ForArguments builds the form for a tool's arguments from its input
// schema, read as deck.Tool.Arguments was (model.ReadSchema). Flat
// schemas get one field per property; anything richer (nested objects,
// arrays of objects, $ref, free-form objects) or unreadable gets one text
// field where the operator types the arguments as a JSON object, with the
// tool's arguments listed above it.
func ForArguments(title string, tool deck.Tool) (*Form, error) {
	sc, err := model.ReadSchema(tool.InputSchema)
	if err != nil || !sc.Flat() {
		return jsonForm(title, argumentHelp(tool.Arguments)), nil
	}
	s, err := sc.Form("inputSchema")
	if err != nil {
		return jsonForm(title, argumentHelp(tool.Arguments)), nil
	}
	if n := len(s.Properties); n > MaxFields {
		return jsonForm(title, fmt.Sprintf("this tool takes %d arguments, more than the %d a form shows", n, MaxFields)), nil
	}
	return schemaForm(title, "", false, s, "this tool takes no arguments"), nil
}

// maxHelp bounds the arguments listed above a JSON field.
const maxHelp = 8

// argumentHelp is one line per argument, "name: summary", the first
// maxHelp of them.
func argumentHelp(args []deck.Argument) string {
	var lines []string
	for i, a := range args {
		if i == maxHelp {
			lines = append(lines, fmt.Sprintf("… and %d more", len(args)-maxHelp))
			break
		}
		lines = append(lines, termtext.Line(a.Name+": "+a.Summary))
	}
	return strings.Join(lines, "\n")
}

// MaxFields bounds the fields a form builds: huh's cost grows with every
// field on every keypress (10,000 took 290 MB and 1.3 s per Tab).
const MaxFields = 200

func newForm(title, desc string, answers bool, fields func() []huh.Field, submit func() (Result, error)) *Form {
	f := &Form{title: termtext.Line(title), desc: desc, fields: fields, submit: submit, answers: answers, width: 80}
	f.build()
	return f
}

func (f *Form) build() {
	km := huh.NewDefaultKeyMap()
	km.Quit.SetEnabled(false)               // ctrl+c is ours: it goes back
	km.Select.Filter.SetEnabled(false)      // filtering would claim esc
	km.MultiSelect.Filter.SetEnabled(false) // likewise
	km.Text.Editor.SetEnabled(false)        // no $EDITOR from inside the dashboard
	fields := f.fields()
	for i, fl := range fields {
		b := &besideError{Field: fl}
		if f.refused != nil && f.refused.field == i {
			b.refused = f.refused.err
		}
		fields[i] = b
	}
	// Each field shows its own error beside it (besideError), not huh's
	// list of them under the last field.
	g := huh.NewGroup(fields...).Title(f.title).Description(f.desc).WithShowErrors(false)
	f.form = huh.NewForm(g).WithKeyMap(km).WithTheme(huh.ThemeFunc(theme))
	f.SetSize(f.width, f.height)
}

// theme is huh's Charm theme with errors marked "✗": its own " *" would
// read as a second required mark.
func theme(isDark bool) *huh.Styles {
	s := huh.ThemeCharm(isDark)
	for _, st := range []*huh.FieldStyles{&s.Focused, &s.Blurred} {
		st.ErrorIndicator = st.ErrorIndicator.SetString(" ✗")
		st.ErrorMessage = st.ErrorMessage.SetString("✗")
	}
	// Without colour (NO_COLOR) only text attributes tell the focused
	// button from the other.
	s.Focused.FocusedButton = s.Focused.FocusedButton.Bold(true).Underline(true)
	return s
}

// schemaForm has one field per property, or a single "submit" note when
// there are none.
func schemaForm(title, desc string, answers bool, s *model.FormSchema, empty string) *Form {
	if len(s.Properties) == 0 {
		fields := func() []huh.Field {
			return []huh.Field{huh.NewNote().Title(empty).Next(true).NextLabel("Submit")}
		}
		submit := func() (Result, error) { return Result{Action: Accept, Content: map[string]any{}}, nil }
		return newForm(title, desc, answers, fields, submit)
	}
	values := make([]*value, len(s.Properties))
	for i, p := range s.Properties {
		values[i] = newValue(p, s.IsRequired(p.Name))
	}
	fields := func() []huh.Field {
		out := make([]huh.Field, len(values))
		for i, v := range values {
			out[i] = v.field()
		}
		return out
	}
	submit := func() (Result, error) {
		content, err := collect(s, values)
		return Result{Action: Accept, Content: content}, err
	}
	return newForm(title, desc, answers, fields, submit)
}

// collect gathers the typed values and checks them against the whole
// schema once more: nothing invalid is accepted, whatever huh let through.
func collect(s *model.FormSchema, values []*value) (map[string]any, error) {
	content := map[string]any{}
	for i, v := range values {
		x, err := v.typed()
		if err == nil && x != nil {
			err = v.p.Check(checkableValue(x))
		}
		if err != nil {
			return nil, &fieldError{field: i, name: v.p.Name, err: err}
		}
		if x != nil {
			content[v.p.Name] = x
		}
	}
	if err := s.Validate(checkable(content)); err != nil {
		return nil, err
	}
	return content, nil
}

// jsonForm is the fallback: one text field holding a JSON object; desc
// says why, when there is more to say.
func jsonForm(title, desc string) *Form {
	var text string
	fields := func() []huh.Field {
		return []huh.Field{huh.NewText().
			Title("Arguments (a JSON object) *").
			Description("alt+enter or ctrl+j for a new line").
			Placeholder(`{"name": "value"}`).
			Validate(func(s string) error { _, err := jsonObject(s); return err }).
			Value(&text)}
	}
	submit := func() (Result, error) {
		obj, err := jsonObject(text)
		if err != nil {
			return Result{}, err
		}
		return Result{Action: Accept, Content: obj, raw: json.RawMessage(strings.TrimSpace(text))}, nil
	}
	return newForm(title, desc, false, fields, submit)
}

func jsonObject(s string) (map[string]any, error) {
	var obj map[string]any
	if err := json.Unmarshal([]byte(s), &obj); err != nil || obj == nil {
		return nil, errors.New(`must be a JSON object, e.g. {"name": "value"}`)
	}
	return obj, nil
}

// WithKey adds an optional idempotency key at the end of a tool's
// arguments form: a call made again under the same key finds the task
// the first one made instead of launching another.
func (f *Form) WithKey() *Form {
	fields, submit := f.fields, f.submit
	var key string
	f.fields = func() []huh.Field {
		return append(fields(), huh.NewInput().
			Title("Idempotency key (optional)").
			Description("the same call again under this key finds this task; nothing new is sent").
			Value(&key))
	}
	f.submit = func() (Result, error) {
		r, err := submit()
		r.Key = strings.TrimSpace(key)
		return r, err
	}
	f.build()
	return f
}

// Init starts the form (focus, cursor).
func (f *Form) Init() tea.Cmd { return f.form.Init() }

// Update handles a message: keys, and the messages the form's own commands return.
func (f *Form) Update(msg tea.Msg) (*Form, tea.Cmd) {
	if f.result != nil {
		return f, nil
	}
	if k, ok := msg.(tea.KeyPressMsg); ok {
		switch k.String() {
		case "ctrl+c", "esc":
			f.result = &Result{Action: Back}
			return f, nil
		}
	}
	m, cmd := f.form.Update(msg)
	f.form = m.(*huh.Form) // huh v2: Update returns huh.Model, not tea.Model
	if f.form.State != huh.StateCompleted {
		return f, tea.Batch(cmd, f.refocus(msg))
	}
	r, err := f.submit()
	if err != nil {
		// huh has finished and cannot be resumed: build it again over the same values.
		f.err, f.refused = err, nil
		errors.As(err, &f.refused)
		f.build()
		return f, f.form.Init()
	}
	f.result = &r
	return f, nil
}

// refocus gives the focus back to a field that huh left blurred. Keys
// typed faster than huh's own focus messages come back (a yes/no field's
// "y" and enter, sent together) move the focus twice: the second move
// leaves the last field, finds it invalid, and stays with no field
// focused, so that what is typed next goes nowhere.
func (f *Form) refocus(msg tea.Msg) tea.Cmd {
	if msg != tea.Msg(huh.NextField()) || len(f.form.Errors()) == 0 {
		return nil
	}
	cmd := f.form.GetFocusedField().Focus()
	f.form.Update(nil) // redraw the group with its field focused
	return cmd
}

// View renders the form.
func (f *Form) View() string {
	var b strings.Builder
	b.WriteString(f.form.View())
	if f.err != nil {
		b.WriteString("\n\n✗ " + termtext.Line(f.err.Error()))
	}
	if f.answers {
		b.WriteString("\n\nesc back, nothing sent · ctrl+x decline or cancel…")
	} else {
		b.WriteString("\n\nesc back, nothing sent")
	}
	return b.String()
}

// footerLines is what View adds under huh's form: an error and the key hint.
const footerLines = 4

// SetSize sets the space the form may use.
func (f *Form) SetSize(width, height int) {
	f.width, f.height = width, height
	f.form.WithWidth(width).WithHeight(height - footerLines) // huh ignores sizes ≤ 0
}

// Answers tells whether the form answers an input request, which the
// operator may also decline or cancel.
func (f *Form) Answers() bool { return f.answers }

// Done reports the outcome once the operator submitted or went back.
func (f *Form) Done() (Result, bool) {
	if f.result == nil {
		return Result{}, false
	}
	return *f.result, true
}

// value holds what the operator entered for one property.
type value struct {
	p        model.Property
	required bool
	text     string   // string, number, integer, enum
	on       bool     // boolean
	picked   []string // array
}

func newValue(p model.Property, required bool) *value {
	v := &value{p: p, required: required}
	if len(p.Default) == 0 {
		return v
	}
	switch p.Type {
	case "boolean":
		_ = json.Unmarshal(p.Default, &v.on)
	case "array":
		_ = json.Unmarshal(p.Default, &v.picked)
	case "number", "integer":
		var n json.Number
		if json.Unmarshal(p.Default, &n) == nil {
			v.text = n.String()
		}
	default:
		if json.Unmarshal(p.Default, &v.text) == nil {
			v.text = termtext.Line(v.text)
		}
	}
	return v
}

func (v *value) field() huh.Field {
	title := termtext.Line(v.p.Label())
	if v.required {
		title += " *"
	}
	desc := termtext.Sanitize(v.p.Description, true)
	switch {
	case v.p.Type == "boolean":
		return huh.NewConfirm().Title(title).Description(desc).Value(&v.on)
	case v.p.Type == "array":
		return huh.NewMultiSelect[string]().Title(title).Description(desc).
			Options(v.options()...).Value(&v.picked).
			Validate(func(picked []string) error {
				if v.required && len(picked) == 0 {
					return errors.New("choose at least one")
				}
				return v.p.Check(anys(picked))
			})
	case len(v.p.Enum) > 0:
		opts := v.options()
		if !v.required {
			opts = append([]huh.Option[string]{huh.NewOption("(none)", "")}, opts...)
		}
		return huh.NewSelect[string]().Title(title).Description(desc).Options(opts...).Value(&v.text)
	}
	return huh.NewInput().Title(title).Description(desc).Value(&v.text).
		Validate(func(s string) error { _, err := v.parse(s); return err })
}

func (v *value) options() []huh.Option[string] {
	opts := make([]huh.Option[string], len(v.p.Enum))
	for i, e := range v.p.Enum {
		label := e
		if i < len(v.p.EnumTitles) && v.p.EnumTitles[i] != "" {
			label = v.p.EnumTitles[i]
		}
		opts[i] = huh.NewOption(termtext.Line(label), e)
	}
	return opts
}

// typed is the property's value, or nil when an optional field is empty.
func (v *value) typed() (any, error) {
	switch v.p.Type {
	case "boolean":
		return v.on, nil
	case "array":
		if len(v.picked) == 0 && !v.required {
			return nil, nil
		}
		return v.picked, nil
	}
	return v.parse(v.text)
}

// parse turns typed text into the property's value and checks it.
func (v *value) parse(s string) (any, error) {
	if s == "" {
		if v.required {
			return nil, errors.New("required")
		}
		return nil, nil
	}
	return v.p.Parse(s)
}

// checkable converts multi-select values to the []any model.Property.Check expects.
func checkable(content map[string]any) map[string]any {
	out := make(map[string]any, len(content))
	for k, x := range content {
		out[k] = checkableValue(x)
	}
	return out
}

func checkableValue(x any) any {
	if ss, ok := x.([]string); ok {
		return anys(ss)
	}
	return x
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// fieldError is a refused submit's reason that belongs to one field (its
// index in the form).
type fieldError struct {
	field int
	name  string
	err   error
}

func (e *fieldError) Error() string { return e.name + ": " + e.err.Error() }

// besideError is a field that shows its error on the line under it: the
// one huh's validation found, else why the last submit refused its value
// (until a key is typed in it).
type besideError struct {
	huh.Field
	refused error
}

// errorStyle is how besideError draws an error ("✗ required").
var errorStyle = theme(true).Focused.ErrorMessage

func (b *besideError) Update(msg tea.Msg) (huh.Model, tea.Cmd) {
	if _, ok := msg.(tea.KeyPressMsg); ok {
		b.refused = nil // only the focused field is given keys
	}
	m, cmd := b.Field.Update(msg)
	b.Field = m.(huh.Field)
	return b, cmd
}

func (b *besideError) View() string {
	err := b.Field.Error()
	if err == nil {
		err = b.refused
	}
	if err == nil {
		return b.Field.View()
	}
	return b.Field.View() + "\n" + errorStyle.Render(termtext.Line(err.Error()))
}
