package store

import (
	"encoding/json"

	segjson "github.com/segmentio/encoding/json"

	"github.com/taskdeck/taskdeck/model"
)

// unmarshalRecord decodes a stored record. Decoding the open tasks' JSON
// is most of start-up, and segmentio's decoder (already in the build
// through go-sdk) takes a fifth of encoding/json's time on a record. When
// it refuses a record, encoding/json decides, so nothing it accepted
// before is refused now and errors read as they always did.
func unmarshalRecord(v []byte, t *model.Task) error {
	if segjson.Unmarshal(v, t) == nil {
		return nil
	}
	*t = model.Task{}
	return json.Unmarshal(v, t)
}
