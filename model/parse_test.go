package model

import (
	"encoding/json"
	"math"
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
