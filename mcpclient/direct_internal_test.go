package mcpclient

import (
	"errors"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/mcpclient/wire"
)

// Nesting past maxDepth is refused before any decoder sees it; brackets
// inside strings do not count, escaped quotes included.
func TestDecodeMessageBoundsDepth(t *testing.T) {
	answer := func(result string) []byte {
		return []byte(`{"jsonrpc":"2.0","id":"td-get-1","result":{"resultType":"complete","taskId":"t","status":"completed","result":` + result + `}}`)
	}
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	// The envelope and the result object are two levels.
	for _, result := range []string{
		`{"content":` + deep(maxDepth-3) + `}`,
		`{"text":"` + strings.Repeat("[", 2*maxDepth) + `"}`,
		`{"text":"\"` + strings.Repeat("{", 2*maxDepth) + `"}`,
		`{"text":"\\\\","more":` + deep(maxDepth-3) + `}`,
	} {
		msg, err := decodeMessage(answer(result))
		if err != nil {
			t.Fatalf("refused an answer within bounds: %v", err)
		}
		if !msg.answers(1) || msg.Result.TaskID != "t" {
			t.Fatalf("decoded %+v", msg)
		}
	}
	for _, result := range []string{
		`{"content":` + deep(maxDepth-1) + `}`,
		`{"text":"\\\\",` + `"more":` + deep(maxDepth) + `}`,
		strings.Repeat("[", 1<<20), // unbalanced and huge
	} {
		_, err := decodeMessage(answer(result))
		var re *requestError
		if !errors.Is(err, wire.ErrInvalid) || !errors.As(err, &re) {
			t.Fatalf("nesting past %d: got %v, want an invalid-response request error", maxDepth, err)
		}
	}
}
