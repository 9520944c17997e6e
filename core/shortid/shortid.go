// Package shortid is how people see and type run and approval ids: the
// shortest prefix of an id's random part that names it, accepted wherever
// a whole id is.
//
// Ids are UUIDv7s, whose first 48 bits are a millisecond timestamp: a run
// and the approval it asked for share their first eight or more hex
// digits, and a git-style prefix of the whole id told nothing apart
// ("01a2504f" was a run and its card; seven characters matched four
// approvals). The last group of a UUIDv7 (12 hex digits) is random, so
// the short form is a prefix of that group: at least MinLen characters,
// more where the ids shown together share them (Shortest). Typed back, a
// short form, a prefix of the whole id (as before) or the whole id names
// an id (Matches); one that names several is refused with the list
// (AmbiguousError), never guessed (docs/terminal.md, "Short ids").
package shortid

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// MinLen is the shortest short form shown: 7 hex digits are 28 random
// bits, so among a million ids a given one shares its short form with
// another about once in 270.
const MinLen = 7

// MinTyped is the shortest text matched against the random part: fewer
// characters would match one id in sixteen.
const MinTyped = 4

// uuidLen is the length of a canonical UUID; tailStart is where its last
// group begins.
const (
	uuidLen   = 36
	tailStart = 24
)

// Tail is the part of id that short forms are made of: the last group of a
// canonical UUID (its random bits in a UUIDv7), or the whole id for ids of
// another shape.
func Tail(id string) string {
	if isUUID(id) {
		return id[tailStart:]
	}
	return id
}

// isUUID reports the canonical 8-4-4-4-12 hex shape.
func isUUID(id string) bool {
	if len(id) != uuidLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// Of is the short form of one id shown alone: the first MinLen characters
// of its Tail (an id of another shape no longer than that is itself).
func Of(id string) string {
	t := Tail(id)
	if len(t) <= MinLen {
		return t
	}
	return t[:MinLen]
}

// Shortest returns the short form of each of ids as shown together: the
// shortest prefix of its Tail, at least MinLen long, that no other id of
// ids begins its Tail (or its whole id) with, so every short form on one
// screen names one id of that screen. An id whose whole Tail does not tell
// it apart (possible only for ids of another shape) is shown whole.
func Shortest(ids ...string) map[string]string {
	tails := make([]string, 0, len(ids))
	seen := map[string]bool{}
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			tails = append(tails, Tail(id))
		}
	}
	sort.Strings(tails)
	need := map[string]int{} // tail → characters needed to tell it from its neighbours
	for i, t := range tails {
		n := MinLen
		if i > 0 {
			n = max(n, common(tails[i-1], t)+1)
		}
		if i+1 < len(tails) {
			n = max(n, common(t, tails[i+1])+1)
		}
		need[t] = max(need[t], n)
	}
	out := make(map[string]string, len(seen))
	for id := range seen {
		t := Tail(id)
		n := need[t]
		// Typed back, a short form also matches ids that begin with it
		// (Matches): grow it past any other id's beginning.
		for n < len(t) && prefixesOther(id, t[:n], seen) {
			n++
		}
		switch {
		case n >= len(t) && (countOf(tails, t) > 1 || prefixesOther(id, t, seen)):
			out[id] = id
		case n >= len(t):
			out[id] = t
		default:
			out[id] = t[:n]
		}
	}
	return out
}

// prefixesOther reports whether an id of set other than id begins with s.
func prefixesOther(id, s string, set map[string]bool) bool {
	for other := range set {
		if other != id && strings.HasPrefix(other, s) {
			return true
		}
	}
	return false
}

func common(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func countOf(sorted []string, t string) int {
	i := sort.SearchStrings(sorted, t)
	n := 0
	for ; i < len(sorted) && sorted[i] == t; i++ {
		n++
	}
	return n
}

// Valid reports whether typed can name an id at all: letters, digits and
// '-', no longer than a UUID. Anything else is refused before a lookup.
func Valid(typed string) bool {
	if typed == "" || len(typed) > uuidLen {
		return false
	}
	for i := 0; i < len(typed); i++ {
		c := typed[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-') {
			return false
		}
	}
	return true
}

// Matches reports whether typed names id: the whole id, a prefix of it
// (the old git-style short id), or — at least MinTyped characters — a
// prefix of its Tail (the short form shown). Comparison is exact: ids and
// short forms are lower case.
func Matches(id, typed string) bool {
	if typed == "" {
		return false
	}
	if strings.HasPrefix(id, typed) {
		return true
	}
	return len(typed) >= MinTyped && isUUID(id) && strings.HasPrefix(id[tailStart:], typed)
}

// Candidate is one id a typed short form may name, with what a person
// needs to tell candidates apart.
type Candidate struct {
	// Kind is "run" or "approval".
	Kind string
	ID   string
	// Summary says what it is ("deploy, pending, 2026-03-04T12:00:00Z").
	Summary string
}

// ErrNotFound is a short form that names no candidate.
var ErrNotFound = errors.New("names no id")

// AmbiguousError is a short form that names several ids: the caller shows
// Error (which lists them) and asks for more characters.
type AmbiguousError struct {
	Typed   string
	Matches []Candidate
	// More is true when there were more matches than Matches lists.
	More bool
}

// MaxListed bounds the candidates an AmbiguousError lists.
const MaxListed = 10

func (e *AmbiguousError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q is ambiguous; it names:", e.Typed)
	short := Shortest(ids(e.Matches)...)
	for _, c := range e.Matches {
		fmt.Fprintf(&b, "\n  %-8s %-14s %s", c.Kind, short[c.ID], c.ID)
		if c.Summary != "" {
			b.WriteString("  " + c.Summary)
		}
	}
	if e.More {
		b.WriteString("\n  … and more")
	}
	b.WriteString("\ntype more of the id (or all of it)")
	return b.String()
}

func ids(cs []Candidate) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}

// Resolve returns the one candidate typed names: a candidate whose whole id
// is typed wins outright; otherwise exactly one must match (Matches). It
// returns an error matching ErrNotFound for none and an *AmbiguousError
// (listing at most MaxListed) for several. Candidates are what the caller
// looked up, typically a list filtered by the same rule (runs and
// approvals alike, so one short form never names both).
func Resolve(typed string, cands []Candidate) (Candidate, error) {
	var match []Candidate
	seen := map[string]bool{}
	for _, c := range cands {
		if c.ID == typed {
			return c, nil
		}
		if Matches(c.ID, typed) && !seen[c.ID] {
			seen[c.ID] = true
			match = append(match, c)
		}
	}
	switch len(match) {
	case 0:
		return Candidate{}, fmt.Errorf("%q %w", typed, ErrNotFound)
	case 1:
		return match[0], nil
	}
	e := &AmbiguousError{Typed: typed, Matches: match}
	if len(match) > MaxListed {
		e.Matches, e.More = match[:MaxListed], true
	}
	return Candidate{}, e
}
