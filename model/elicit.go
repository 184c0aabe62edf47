package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/mail"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Elicitation is an elicitation/create input request, decoded.
type Elicitation struct {
	Mode    string // "form" (also when the server left it out) or "url"
	Message string
	URL     string
	Schema  *FormSchema // form mode only
}

// FormSchema is an elicitation's requestedSchema: a flat object whose
// properties keep the server's order (a Go map would lose it).
type FormSchema struct {
	Properties []Property
	Required   []string
}

// Property is one field of a form.
type Property struct {
	Name        string
	Type        string // string, number, integer, boolean, array
	Title       string
	Description string
	Format      string // email, uri, date, date-time (strings)
	Enum        []string
	EnumTitles  []string // parallel to Enum when the schema names its options
	Default     json.RawMessage
	Minimum     *float64
	Maximum     *float64
	MinLength   *int
	MaxLength   *int
	MinItems    *int
	MaxItems    *int
}

// Label is the title, or the name when there is none.
func (p Property) Label() string {
	if p.Title != "" {
		return p.Title
	}
	return p.Name
}

// IsRequired reports whether the schema requires the property.
func (s *FormSchema) IsRequired(name string) bool { return slices.Contains(s.Required, name) }

// Elicitation decodes an elicitation/create request.
func (r InputRequest) Elicitation() (*Elicitation, error) {
	if r.Method != "elicitation/create" {
		return nil, fmt.Errorf("input request is %q, not an elicitation", r.Method)
	}
	var p struct {
		Mode            string          `json:"mode"`
		Message         string          `json:"message"`
		URL             string          `json:"url"`
		RequestedSchema json.RawMessage `json:"requestedSchema"`
	}
	if err := json.Unmarshal(r.Params, &p); err != nil {
		return nil, fmt.Errorf("elicitation params: %v", err)
	}
	e := &Elicitation{Mode: p.Mode, Message: p.Message, URL: p.URL}
	switch e.Mode {
	case "", "form":
		e.Mode = "form"
		s, err := ParseFormSchema(p.RequestedSchema)
		if err != nil {
			return nil, err
		}
		e.Schema = s
	case "url":
		if e.URL == "" {
			return nil, errors.New("url elicitation has no url")
		}
	default:
		return nil, fmt.Errorf("unknown elicitation mode %q", e.Mode)
	}
	return e, nil
}

// ParseFormSchema reads a requestedSchema (ReadSchema), keeping property
// order.
func ParseFormSchema(raw json.RawMessage) (*FormSchema, error) {
	s, err := ReadSchema(raw)
	if err != nil {
		return nil, fmt.Errorf("requestedSchema: %v", err)
	}
	return s.Form("requestedSchema")
}

// objectKeys lists a JSON object's keys in document order.
func objectKeys(raw json.RawMessage) ([]string, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if tok == nil {
		return nil, nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("not an object")
	}
	var keys []string
	seen := map[string]bool{} // a schema of many properties must not cost their square
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		if !seen[key] {
			seen[key] = true
			keys = append(keys, key)
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// Validate checks accepted form content against the schema, with
// messages meant for the operator ("age: must be at least 18").
func (s *FormSchema) Validate(content map[string]any) error {
	for _, name := range s.Required {
		if v, ok := content[name]; !ok || v == nil {
			return fmt.Errorf("%s: required", name)
		}
	}
	for name := range content {
		if !slices.ContainsFunc(s.Properties, func(p Property) bool { return p.Name == name }) {
			return fmt.Errorf("%s: not a field of this form", name)
		}
	}
	for _, p := range s.Properties {
		v, ok := content[p.Name]
		if !ok || v == nil {
			continue
		}
		if err := p.Check(v); err != nil {
			return fmt.Errorf("%s: %v", p.Name, err)
		}
	}
	return nil
}

// Parse turns what an operator typed into the property's JSON value and
// checks it, the same way wherever it is typed (the CLI prompt, the
// dashboard's form): yes/no for a boolean, a whole number for an integer,
// a finite number for a number (JSON cannot carry NaN or an infinity),
// comma-separated options for an array, the text as it is for a string.
func (p Property) Parse(text string) (any, error) {
	var v any = text
	switch p.Type {
	case "boolean":
		switch strings.ToLower(strings.TrimSpace(text)) {
		case "y", "yes", "true":
			v = true
		case "n", "no", "false":
			v = false
		default:
			return nil, errors.New("answer yes or no")
		}
	case "integer":
		n, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
		if err != nil {
			return nil, errors.New("must be a whole number")
		}
		v = n
	case "number":
		n, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
		if err != nil || math.IsNaN(n) || math.IsInf(n, 0) {
			return nil, errors.New("must be a number")
		}
		v = n
	case "array":
		items := []any{}
		for _, it := range strings.Split(text, ",") {
			if it = strings.TrimSpace(it); it != "" {
				items = append(items, it)
			}
		}
		v = items
	}
	if err := p.Check(v); err != nil {
		return nil, err
	}
	return v, nil
}

// Check validates one value of the property.
func (p Property) Check(v any) error {
	switch p.Type {
	case "boolean":
		if _, ok := v.(bool); !ok {
			return errors.New("must be true or false")
		}
	case "number", "integer":
		n, ok := toFloat(v)
		if !ok || math.IsNaN(n) || math.IsInf(n, 0) {
			return errors.New("must be a number")
		}
		if p.Type == "integer" && n != float64(int64(n)) {
			return errors.New("must be a whole number")
		}
		if p.Minimum != nil && n < *p.Minimum {
			return fmt.Errorf("must be at least %s", fmtNum(*p.Minimum))
		}
		if p.Maximum != nil && n > *p.Maximum {
			return fmt.Errorf("must be at most %s", fmtNum(*p.Maximum))
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			return errors.New("must be text")
		}
		return p.checkString(str)
	case "array":
		items, ok := v.([]any)
		if !ok {
			return errors.New("must be a list")
		}
		if p.MinItems != nil && len(items) < *p.MinItems {
			return fmt.Errorf("choose at least %d", *p.MinItems)
		}
		if p.MaxItems != nil && len(items) > *p.MaxItems {
			return fmt.Errorf("choose at most %d", *p.MaxItems)
		}
		for _, it := range items {
			str, ok := it.(string)
			if !ok || !slices.Contains(p.Enum, str) {
				return fmt.Errorf("%v is not one of the options", it)
			}
		}
	}
	return nil
}

func (p Property) checkString(s string) error {
	n := len([]rune(s))
	if p.MinLength != nil && n < *p.MinLength {
		return fmt.Errorf("must be at least %d characters", *p.MinLength)
	}
	if p.MaxLength != nil && n > *p.MaxLength {
		return fmt.Errorf("must be at most %d characters", *p.MaxLength)
	}
	if len(p.Enum) > 0 && !slices.Contains(p.Enum, s) {
		return fmt.Errorf("must be one of: %s", strings.Join(p.Enum, ", "))
	}
	switch p.Format {
	case "email":
		if a, err := mail.ParseAddress(s); err != nil || a.Address != s {
			return errors.New("must be an email address")
		}
	case "uri":
		if u, err := url.Parse(s); err != nil || u.Scheme == "" {
			return errors.New("must be a URI with a scheme, e.g. https://…")
		}
	case "date":
		if _, err := time.Parse(time.DateOnly, s); err != nil {
			return errors.New("must be a date, YYYY-MM-DD")
		}
	case "date-time":
		if _, err := time.Parse(time.RFC3339, s); err != nil {
			return errors.New("must be a date and time, e.g. 2026-01-02T15:04:05Z")
		}
	}
	return nil
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	}
	return 0, false
}

func fmtNum(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// ValidateAnswer checks an input response before it is sent: an
// elicitation answer needs a known action and, when accepting a form,
// content that fits the requested schema.
func ValidateAnswer(req InputRequest, raw json.RawMessage) error {
	if req.Method != "elicitation/create" {
		var obj map[string]any
		if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
			return errors.New("the answer must be a JSON object")
		}
		return nil
	}
	e, err := req.Elicitation()
	if err != nil {
		return fmt.Errorf("cannot read the request: %v", err)
	}
	var ans struct {
		Action  string          `json:"action"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &ans); err != nil {
		return errors.New(`the answer must be a JSON object like {"action":"accept","content":{...}}`)
	}
	switch ans.Action {
	case "decline", "cancel":
		return nil
	case "accept":
	default:
		return fmt.Errorf(`action %q: want "accept", "decline" or "cancel"`, ans.Action)
	}
	if e.Mode == "url" {
		return nil
	}
	var content map[string]any
	if len(ans.Content) > 0 {
		if err := json.Unmarshal(ans.Content, &content); err != nil || content == nil {
			return errors.New("content must be a JSON object")
		}
	}
	return e.Schema.Validate(content)
}
