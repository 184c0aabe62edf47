package form

import (
	"encoding/json"
	"github.com/taskdeck/taskdeck/deck"
	"regexp"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/model"
)

// sgr matches colour and attribute sequences: the only escapes a form may
// put on screen. Anything else came from the server.
var sgr = regexp.MustCompile("\x1b\\[[0-9;:]*m")

// safeView fails when a view carries a non-SGR escape, a control
// character other than newline, or a bidi control.
func safeView(t *testing.T, view string) {
	t.Helper()
	rest := sgr.ReplaceAllString(view, "")
	for _, r := range rest {
		switch {
		case r == '\n':
		case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f,
			r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			t.Fatalf("form view carries %U:\n%q", r, rest)
		}
	}
}

const nasty = "\x1b]0;pwned\x07\x1b[2J\x1b]52;c;ZXZpbA==\x07\x9b31m\u202eetoh\x00 ok\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\"

func nastyJSON() string { b, _ := json.Marshal(nasty); return string(b) }

func FuzzForInput(f *testing.F) {
	h := nastyJSON()
	for _, p := range []string{
		`{"mode":"form","message":"Approve deploy?","requestedSchema":{"type":"object","properties":{"approve":{"type":"boolean","title":"Approve"},"reason":{"type":"string","title":"Reason"}},"required":["approve","reason"]}}`,
		`{"message":"How can we reach you?","requestedSchema":{"type":"object","properties":{"email":{"type":"string","format":"email"},"plan":{"type":"string","oneOf":[{"const":"free","title":"Free"},{"const":"pro","title":"Pro"}]}},"required":["email","plan"]}}`,
		`{"mode":"url","message":"Sign in","url":"https://example.com/login"}`,
		`{"mode":"url","message":` + h + `,"url":` + h + `}`,
		`{"message":` + h + `,"requestedSchema":{"type":"object","properties":{` + h + `:{"type":"string","title":` + h + `,"description":` + h + `,"default":` + h + `},"pick":{"type":"string","enum":["a",` + h + `],"enumNames":["A",` + h + `]},"many":{"type":"array","items":{"anyOf":[{"const":` + h + `,"title":` + h + `}]}},"n":{"type":"number","description":` + h + `}},"required":[` + h + `,"pick"]}}`,
		`{"message":"","requestedSchema":{"type":"object","properties":{}}}`,
	} {
		f.Add([]byte(p), "approve · input approve-1")
	}
	f.Add([]byte(`{"message":"x"}`), nasty)
	f.Fuzz(func(t *testing.T, params []byte, title string) {
		e, err := model.InputRequest{Method: "elicitation/create", Params: params}.Elicitation()
		if err != nil {
			return
		}
		fm, err := ForInput(title, e)
		checkBuilt(t, fm, err)
	})
}

func FuzzForArguments(f *testing.F) {
	h := nastyJSON()
	for _, s := range []string{
		`{"type":"object","properties":{"seconds":{"type":"number","description":"how long to sleep","minimum":0,"maximum":3600}},"required":["seconds"]}`,
		`{"type":"object","properties":{"stages":{"type":"integer","default":3,"minimum":1}}}`,
		`{"type":"object","properties":{"mode":{"type":"string","enum":["error","tool"]}}}`,
		`{"type":"object","properties":{}}`,
		`{"type":"object","additionalProperties":true}`,
		`{"type":"object","properties":{"x":{"$ref":"#/$defs/x"}},"$defs":{"x":{"type":"string"}}}`,
		`{"type":"object","properties":{` + h + `:{"type":"string","title":` + h + `,"description":` + h + `,"enum":[` + h + `]}}}`,
		`{"type":"object","properties":{"a":{"type":"object"}}}`,
		``, `null`, `[]`, `{"type":"string"}`,
	} {
		f.Add([]byte(s), "demo · sleep")
	}
	f.Fuzz(func(t *testing.T, schema []byte, title string) {
		fm, err := ForArguments(title, deck.Tool{InputSchema: schema})
		checkBuilt(t, fm, err)
	})
}

// checkBuilt holds what any built form must do: refuse in one line, or
// render safely.
func checkBuilt(t *testing.T, fm *Form, err error) {
	t.Helper()
	if err != nil {
		if strings.ContainsAny(err.Error(), "\r\n") {
			t.Fatalf("error is not one line: %q", err)
		}
		return
	}
	fm.SetSize(80, 24)
	fm.Init()
	safeView(t, fm.View())
}
