package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// Schema is a JSON schema as taskdeck reads every one it is sent (a
// tool's input schema, an elicitation's requestedSchema): decoded once by
// jsonschema-go, with the order of its properties, which jsonschema-go
// drops and a form keeps. The form (Form), the argument help (Arguments)
// and the check of a call's arguments all read this one decoding.
type Schema struct {
	*jsonschema.Schema
	// Order is the top-level properties in document order.
	Order []string
}

// ReadSchema decodes a schema; empty or null is the empty schema.
func ReadSchema(raw json.RawMessage) (*Schema, error) {
	s := &Schema{Schema: &jsonschema.Schema{}}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return s, nil
	}
	if err := json.Unmarshal(raw, s.Schema); err != nil {
		return nil, err
	}
	var top struct {
		Properties json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, err
	}
	order, err := objectKeys(top.Properties)
	if err != nil {
		return nil, fmt.Errorf("properties: %v", err)
	}
	s.Order = order
	return s, nil
}

// Flat reports whether the schema is an object of plain properties that
// a form of one field each says all of: no references, no combinators,
// no properties beyond those it names.
func (s *Schema) Flat() bool {
	sc := s.Schema
	if sc.Ref != "" || len(sc.Defs) > 0 || len(sc.Definitions) > 0 || len(sc.AllOf) > 0 || len(sc.AnyOf) > 0 ||
		len(sc.OneOf) > 0 || len(sc.PatternProperties) > 0 {
		return false
	}
	// Only a schema with no properties is refused for taking others: one
	// with properties gets its form, as a server that allows more expects.
	return len(sc.Properties) > 0 || sc.AdditionalProperties == nil || sc.AdditionalProperties.Not != nil
}

// Form reads the schema as a flat form, its properties in the server's
// order (what is refused names where, for an error about "what").
func (s *Schema) Form(what string) (*FormSchema, error) {
	if s.Type != "" && s.Type != "object" || len(s.Types) > 0 {
		return nil, fmt.Errorf("%s: type %s, want object", what, typeOf(s.Schema))
	}
	f := &FormSchema{Required: s.Required}
	for _, name := range s.Order {
		p, err := formProperty(name, s.Properties[name])
		if err != nil {
			return nil, fmt.Errorf("%s.properties.%s: %v", what, name, err)
		}
		f.Properties = append(f.Properties, p)
	}
	return f, nil
}

// formProperty is one field of a form: a string, number, integer,
// boolean, or an array of listed options.
func formProperty(name string, sc *jsonschema.Schema) (Property, error) {
	if sc == nil {
		return Property{}, fmt.Errorf("not a schema")
	}
	p := Property{
		Name: name, Type: sc.Type, Title: sc.Title, Description: sc.Description, Format: sc.Format,
		Default: sc.Default, Minimum: sc.Minimum, Maximum: sc.Maximum,
		MinLength: sc.MinLength, MaxLength: sc.MaxLength, MinItems: sc.MinItems, MaxItems: sc.MaxItems,
	}
	options, enum := append(slices.Clip(sc.OneOf), sc.AnyOf...), sc.Enum
	if names, ok := sc.Extra["enumNames"].([]any); ok && len(names) == len(enum) {
		for _, n := range names {
			title, ok := n.(string)
			if !ok {
				return Property{}, fmt.Errorf("enumNames: not a list of strings")
			}
			p.EnumTitles = append(p.EnumTitles, title)
		}
	}
	if sc.Items != nil {
		enum, options, p.EnumTitles = sc.Items.Enum, append(slices.Clip(sc.Items.AnyOf), sc.Items.OneOf...), nil
	}
	for _, v := range enum {
		str, ok := v.(string)
		if !ok {
			return Property{}, fmt.Errorf("enum: %v is not a string", v)
		}
		p.Enum = append(p.Enum, str)
	}
	if len(options) > 0 {
		p.Enum, p.EnumTitles = nil, nil
		for _, o := range options {
			var c any = ""
			if o != nil && o.Const != nil {
				c = *o.Const
			}
			str, ok := c.(string)
			if !ok {
				return Property{}, fmt.Errorf("const: %v is not a string", c)
			}
			title := ""
			if o != nil {
				title = o.Title
			}
			p.Enum, p.EnumTitles = append(p.Enum, str), append(p.EnumTitles, title)
		}
	}
	switch p.Type {
	case "string", "number", "integer", "boolean":
	case "array":
		if len(p.Enum) == 0 {
			return Property{}, fmt.Errorf("arrays must list their options")
		}
	default:
		return Property{}, fmt.Errorf("unsupported type %s", typeOf(sc))
	}
	return p, nil
}

// Argument is one argument of a tool, read from its input schema for
// people. Every text in it is the server's: sanitize before showing it.
type Argument struct {
	Name        string // a.b for a property of an object argument
	Type        string // "string", "integer or null", "list of string", "any"
	Required    bool
	Default     string   // JSON, "" when none
	Enum        []string // JSON of each allowed value
	Range       string   // "1 to 20", "at least 0", "length at most 5"
	Format      string
	Header      string // the Mcp-Param-* header the argument also travels in
	Description string
}

// Summary is the argument's constraints in one phrase, e.g. "integer,
// optional, default 3, 1 to 20".
func (a Argument) Summary() string {
	parts := []string{a.Type, "optional"}
	if a.Required {
		parts[1] = "required"
	}
	if a.Default != "" {
		parts = append(parts, "default "+a.Default)
	}
	if len(a.Enum) > 0 {
		parts = append(parts, "one of "+strings.Join(a.Enum, ", "))
	}
	if a.Range != "" {
		parts = append(parts, a.Range)
	}
	if a.Format != "" {
		parts = append(parts, "format "+a.Format)
	}
	if a.Header != "" {
		parts = append(parts, "header Mcp-Param-"+a.Header)
	}
	return strings.Join(parts, ", ")
}

// Arguments lists the schema's arguments: the required ones first, in
// the schema's order, then the others by name; the properties of an
// object argument follow it as a.b.
func (s *Schema) Arguments() []Argument { return appendArguments(nil, "", s.Schema) }

// ArgumentAt describes the argument at a property path, as Arguments
// would.
func (s *Schema) ArgumentAt(path []string) (Argument, bool) {
	if len(path) == 0 {
		return Argument{}, false
	}
	sc := s.Schema
	for _, name := range path[:len(path)-1] {
		if sc = sc.Properties[name]; sc == nil {
			return Argument{}, false
		}
	}
	last := path[len(path)-1]
	p := sc.Properties[last]
	if p == nil {
		return Argument{}, false
	}
	return describe(strings.Join(path, "."), p, slices.Contains(sc.Required, last)), true
}

func appendArguments(out []Argument, prefix string, sc *jsonschema.Schema) []Argument {
	var names []string
	for name := range sc.Properties {
		if !slices.Contains(sc.Required, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var required []string
	for _, name := range sc.Required {
		if _, ok := sc.Properties[name]; ok && !slices.Contains(required, name) {
			required = append(required, name)
		}
	}
	for _, name := range append(required, names...) {
		p := sc.Properties[name]
		if p == nil {
			continue
		}
		out = append(out, describe(prefix+name, p, slices.Contains(sc.Required, name)))
		if len(p.Properties) > 0 {
			out = appendArguments(out, prefix+name+".", p)
		}
	}
	return out
}

func describe(name string, p *jsonschema.Schema, required bool) Argument {
	a := Argument{Name: name, Required: required, Format: p.Format, Description: p.Description}
	a.Type = typeOf(p)
	if len(p.Default) > 0 {
		a.Default = string(p.Default)
	}
	values := p.Enum
	if p.Const != nil {
		values = []any{*p.Const}
	}
	for _, alt := range p.OneOf { // the titled-enum form of elicitation schemas
		if alt != nil && alt.Const != nil {
			values = append(values, *alt.Const)
		}
	}
	for _, v := range values {
		b, _ := json.Marshal(v)
		a.Enum = append(a.Enum, string(b))
	}
	a.Range = between(p.Minimum, p.Maximum, p.ExclusiveMinimum, p.ExclusiveMaximum)
	if p.MinLength != nil || p.MaxLength != nil {
		a.Range = join(a.Range, "length "+between(intPtr(p.MinLength), intPtr(p.MaxLength), nil, nil))
	}
	if p.MinItems != nil || p.MaxItems != nil {
		a.Range = join(a.Range, "items "+between(intPtr(p.MinItems), intPtr(p.MaxItems), nil, nil))
	}
	if h, ok := p.Extra["x-mcp-header"].(string); ok {
		a.Header = h
	}
	return a
}

func typeOf(p *jsonschema.Schema) string {
	types := p.Types
	if p.Type != "" {
		types = []string{p.Type}
	}
	if len(types) == 0 {
		// Alternatives without a type of their own: what they take.
		for _, alt := range append(slices.Clip(p.AnyOf), p.OneOf...) {
			if alt != nil && (alt.Type != "" || len(alt.Types) > 0) && !slices.Contains(types, typeOf(alt)) {
				types = append(types, typeOf(alt))
			}
		}
	}
	if len(types) == 0 {
		return "any"
	}
	t := strings.Join(types, " or ")
	if p.Items != nil && slices.Contains(types, "array") {
		t = strings.Replace(t, "array", "list of "+typeOf(p.Items), 1)
	}
	return t
}

func between(lo, hi, xlo, xhi *float64) string {
	n := func(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
	if lo != nil && hi != nil {
		return n(*lo) + " to " + n(*hi)
	}
	var lower, upper string
	switch {
	case lo != nil:
		lower = "at least " + n(*lo)
	case xlo != nil:
		lower = "more than " + n(*xlo)
	}
	switch {
	case hi != nil:
		upper = "at most " + n(*hi)
	case xhi != nil:
		upper = "less than " + n(*xhi)
	}
	if lower == "" {
		return upper
	}
	return join(lower, upper)
}

func intPtr(i *int) *float64 {
	if i == nil {
		return nil
	}
	f := float64(*i)
	return &f
}

func join(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + ", " + b
}
