package ui

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"charm.land/bubbles/v2/key"
	"charm.land/lipgloss/v2"
	"github.com/taskdeck/taskdeck/model"
)

// Config is the dashboard's part of the config file, its "dashboard"
// section:
//
//	"dashboard": {
//	  "keys":   {"cancel": ["x"], "rerun": ["ctrl+r", "R"]},
//	  "colors": {"working": "33", "failed": "#ff5f5f", "dim": "250"},
//	  "mouse":  false
//	}
//
// A key list replaces the action's keys; an action is named as in the
// help (camel case of KeyMap's fields: "pollNow", "markAll").
type Config struct {
	keys   KeyMap
	styles Styles
	mouse  bool
}

// dashboardSection is the section as written.
type dashboardSection struct {
	Keys   map[string][]string `json:"keys"`
	Colors map[string]string   `json:"colors"`
	Mouse  *bool               `json:"mouse"`
}

// DefaultConfig is the dashboard with no "dashboard" section.
func DefaultConfig() *Config {
	return &Config{keys: DefaultKeyMap(), styles: DefaultStyles(), mouse: true}
}

// ParseConfig reads the "dashboard" section of a whole config file. A
// file without one is the default; a wrong one is a one-line error that
// names the entry.
func ParseConfig(file []byte) (*Config, error) {
	c := DefaultConfig()
	var top struct {
		Dashboard json.RawMessage `json:"dashboard"`
	}
	if err := json.Unmarshal(file, &top); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if len(top.Dashboard) == 0 || string(top.Dashboard) == "null" {
		return c, nil
	}
	var sec dashboardSection
	dec := json.NewDecoder(strings.NewReader(string(top.Dashboard)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sec); err != nil {
		return nil, fmt.Errorf("dashboard: %v (it takes \"keys\", \"colors\" and \"mouse\")", err)
	}
	if err := c.setKeys(sec.Keys); err != nil {
		return nil, err
	}
	if err := c.setColors(sec.Colors); err != nil {
		return nil, err
	}
	if sec.Mouse != nil {
		c.mouse = *sec.Mouse
	}
	return c, nil
}

// actionName is the config name of a KeyMap field.
func actionName(field string) string {
	r := []rune(field)
	r[0] = unicode.ToLower(r[0])
	return string(r)
}

// actions are the KeyMap's bindings by config name.
func (k *KeyMap) actions() map[string]*key.Binding {
	out := map[string]*key.Binding{}
	v := reflect.ValueOf(k).Elem()
	for i := range v.NumField() {
		out[actionName(v.Type().Field(i).Name)] = v.Field(i).Addr().Interface().(*key.Binding)
	}
	return out
}

func (c *Config) setKeys(keys map[string][]string) error {
	acts := c.keys.actions()
	for _, name := range slices.Sorted(maps.Keys(keys)) {
		b, ok := acts[name]
		if !ok {
			return fmt.Errorf("dashboard.keys.%s: no such action; the actions are %s", name, strings.Join(slices.Sorted(maps.Keys(acts)), ", "))
		}
		list := keys[name]
		if len(list) == 0 {
			return fmt.Errorf("dashboard.keys.%s: give at least one key, e.g. [\"x\"]", name)
		}
		for _, k := range list {
			if p, ok := keyPress(k); !ok || p.String() != k {
				return fmt.Errorf("dashboard.keys.%s: %q is not a key name; write keys as \"x\", \"X\", \"ctrl+x\", \"alt+x\", \"enter\", \"space\", \"pgdown\"", name, k)
			}
		}
		b.SetKeys(list...)
		b.SetHelp(strings.Join(list, "/"), b.Help().Desc)
	}
	// A key may not mean two things where both would be read.
	modes := c.keys.modeKeys()
	for _, m := range slices.Sorted(maps.Keys(modes)) {
		seen := map[string]string{}
		for _, b := range modes[m] {
			for _, k := range b.Keys() {
				if other, ok := seen[k]; ok && other != b.Help().Desc {
					return fmt.Errorf("dashboard.keys: %q would mean both %q and %q in the %s; bind one of them to another key", k, other, b.Help().Desc, modeNames[m])
				}
				seen[k] = b.Help().Desc
			}
		}
	}
	return nil
}

// modeNames name the modes in messages.
var modeNames = map[mode]string{
	modeTable: "table", modeDetail: "detail pane", modeFilter: "filter prompt", modeHelp: "help",
	modeConfirm: "questions", modeForm: "forms", modePick: "pickers", modePalette: "command palette",
	modeServers: "servers view",
}

// colorValue is what a colour may be: an ANSI number or #rgb / #rrggbb.
var colorValue = regexp.MustCompile(`^(?:[0-9]|[1-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|25[0-5]|#[0-9a-fA-F]{3}|#[0-9a-fA-F]{6})$`)

func (c *Config) setColors(colors map[string]string) error {
	roles := map[string]*lipgloss.Style{
		"title": &c.styles.Title, "header": &c.styles.Header, "dim": &c.styles.Dim, "error": &c.styles.Error,
		"flash": &c.styles.Flash, "key": &c.styles.Key, "toolError": &c.styles.ToolError,
	}
	names := slices.Sorted(maps.Keys(roles))
	for _, st := range model.AllStatuses {
		names = append(names, string(st))
	}
	for _, name := range slices.Sorted(maps.Keys(colors)) {
		v := colors[name]
		if !colorValue.MatchString(v) {
			return fmt.Errorf("dashboard.colors.%s: %q is not a colour; use an ANSI number 0-255 or #rrggbb", name, v)
		}
		if r, ok := roles[name]; ok {
			*r = r.Foreground(lipgloss.Color(v))
			continue
		}
		st := model.Status(name)
		if !slices.Contains(model.AllStatuses, st) {
			return fmt.Errorf("dashboard.colors.%s: nothing has that name; colours are for %s", name, strings.Join(names, ", "))
		}
		c.styles.Status[st] = c.styles.Status[st].Foreground(lipgloss.Color(v))
	}
	return nil
}
