package hostile

import "encoding/json"

// Tree is an edit for Rewrite that works on the result as decoded JSON
// (maps and slices), for changes deep inside it such as a tool's schema.
// Numbers come back as float64, so use Set where a number's exact text
// matters.
func Tree(edit func(result map[string]any)) func(map[string]json.RawMessage) {
	return func(res map[string]json.RawMessage) {
		raw, _ := json.Marshal(res)
		var tree map[string]any
		if json.Unmarshal(raw, &tree) != nil {
			return
		}
		edit(tree)
		clear(res)
		for k, v := range tree {
			res[k], _ = json.Marshal(v)
		}
	}
}
