package ui

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/taskdeck/taskdeck/termtext"
)

// The filter (/) is a search (internal/search, shared with ls --search),
// kept in a history.

// maxHistory bounds the searches kept.
const maxHistory = 100

// searchHistory is the searches kept with enter, oldest first, in a
// file of one search a line when it has a path. ↑ and ↓ in the filter
// prompt walk it.
type searchHistory struct {
	path  string
	items []string
	pos   int // len(items) when not walking
}

// loadHistory reads the history file; a missing file is an empty
// history.
func loadHistory(path string) (*searchHistory, error) {
	h := &searchHistory{path: path}
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return h, fmt.Errorf("search history %s cannot be read: %w (searches are kept for this session only)", path, err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			if line := termtext.Line(sc.Text()); line != "" {
				h.items = append(h.items, line)
			}
		}
		h.items = h.items[max(len(h.items)-maxHistory, 0):]
	}
	h.pos = len(h.items)
	return h, nil
}

// add keeps a search as the newest (once), and writes the file.
func (h *searchHistory) add(s string) error {
	s = strings.TrimSpace(s)
	defer func() { h.pos = len(h.items) }()
	if s == "" {
		return nil
	}
	h.items = append(slices.DeleteFunc(h.items, func(x string) bool { return x == s }), s)
	h.items = h.items[max(len(h.items)-maxHistory, 0):]
	if h.path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(h.path), 0o700); err != nil {
		return fmt.Errorf("search history not saved: %w", err)
	}
	tmp := h.path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(h.items, "\n")+"\n"), 0o600); err != nil {
		return fmt.Errorf("search history not saved: %w", err)
	}
	if err := os.Rename(tmp, h.path); err != nil {
		return fmt.Errorf("search history not saved: %w", err)
	}
	return nil
}

// step moves through the history (-1 older, +1 newer) and returns the
// search there; past the newest it is empty.
func (h *searchHistory) step(d int) string {
	h.pos = max(min(h.pos+d, len(h.items)), 0)
	if h.pos == len(h.items) {
		return ""
	}
	return h.items[h.pos]
}
