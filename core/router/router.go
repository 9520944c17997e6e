package router

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Flow is what the router needs to know about one configured flow.
type Flow struct {
	Name        string
	Description string
	Command     string // a pattern, see ParsePattern
}

// Route is the result of routing a command line: which flow to run and the
// arguments extracted from the text (defaults applied).
type Route struct {
	Flow string
	Args map[string]string
}

// NoMatchError says a command line matched no flow. Its Error text is meant
// to be shown to the person who typed it as is: the usage of the flow they
// probably meant, or the list of all flows.
type NoMatchError struct {
	Text    string // the text as received
	Flow    string // the flow whose command word matched, if any
	Reason  string // short machine-independent reason, e.g. "unterminated double quote"
	Help    string // usage of Flow, or the list of all flows
	Unknown bool   // true when no flow has the first word as its command
}

// Error returns the help text, prefixed by the reason when there is one.
func (e *NoMatchError) Error() string {
	if e.Reason != "" {
		return e.Reason + "\n" + e.Help
	}
	return e.Help
}

type entry struct {
	flow    Flow
	pattern *Pattern
	order   int
}

// Router maps command lines to flows. It is immutable after New and safe
// for concurrent use.
type Router struct {
	entries []entry // in match order: more literal words first, then config order
	byName  []entry // config order, for help texts
}

// New parses every flow's pattern. It fails on the first malformed pattern
// or duplicate flow name; config validation reports all of them with line
// numbers before this is ever called.
func New(flows []Flow) (*Router, error) {
	r := &Router{}
	names := map[string]bool{}
	for i, f := range flows {
		if f.Name == "" {
			return nil, fmt.Errorf("router: flow %d: empty name", i)
		}
		if names[f.Name] {
			return nil, fmt.Errorf("router: duplicate flow %q", f.Name)
		}
		names[f.Name] = true
		p, err := ParsePattern(f.Command)
		if err != nil {
			return nil, fmt.Errorf("router: flow %q: %w", f.Name, err)
		}
		r.byName = append(r.byName, entry{flow: f, pattern: p, order: i})
	}
	r.entries = append([]entry(nil), r.byName...)
	// "deploy rollback {service}" must be tried before "deploy {service}".
	sort.SliceStable(r.entries, func(a, b int) bool {
		return len(r.entries[a].pattern.Literals()) > len(r.entries[b].pattern.Literals())
	})
	return r, nil
}

// Route finds the flow for text. A single leading "/" on the first word is
// ignored so "/deploy api 1" works where a platform passes it through.
// On failure it returns a *NoMatchError.
func (r *Router) Route(text string) (Route, error) {
	tokens, err := tokenize(text)
	if err != nil {
		first, _, _ := strings.Cut(strings.TrimSpace(text), " ")
		return Route{}, r.noMatch(text, strings.TrimPrefix(first, "/"), err.Error())
	}
	if len(tokens) == 0 {
		return Route{}, r.noMatch(text, "", "")
	}
	if t, ok := strings.CutPrefix(tokens[0].text, "/"); ok {
		tokens[0] = token{text: t, eq: max(tokens[0].eq-1, -1)}
	}
	for _, e := range r.entries {
		if args, ok := e.pattern.matchTokens(tokens); ok {
			return Route{Flow: e.flow.Name, Args: args}, nil
		}
	}
	return Route{}, r.noMatch(text, tokens[0].text, "")
}

// Flows returns the flows in configuration order with their parsed
// patterns' usage, for "help" replies and command registration.
func (r *Router) Flows() []Flow {
	out := make([]Flow, len(r.byName))
	for i, e := range r.byName {
		out[i] = e.flow
	}
	return out
}

// Help lists every flow with its usage and description.
func (r *Router) Help() string {
	if len(r.byName) == 0 {
		return "no commands are configured"
	}
	var b strings.Builder
	b.WriteString("commands:")
	for _, e := range r.byName {
		b.WriteString("\n  " + e.pattern.Usage())
		if e.flow.Description != "" {
			b.WriteString(" — " + e.flow.Description)
		}
	}
	return b.String()
}

func (r *Router) noMatch(text, first, reason string) *NoMatchError {
	e := &NoMatchError{Text: text, Reason: reason}
	var usages []string
	for _, en := range r.byName {
		if first != "" && strings.EqualFold(en.pattern.Command(), first) {
			if e.Flow == "" {
				e.Flow = en.flow.Name
			}
			usages = append(usages, "usage: "+en.pattern.Usage())
		}
	}
	if len(usages) > 0 {
		e.Help = strings.Join(usages, "\n")
		return e
	}
	e.Unknown = true
	if first != "" && e.Reason == "" {
		e.Reason = fmt.Sprintf("unknown command %q", first)
	}
	e.Help = r.Help()
	return e
}

// IsNoMatch reports whether err is (or wraps) a *NoMatchError.
func IsNoMatch(err error) bool {
	var nm *NoMatchError
	return errors.As(err, &nm)
}
