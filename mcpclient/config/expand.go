package config

import (
	"fmt"
	"regexp"
	"strings"
)

// varRef matches ${...}; what is inside is checked separately so that a
// malformed reference is an error rather than silently left in place.
var varRef = regexp.MustCompile(`\$\{([^{}]*)\}`)
var varName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Expand returns a copy with ${VAR} expanded from lookup (os.LookupEnv in
// production) in Command, Args, Env values, URL and Headers values. $VAR
// without braces is left as it is. An unset variable is an error naming the
// variable and the server. The receiver is not changed: the loaded config
// keeps the ${VAR} text, so nothing expanded is ever stored.
func (s ServerConfig) Expand(lookup func(string) (string, bool)) (ServerConfig, error) {
	out := s.clone()
	var firstErr error
	expand := func(field, v string) string {
		if firstErr != nil || !strings.Contains(v, "${") {
			return v
		}
		return varRef.ReplaceAllStringFunc(v, func(m string) string {
			if firstErr != nil {
				return m
			}
			name := m[2 : len(m)-1]
			if !varName.MatchString(name) {
				firstErr = &ConfigError{Path: s.path, Where: s.loc(field),
					Msg: fmt.Sprintf("%q is not a variable reference taskdeck understands; write ${NAME} with letters, digits and _", m)}
				return m
			}
			val, ok := lookup(name)
			if !ok {
				firstErr = &ConfigError{Path: s.path, Where: s.loc(field),
					Msg: fmt.Sprintf("environment variable %s is not set (server %s); export it before starting taskdeck", name, quoteName(s.displayName()))}
				return m
			}
			return val
		})
	}
	out.Command = expand(".command", out.Command)
	for i, a := range out.Args {
		out.Args[i] = expand(fmt.Sprintf(".args[%d]", i), a)
	}
	for _, k := range sortedKeys(out.Env) {
		out.Env[k] = expand(".env"+fieldKey(k), out.Env[k])
	}
	out.URL = expand(".url", out.URL)
	for _, k := range sortedKeys(out.Headers) {
		out.Headers[k] = expand(".headers"+fieldKey(k), out.Headers[k])
	}
	if firstErr != nil {
		return ServerConfig{}, firstErr
	}
	if out.Command == "" && s.Command != "" {
		return ServerConfig{}, &ConfigError{Path: s.path, Where: s.loc(".command"),
			Msg: "is empty once variables are expanded; set the variable to the program to run"}
	}
	if out.URL != "" && out.URL != s.URL {
		if msg := checkURL(out.URL, false); msg != "" {
			// The expanded URL may hold a secret: say what is wrong, not what it is.
			return ServerConfig{}, &ConfigError{Path: s.path, Where: s.loc(".url"), Msg: "once variables are expanded, " + msg}
		}
		// Errors are redacted URL by URL, a URL ending at space or a quote:
		// a value holding one would leave its tail unredacted.
		if strings.ContainsFunc(out.URL, func(r rune) bool { return r <= ' ' || r == 0x7f || strings.ContainsRune(`"'<>`, r) }) {
			return ServerConfig{}, &ConfigError{Path: s.path, Where: s.loc(".url"),
				Msg: "once variables are expanded, holds a space, a quote, < or > or a control character; percent-encode it in the variable"}
		}
	}
	return out, nil
}
