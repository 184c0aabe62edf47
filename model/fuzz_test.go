package model

import (
	"encoding/json"
	"strings"
	"testing"
)

const hostileText = "\x1b]0;pwned\x07\x1b[2J\x1b]52;c;ZXZpbA==\x07\x9b31m\u202eetoh\x00 ok"

func hostileString() string { b, _ := json.Marshal(hostileText); return string(b) }

func oneLine(t *testing.T, what string, err error) {
	t.Helper()
	if strings.ContainsAny(err.Error(), "\r\n") {
		t.Fatalf("%s: error is not one line: %q", what, err)
	}
}

// formSchemaSeeds are requestedSchemas: the spec's, the demo's, and nasty ones.
func formSchemaSeeds() []string {
	h := hostileString()
	return []string{
		`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`,
		`{"type":"object","properties":{"approve":{"type":"boolean","title":"Approve"},"reason":{"type":"string","title":"Reason"}},"required":["approve","reason"]}`,
		`{"type":"object","properties":{"email":{"type":"string","format":"email"},"plan":{"type":"string","oneOf":[{"const":"free","title":"Free"},{"const":"pro","title":"Pro"}]}},"required":["email","plan"]}`,
		`{"type":"object","properties":{"score":{"type":"number","minimum":1,"maximum":10},"n":{"type":"integer","default":3},"tags":{"type":"array","items":{"enum":["a","b"]},"minItems":1}}}`,
		`{"type":"object","properties":{` + h + `:{"type":"string","title":` + h + `,"description":` + h + `,"enum":[` + h + `],"enumNames":[` + h + `]}},"required":[` + h + `]}`,
		`{"type":"object","properties":{"a":{"type":"string"},"a":{"type":"number"}}}`,
		`{"type":"object","properties":{"x":{"type":"object"}}}`,
		`{"type":"array"}`, `{"properties":[]}`, `{"properties":{"a":7}}`, `null`, ``, `{"type":"object","properties":{"d":{"type":"string","format":"date","minLength":-1,"maxLength":0}}}`,
	}
}

func FuzzParseFormSchema(f *testing.F) {
	for _, s := range formSchemaSeeds() {
		f.Add([]byte(s), []byte(`{"name":"x","approve":true,"reason":"ok","score":5,"tags":["a"]}`))
	}
	f.Fuzz(func(t *testing.T, raw, content []byte) {
		s, err := ParseFormSchema(raw)
		if err != nil {
			oneLine(t, "ParseFormSchema", err)
			return
		}
		seen := map[string]bool{}
		for _, p := range s.Properties {
			if seen[p.Name] {
				t.Fatalf("property %q twice", p.Name)
			}
			seen[p.Name] = true
			switch p.Type {
			case "string", "number", "integer", "boolean":
			case "array":
				if len(p.Enum) == 0 {
					t.Fatalf("array %q without options", p.Name)
				}
			default:
				t.Fatalf("accepted property %q of type %q", p.Name, p.Type)
			}
			if p.EnumTitles != nil && len(p.EnumTitles) != len(p.Enum) {
				t.Fatalf("property %q: %d titles for %d options", p.Name, len(p.EnumTitles), len(p.Enum))
			}
		}
		var c map[string]any
		if json.Unmarshal(content, &c) == nil {
			if err := s.Validate(c); err != nil {
				oneLine(t, "Validate", err)
			}
		}
	})
}

func FuzzElicitation(f *testing.F) {
	h := hostileString()
	for _, s := range formSchemaSeeds() {
		if s == "" {
			continue
		}
		f.Add("elicitation/create", []byte(`{"mode":"form","message":`+h+`,"requestedSchema":`+s+`}`),
			[]byte(`{"action":"accept","content":{"name":"x","approve":true,"reason":"ok"}}`))
	}
	f.Add("elicitation/create", []byte(`{"mode":"url","message":"sign in","url":"https://example.com/x"}`), []byte(`{"action":"accept"}`))
	f.Add("elicitation/create", []byte(`{"mode":"url"}`), []byte(`{"action":"decline"}`))
	f.Add("elicitation/create", []byte(`{"mode":`+h+`}`), []byte(`{"action":`+h+`}`))
	f.Add("sampling/createMessage", []byte(`{"messages":[]}`), []byte(`[]`))
	f.Add(hostileText, []byte(`null`), []byte(`{"action":"accept","content":null}`))
	f.Fuzz(func(t *testing.T, method string, params, answer []byte) {
		req := InputRequest{Method: method, Params: params}
		e, err := req.Elicitation()
		if err != nil {
			oneLine(t, "Elicitation", err)
		} else {
			switch e.Mode {
			case "form":
				if e.Schema == nil {
					t.Fatal("form elicitation without a schema")
				}
			case "url":
				if e.URL == "" {
					t.Fatal("url elicitation without a url")
				}
			default:
				t.Fatalf("accepted mode %q", e.Mode)
			}
		}
		if err := ValidateAnswer(req, answer); err != nil {
			oneLine(t, "ValidateAnswer", err)
		}
	})
}
