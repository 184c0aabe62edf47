package badger

import (
	"bytes"
	"encoding/json"

	segjson "github.com/segmentio/encoding/json"

	"github.com/taskdeck/taskdeck/model"
)

// unmarshalRecord decodes a stored record. Decoding the open tasks' JSON
// is most of start-up, and segmentio's decoder (already in the build
// through go-sdk) takes a fifth of encoding/json's time on a record. When
// it refuses a record, encoding/json decides, so nothing it accepted
// before is refused now and errors read as they always did. An empty
// history decodes as nil, whichever decoder ran.
func unmarshalRecord(v []byte, t *model.Task) error {
	// segmentio starts a slice at 10 elements: 720 bytes of history per
	// record where 2 or 3 transitions are usual, and allocating them was a
	// sixth of the dashboard's start-up CPU. Counting the transitions first sizes it (a count
	// too high only wastes room; the decoder grows one too low).
	if n := bytes.Count(v, transitionStart); n > 0 {
		t.History = make([]model.Transition, 0, n)
	}
	err := segjson.Unmarshal(v, t)
	if err != nil {
		*t = model.Task{}
		err = json.Unmarshal(v, t)
	}
	if len(t.History) == 0 {
		t.History = nil
	}
	return err
}

// transitionStart begins every marshalled model.Transition: At comes first
// and is never omitted. Inside a JSON string the quotes would be escaped.
var transitionStart = []byte(`{"at":`)
