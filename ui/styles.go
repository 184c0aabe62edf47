package ui

import (
	"image/color"

	"charm.land/lipgloss/v2"
	"github.com/taskdeck/taskdeck/model"
)

// statusLook is how a status shows: a symbol that reads without colour,
// and the colour it gets where there is colour.
type statusLook struct {
	Symbol string
	Color  color.Color
}

// statusLooks is the status table; the README documents it.
var statusLooks = map[model.Status]statusLook{
	model.StatusCalling:       {"…", lipgloss.Color("245")},
	model.StatusWorking:       {"●", lipgloss.Color("39")},
	model.StatusInputRequired: {"?", lipgloss.Color("214")},
	model.StatusOrphaned:      {"!", lipgloss.Color("201")},
	model.StatusCompleted:     {"✓", lipgloss.Color("42")},
	model.StatusFailed:        {"✗", lipgloss.Color("196")},
	model.StatusCancelled:     {"⊘", lipgloss.Color("244")},
	model.StatusUnknown:       {"∅", lipgloss.Color("241")},
	model.StatusFound:         {"◇", lipgloss.Color("207")},
	model.StatusLeft:          {"↷", lipgloss.Color("241")},
}

// pollFailedSymbol replaces the status symbol of a task whose last poll
// failed: its status is the last one heard.
const pollFailedSymbol = "⚠"

// toolErrorLook marks a completed task whose tool reported an error.
var toolErrorLook = statusLook{"✗", lipgloss.Color("203")}

func lookOf(t *model.Task) statusLook {
	if t.Status == model.StatusCompleted && t.IsError {
		return toolErrorLook
	}
	return statusLooks[t.Status]
}

// Styles are every style the dashboard uses, by role.
type Styles struct {
	Title, Header, Count, Dim, Selected, Marked, Error, Flash, Key, Box, Label lipgloss.Style
	Status                                                                     map[model.Status]lipgloss.Style
	ToolError                                                                  lipgloss.Style
}

// DefaultStyles builds the styles. Colours are downsampled (or dropped
// for NO_COLOR) by the renderer, so the symbols carry the meaning.
func DefaultStyles() Styles {
	s := Styles{
		Title:     lipgloss.NewStyle().Bold(true),
		Header:    lipgloss.NewStyle().Bold(true).Underline(true),
		Count:     lipgloss.NewStyle(),
		Dim:       lipgloss.NewStyle().Foreground(lipgloss.Color("245")),
		Selected:  lipgloss.NewStyle().Reverse(true),
		Marked:    lipgloss.NewStyle().Bold(true),
		Error:     lipgloss.NewStyle().Foreground(lipgloss.Color("196")),
		Flash:     lipgloss.NewStyle().Italic(true),
		Key:       lipgloss.NewStyle().Bold(true),
		Box:       lipgloss.NewStyle().Border(lipgloss.RoundedBorder()).Padding(0, 1),
		Label:     lipgloss.NewStyle().Bold(true).Width(12),
		Status:    map[model.Status]lipgloss.Style{},
		ToolError: lipgloss.NewStyle().Foreground(toolErrorLook.Color),
	}
	for st, look := range statusLooks {
		s.Status[st] = lipgloss.NewStyle().Foreground(look.Color)
	}
	return s
}

func (s Styles) statusStyle(t *model.Task) lipgloss.Style {
	if t.Status == model.StatusCompleted && t.IsError {
		return s.ToolError
	}
	return s.Status[t.Status]
}
