// Package nearest finds the names close to a misspelt one, for "did you
// mean" hints in error messages.
package nearest

import (
	"slices"
	"strings"
)

// Names returns the candidates close to word, sorted: within a small edit
// distance (case-insensitive), or containing it.
func Names(word string, candidates []string) []string {
	w := strings.ToLower(word)
	var close []string
	for _, c := range candidates {
		lc := strings.ToLower(c)
		if distance(w, lc) <= max(2, len(word)/3) || (w != "" && strings.Contains(lc, w)) {
			close = append(close, c)
		}
	}
	slices.Sort(close)
	return close
}

// distance is the Levenshtein distance between a and b (bytes).
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	cur := make([]int, len(b)+1)
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
