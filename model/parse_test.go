package model

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestPropertyParse: typed text becomes the JSON value a server expects,
// or an operator's message; nothing that JSON cannot carry gets through.
func TestPropertyParse(t *testing.T) {
	schema, err := ParseFormSchema(json.RawMessage(`{"type":"object","properties":{
		"n":{"type":"number","minimum":1,"maximum":10},
		"i":{"type":"integer"},
		"b":{"type":"boolean"},
		"a":{"type":"array","items":{"enum":["x","y"]}},
		"s":{"type":"string","format":"email"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	prop := map[string]Property{}
	for _, p := range schema.Properties {
		prop[p.Name] = p
	}
	for _, c := range []struct {
		field, text string
		want        string // the value as JSON, or "error: MESSAGE"
	}{
		{"n", " 2.5 ", `2.5`},
		{"n", "NaN", "error: must be a number"},
		{"n", "nan", "error: must be a number"},
		{"n", "Inf", "error: must be a number"},
		{"n", "-infinity", "error: must be a number"},
		{"n", "1e400", "error: must be a number"},
		{"n", "11", "error: must be at most 10"},
		{"i", "42", `42`},
		{"i", "4.2", "error: must be a whole number"},
		{"b", "Yes", `true`},
		{"b", "n", `false`},
		{"b", "maybe", "error: answer yes or no"},
		{"a", "x, y,", `["x","y"]`},
		{"a", "z", "error: z is not one of the options"},
		{"s", "a@example.com", `"a@example.com"`},
		{"s", "nope", "error: must be an email address"},
	} {
		v, err := prop[c.field].Parse(c.text)
		got := ""
		if err != nil {
			got = "error: " + err.Error()
		} else {
			b, merr := json.Marshal(v)
			if merr != nil {
				t.Fatalf("%s %q: the parsed value does not marshal: %v", c.field, c.text, merr)
			}
			got = string(b)
		}
		if got != c.want {
			t.Errorf("%s: Parse(%q) = %s, want %s", c.field, c.text, got, c.want)
		}
	}
}

// TestCheckRefusesNaN: a number that JSON cannot carry is refused however
// it arrives.
func TestCheckRefusesNaN(t *testing.T) {
	if err := (Property{Type: "number"}).Check(math.NaN()); err == nil {
		t.Fatal("Check(NaN) passed")
	}
}

// A requestedSchema read by jsonschema-go keeps the server's order of
// fields and every way it names its options: enumNames, oneOf titles,
// an array's items.anyOf.
func TestFormSchemaKeepsOrderAndOptionTitles(t *testing.T) {
	s, err := ParseFormSchema([]byte(`{"type":"object","properties":{
		"zeta":{"type":"string","enum":["a","b"],"enumNames":["Alpha","Beta"]},
		"alpha":{"type":"string","oneOf":[{"const":"x","title":"Ex"},{"const":"y","title":"Why"}]},
		"many":{"type":"array","items":{"anyOf":[{"const":"p","title":"Pea"}]},"minItems":1},
		"n":{"type":"integer","minimum":1,"maximum":5,"default":3}},"required":["n"]}`))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range s.Properties {
		names = append(names, p.Name)
	}
	if strings.Join(names, ",") != "zeta,alpha,many,n" || !s.IsRequired("n") {
		t.Fatalf("fields %v, required %v", names, s.Required)
	}
	z, a, m, n := s.Properties[0], s.Properties[1], s.Properties[2], s.Properties[3]
	if strings.Join(z.Enum, ",") != "a,b" || strings.Join(z.EnumTitles, ",") != "Alpha,Beta" ||
		strings.Join(a.Enum, ",") != "x,y" || strings.Join(a.EnumTitles, ",") != "Ex,Why" ||
		strings.Join(m.Enum, ",") != "p" || strings.Join(m.EnumTitles, ",") != "Pea" || m.MinItems == nil || *m.MinItems != 1 ||
		n.Minimum == nil || *n.Minimum != 1 || *n.Maximum != 5 || string(n.Default) != "3" {
		t.Fatalf("properties %+v", s.Properties)
	}
	for _, bad := range []string{`{"type":"string"}`, `{"properties":{"o":{"type":"object"}}}`, `{"properties":{"e":{"type":"string","enum":[1]}}}`, `{"properties":{"l":{"type":"array"}}}`} {
		if _, err := ParseFormSchema([]byte(bad)); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want a one-line error", bad, err)
		}
	}
}
