package cli

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/hostile"
)

// TestJSONOutputIsValidUTF8: a server that answers with bytes that are not
// UTF-8 (the 8-bit CSI 0x9b and OSC 0x9d among them) in its status
// messages and results: every --json line is valid UTF-8 JSON, carries no
// C1 control, and decodes back with the bad bytes shown as U+FFFD.
func TestJSONOutputIsValidUTF8(t *testing.T) {
	t.Parallel()
	s := hostile.Start(t, demo.Options{Speed: 0.05})
	s.On("*", s.InvalidUTF8Fault())
	c := newInproc(t)
	var out []string
	for _, args := range [][]string{
		{"call", "--url", s.URL, "sleep", "--args", `{"seconds":1}`, "--wait", "--json"},
		{"call", "--url", s.URL, "echo", "--args", `{"text":"hi"}`, "--json"},
		{"ls", "--json"},
	} {
		r := c.run(args...).Must(t, exitOK)
		out = append(out, r.Stdout)
	}
	all := strings.Join(out, "")
	sc := bufio.NewScanner(strings.NewReader(all))
	sc.Buffer(nil, 1<<20)
	lines, replaced := 0, 0
	for sc.Scan() {
		line := sc.Bytes()
		lines++
		if !utf8.Valid(line) {
			t.Fatalf("--json line %d is not valid UTF-8: %q", lines, line)
		}
		for _, r := range string(line) {
			if r >= 0x80 && r <= 0x9f {
				t.Fatalf("--json line %d carries C1 control U+%04X: %q", lines, r, line)
			}
		}
		var v map[string]any
		if err := json.Unmarshal(line, &v); err != nil {
			t.Fatalf("--json line %d does not decode: %v: %q", lines, err, line)
		}
		if b, _ := json.Marshal(v); strings.Contains(string(b), "\ufffd\ufffd\ufffd") {
			replaced++
		}
	}
	if lines < 4 || replaced < lines-1 {
		t.Fatalf("%d lines, %d with the planted bytes shown as U+FFFD; want the bytes in nearly every line\n%s", lines, replaced, all)
	}
}
