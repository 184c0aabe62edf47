package ui

import (
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/present"
	"github.com/taskdeck/taskdeck/termtext"
)

// detailPane is everything about one task, scrollable.
type detailPane struct {
	id string
	vp viewport.Model
}

// detailOutcome is what a key in the detail pane came to.
type detailOutcome int

const (
	detailStay  detailOutcome = iota // the pane scrolled
	detailClose                      // back to the table
	detailPass                       // a table action on the task shown: the root handles it
)

func newDetailPane(id string) *detailPane {
	vp := viewport.New()
	vp.SoftWrap = true // a long line wraps, not cut at the pane's edge
	return &detailPane{id: id, vp: vp}
}

// SetSize sets the space the pane may use.
func (d *detailPane) SetSize(width, height int) {
	d.vp.SetWidth(width)
	d.vp.SetHeight(height)
}

// Update takes one key.
func (d *detailPane) Update(msg tea.KeyPressMsg, k KeyMap) (detailOutcome, tea.Cmd) {
	switch {
	case key.Matches(msg, k.Close):
		return detailClose, nil
	case key.Matches(msg, k.Up, k.Down, k.PageUp, k.PageDown):
		var cmd tea.Cmd
		d.vp, cmd = d.vp.Update(msg)
		return detailStay, cmd
	}
	return detailPass, nil
}

func (d *detailPane) View() string { return d.vp.View() }

// detailText is everything about one task, for the detail pane.
func (m *Model) detailText(t *model.Task) string {
	var b strings.Builder
	pad := strings.Repeat(" ", m.styles.Label.GetWidth()+1)
	line := func(label, value string) {
		if value != "" {
			b.WriteString(m.styles.Label.Render(label) + " " + strings.ReplaceAll(value, "\n", "\n"+pad) + "\n")
		}
	}
	look := lookOf(t)
	line("task", t.ID+"  (short: "+m.list.shortID(t.ID)+")")
	line("status", m.styles.statusStyle(t).Render(look.Symbol+" "+present.StatusText(t)))
	line("server", m.detailServer(t))
	line("protocol", t.Protocol)
	line("tool", termtext.Line(t.Tool))
	line("agent", termtext.Line(t.Agent))
	line("arguments", present.PrettyJSON(termtext.Sanitize(string(t.Arguments), true)))
	line("key", termtext.Line(t.IdempotencyKey))
	line("repeats", t.Repeats)
	line("created", m.ago(t.CreatedAt))
	line("changed", m.ago(t.UpdatedAt))
	line("expires", m.expiryText(t))
	line("waiting", m.waitedText(t))
	line("answer by", m.answerByText(t))
	if t.StatusMessage != "" {
		b.WriteString("\n" + m.styles.Title.Render("Status message") + "\n" + termtext.Sanitize(t.StatusMessage, true) + "\n")
	}
	if inputs := present.Inputs(t); len(inputs) > 0 {
		b.WriteString("\n" + m.styles.Title.Render("Waiting for input") + " (press a to answer)\n")
		for _, in := range inputs {
			b.WriteString("  " + in.Key + ": " + in.Message + "\n")
			if in.URL != "" {
				b.WriteString("    URL: " + in.URL + "\n")
			}
			if len(in.Fields) > 0 {
				b.WriteString("    fields: " + strings.Join(in.Fields, ", ") + "\n")
			}
		}
	}
	if a := m.answeredText(t); a != "" {
		b.WriteString("\n" + m.styles.Title.Render("Answered") + "\n" + a)
	}
	if r := present.Result(t); r != "" {
		b.WriteString("\n" + m.styles.Title.Render("Result") + " (y copies it as JSON)\n" + r + "\n")
	}
	if t.Error != nil {
		b.WriteString("\n" + m.styles.Title.Render("Error") + "\n" + m.styles.Error.Render(fmt.Sprintf("%d %s", t.Error.Code, termtext.Line(t.Error.Message))) + "\n")
	}
	if t.LocalError != "" {
		b.WriteString("\n" + m.styles.Title.Render("Local error") + "\n" + termtext.Line(t.LocalError) + "\n")
	}
	if next := m.nextSteps(t); next != "" {
		b.WriteString("\n" + m.styles.Title.Render("What now") + "\n" + next + "\n")
	}
	b.WriteString("\n" + m.styles.Title.Render("Polling") + "\n")
	ps := m.polls[t.ID]
	switch {
	case !t.Pollable():
		b.WriteString("  not polled: " + string(t.Status) + "\n")
	case ps.NoEngine:
		b.WriteString("  " + m.styles.Error.Render("not polled: "+present.Watch(ps)) + " (start an engine that has this server)\n")
	default:
		if w := present.Watch(ps); w != "" {
			b.WriteString("  watched by " + w + "\n")
		}
		var when []string // none for a task another engine polls
		if !ps.LastPolled.IsZero() {
			when = append(when, "last poll "+present.Age(m.now.Sub(ps.LastPolled))+" ago")
		}
		if next := m.nextPoll(t); next != "" {
			when = append(when, "next in "+next)
		}
		if len(when) > 0 {
			b.WriteString("  " + strings.Join(when, ", ") + "\n")
		}
		if ps.LastError != "" {
			b.WriteString("  " + m.styles.Error.Render(fmt.Sprintf("last error (%d in a row): %s", ps.Errors, termtext.Line(ps.LastError))) + "\n")
		}
	}
	b.WriteString("\n" + m.styles.Title.Render("History") + "\n")
	for _, h := range present.History(t, time.TimeOnly) {
		b.WriteString("  " + h + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}
