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
	// Suggestion is the command word the unknown one is a typo of, if any.
	Suggestion string
	// Asked is true when the text was a request for help ("help",
	// "help deploy"): Help is the answer, not an error.
	Asked bool
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
	words := make([]string, len(tokens))
	for i, t := range tokens {
		words[i] = t.text
	}
	if h, ok := r.help(words); ok {
		return Route{}, &NoMatchError{Text: text, Help: h, Asked: true}
	}
	return Route{}, r.noMatch(text, tokens[0].text, "")
}

// help answers "help" (or "?"), alone or followed by a command word, when
// no flow claims the word itself: the list of every flow, or the usage
// and description of the flows of that command.
func (r *Router) help(tokens []string) (string, bool) {
	if w := strings.ToLower(tokens[0]); (w != "help" && w != "?") || len(tokens) > 2 {
		return "", false
	}
	if len(tokens) == 1 {
		return r.Help(), true
	}
	var lines []string
	for _, e := range r.byName {
		if strings.EqualFold(e.pattern.Command(), strings.TrimPrefix(tokens[1], "/")) {
			line := "usage: " + e.pattern.Usage()
			if e.flow.Description != "" {
				line += " — " + e.flow.Description
			}
			lines = append(lines, line)
		}
	}
	if len(lines) == 0 {
		return fmt.Sprintf("no command %q\n%s", tokens[1], r.Help()), true
	}
	return strings.Join(lines, "\n"), true
}

// suggest returns the command word closest to word — a typo away: one
// edit for short words, two for words of six letters or more — or "".
func (r *Router) suggest(word string) string {
	word = strings.ToLower(word)
	best, bestD := "", 0
	limit := 1
	if len([]rune(word)) >= 6 {
		limit = 2
	}
	for _, e := range r.byName {
		c := strings.ToLower(e.pattern.Command())
		if d := editDistance(word, c); d <= limit && (best == "" || d < bestD) {
			best, bestD = e.pattern.Command(), d
		}
	}
	return best
}

// editDistance is the Damerau–Levenshtein distance (optimal string
// alignment: insert, delete, substitute, swap two neighbours) over runes,
// bounded in work by the length of command words.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 64 || len(rb) > 64 {
		return 1 << 30
	}
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
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
		if s := r.suggest(first); s != "" {
			e.Suggestion = s
			e.Reason += fmt.Sprintf(" — did you mean `%s`?", s)
		}
	}
	e.Help = r.Help()
	return e
}

// IsNoMatch reports whether err is (or wraps) a *NoMatchError.
func IsNoMatch(err error) bool {
	var nm *NoMatchError
	return errors.As(err, &nm)
}
