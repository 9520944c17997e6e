package approvals

import (
	"slices"
	"strings"
)

// The prefixes of approver entries and actor identities this package
// reads. An entry is "group:<name>", "person:<name>" or an identity
// ("<channel>:<platform user id>"); an identity starting with "agent:" is
// an AI agent's, which may ask but never decide, and one starting with
// "schedule:" is a schedule's (the requester of its runs), which never
// decides either.
const (
	GroupPrefix    = "group:"
	PersonPrefix   = "person:"
	AgentPrefix    = "agent:"
	SchedulePrefix = "schedule:"
)

// IsAgent reports whether identity belongs to an AI agent. Agents never
// decide an approval, whatever a configuration or a token says.
func IsAgent(identity string) bool { return strings.HasPrefix(identity, AgentPrefix) }

// NeverDecides reports whether identity is a machine's that may request
// work but never decide, approve, answer a question put to people or count
// as an approver, whatever a configuration or a token says: an AI agent
// ("agent:") or a schedule ("schedule:"). It is the one test of it:
// MayDecide (so Decide) and core/authority (every surface: deciding,
// answering, an approver's standing) ask it, so a new kind of machine
// identity is added here.
func NeverDecides(identity string) bool {
	return IsAgent(identity) || strings.HasPrefix(identity, SchedulePrefix)
}

// Directory knows who is who: which identities belong to one human (the
// configuration's people) and who is in each approver group. Quorum,
// self-approval and eligibility are judged on persons, so one human with
// two identities counts once and never approves their own call through the
// other one. An identity no person lists is its own person.
//
// A Directory is immutable once built and safe for concurrent use; a
// configuration reload builds a new one.
type Directory struct {
	people map[string][]string // person name → identities
	person map[string]string   // identity → person name
	groups map[string][]string // group name → entries
	known  map[string]bool     // identities named by people or groups
}

// NewDirectory builds a directory from people (person name → identities)
// and groups (group name → entries: identities or "person:<name>"). Either
// may be nil. An identity listed under two persons belongs to the first in
// name order (config check refuses such a configuration).
func NewDirectory(people, groups map[string][]string) *Directory {
	d := &Directory{people: map[string][]string{}, person: map[string]string{}, groups: map[string][]string{}, known: map[string]bool{}}
	names := make([]string, 0, len(people))
	for name := range people {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		ids := slices.Clone(people[name])
		d.people[name] = ids
		for _, id := range ids {
			if _, taken := d.person[id]; !taken {
				d.person[id] = name
			}
			d.known[id] = true
		}
	}
	for g, entries := range groups {
		d.groups[g] = slices.Clone(entries)
		for _, e := range entries {
			if name, ok := strings.CutPrefix(e, PersonPrefix); ok {
				for _, id := range d.people[name] {
					d.known[id] = true
				}
				continue
			}
			d.known[e] = true
		}
	}
	return d
}

// Person names the human behind identity: "person:<name>" for an identity
// the configuration's people list, otherwise the identity itself.
func (d *Directory) Person(identity string) string {
	if d != nil {
		if name, ok := d.person[identity]; ok {
			return PersonPrefix + name
		}
	}
	return identity
}

// SamePerson reports whether two identities belong to one human.
func (d *Directory) SamePerson(a, b string) bool { return a == b || d.Person(a) == d.Person(b) }

// Known reports whether identity is named by the configuration: listed
// under a person or in an approver group (directly or through a person).
func (d *Directory) Known(identity string) bool { return d != nil && d.known[identity] }

// Expand turns approver entries ("group:sre", "person:alice",
// "slack:U1") into identities, in order and without duplicates. A person
// expands to all of their identities, and so does any identity of a
// person: eligibility belongs to the human, whichever identity the
// configuration names. Unknown groups and persons expand to nothing; agent
// identities never expand (agents never decide).
func (d *Directory) Expand(entries []string) []string {
	seen := map[string]bool{}
	var out []string
	var add func(e string, depth int)
	addPerson := func(name string) {
		for _, id := range d.people[name] {
			if !seen[id] && !NeverDecides(id) {
				seen[id] = true
				out = append(out, id)
			}
		}
	}
	add = func(e string, depth int) {
		switch {
		case strings.HasPrefix(e, GroupPrefix):
			if depth > 0 { // groups do not nest
				return
			}
			for _, m := range d.groups[strings.TrimPrefix(e, GroupPrefix)] {
				add(m, depth+1)
			}
		case strings.HasPrefix(e, PersonPrefix):
			addPerson(strings.TrimPrefix(e, PersonPrefix))
		case NeverDecides(e):
		default:
			if name, ok := d.person[e]; ok {
				addPerson(name)
				return
			}
			if !seen[e] {
				seen[e] = true
				out = append(out, e)
			}
		}
	}
	if d == nil {
		d = NewDirectory(nil, nil)
	}
	for _, e := range entries {
		add(e, 0)
	}
	return out
}

// Persons counts the distinct humans among identities.
func (d *Directory) Persons(identities []string) int {
	seen := map[string]bool{}
	for _, id := range identities {
		seen[d.Person(id)] = true
	}
	return len(seen)
}

// Expand turns approver entries into identities with groups alone (no
// people): see Directory.Expand.
func Expand(entries []string, groups map[string][]string) []string {
	return NewDirectory(nil, groups).Expand(entries)
}
